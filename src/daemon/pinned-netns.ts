// The network namespaces knit pinned itself (KNI CreateNetwork). Remembered in a record store
// under runDir, so a restarted daemon still deletes what it made, and never deletes a
// namespace someone else pinned. The bind mount a pin may make of its directory goes with the
// last pin there (netns-dir-mounts.ts); a clean stop keeps both, since live pins need it.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { RecordStore } from '../store/index.js';
import { createNetns, deleteNetns } from '../net/netns.js';
import { KnitError } from '../base/errors.js';
import { NetnsDirMounts } from './netns-dir-mounts.js';

interface Pinned {
  path: string;
  createdAt: string;
  /** The sandbox attached into it (KNI AttachInterface), so DeleteNetwork{id} finds it after
   * DetachInterface has removed the sandbox's record. */
  sandboxId?: string;
}

/** A pin's directory, one spelling for all ("/run/netns/" and "/run/netns" are one). */
const dirOf = (file: string) => path.resolve(path.dirname(file));

export class PinnedNetns {
  private constructor(
    private readonly store: RecordStore<Pinned>,
    private readonly dirMounts: NetnsDirMounts,
    private readonly onProblem: (p: { file: string; reason: string }) => void,
  ) {}

  static async open(runDir: string, onProblem: (p: { file: string; reason: string }) => void): Promise<PinnedNetns> {
    const store = await RecordStore.open<Pinned>(path.join(runDir, 'pinned-netns'), undefined, { onProblem });
    // A reboot or someone's `ip netns del` may have removed some: forget those.
    for (const p of [...store.values()]) if (!existsSync(p.path)) await store.remove(p.path);
    const pinned = new PinnedNetns(store, await NetnsDirMounts.open(runDir, onProblem), onProblem);
    // A crash may have come between a last DeleteNetwork (or a failed create) and the unmount.
    for (const dir of pinned.dirMounts.dirs()) await pinned.releaseIfUnused(dir);
    return pinned;
  }

  async create(file: string): Promise<void> {
    const dir = dirOf(file);
    try {
      await this.dirMounts.pinIn(dir, () => createNetns(file).then(() => undefined));
    } catch (err) {
      await this.releaseIfUnused(dir); // a failed pin leaves no bind of its directory behind
      throw err;
    }
    try {
      await this.store.put(file, { path: file, createdAt: new Date().toISOString() });
    } catch (err) {
      // Unrecorded, knit would never delete it: take it back, so the error follows no change.
      await deleteNetns(file, { ignoreMissing: true }).catch(() => undefined);
      await this.releaseIfUnused(dir);
      throw err;
    }
  }

  /** Drops knit's bind of dir once no netns knit pinned lives there. A failed unmount is
   * reported, not raised: the netns itself is gone, and the bind stays recorded for next time. */
  private async releaseIfUnused(dir: string): Promise<void> {
    if ([...this.store.values()].some((p) => dirOf(p.path) === dir)) return;
    await this.dirMounts.release(dir).catch((err: Error) => this.onProblem({ file: dir, reason: `cannot unmount knit's bind of the netns dir: ${err.message}` }));
  }

  /** Notes that sandbox id was attached into the netns at file, if knit pinned it. */
  async claim(file: string, sandboxId: string): Promise<void> {
    const p = this.store.get(file);
    if (p && p.sandboxId !== sandboxId) await this.store.put(file, { ...p, sandboxId });
  }

  isPinned(file: string): boolean {
    return this.store.get(file) !== undefined;
  }

  /** Deletes a netns knit pinned. A path that is already gone is fine (DeleteNetwork twice);
   * one knit did not pin is refused; a bare sandbox id is resolved through claim(), and one
   * knit holds nothing for is already deleted. */
  async delete(idOrPath: string): Promise<void> {
    if (!idOrPath.startsWith('/')) {
      const claimed = [...this.store.values()].find((p) => p.sandboxId === idOrPath);
      if (claimed) await this.delete(claimed.path);
      return;
    }
    if (!this.store.get(idOrPath)) {
      if (!existsSync(idOrPath)) return;
      throw new KnitError('FAILED_PRECONDITION', `netns_path: knit did not create ${idOrPath}; it deletes only the namespaces its CreateNetwork pinned`, {
        field: 'netns_path',
      });
    }
    await deleteNetns(idOrPath, { ignoreMissing: true });
    await this.store.remove(idOrPath);
    await this.releaseIfUnused(dirOf(idOrPath));
  }
}
