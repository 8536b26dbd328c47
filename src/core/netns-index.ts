// Sandbox ids by their netns identity (dev, inode), so the "one sandbox per live netns" check
// costs the same with 10 records or 10,000. Built from the records on first use, then kept in
// step with every record write.
import type { SandboxRecord } from './record.js';

export class NetnsIndex {
  private index?: Map<string, Set<string>>;

  constructor(private readonly records: () => Iterable<SandboxRecord>) {}

  sandboxesIn(id: { dev: number; ino: number }): Iterable<string> {
    if (!this.index) {
      this.index = new Map();
      for (const r of this.records()) this.update(r, true);
    }
    return this.index.get(`${id.dev}:${id.ino}`) ?? [];
  }

  update(rec: SandboxRecord, present: boolean): void {
    if (!this.index) return; // built lazily from the records, which already say it
    const key = `${rec.netns.dev}:${rec.netns.ino}`;
    const ids = this.index.get(key) ?? new Set<string>();
    if (present) ids.add(rec.sandboxId);
    else ids.delete(rec.sandboxId);
    if (ids.size) this.index.set(key, ids);
    else this.index.delete(key);
  }
}
