// One operation at a time per key (sandbox id); different keys run concurrently.
export class KeyedLock {
  private readonly tails = new Map<string, Promise<unknown>>();

  /** True while an operation on key runs or waits (and for a moment after the last ends). */
  busy(key: string): boolean {
    return this.tails.has(key);
  }

  run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const tail = next.catch(() => undefined);
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return next;
  }
}
