// At most so many CNI chains at once, ADD or DEL, the rest waiting their turn in order: a burst
// of pod starts (a node's reboot: 110 pods, each with its networks) must not fork hundreds of
// plugin processes at once, whose memory counts against knit's cgroup. Multus has no such
// bound and OOMs at its limit on node reboot (multus#1346).
export class ChainSlots {
  private free: number;
  private readonly waiting: (() => void)[] = [];
  /** The most chains that ran at once (bench, metrics). */
  peak = 0;

  constructor(readonly size: number) {
    this.free = size;
  }

  /** Chains waiting for a slot now. */
  get queued(): number {
    return this.waiting.length;
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.free > 0) this.free--;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.peak = Math.max(this.peak, this.size - this.free);
    try {
      return await fn();
    } finally {
      const next = this.waiting.shift();
      if (next) next(); // the slot passes straight to the next in line
      else this.free++;
    }
  }
}
