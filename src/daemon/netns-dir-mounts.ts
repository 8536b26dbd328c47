// The bind mounts knit makes of a netns directory onto itself. Pinning a netns (KNI
// CreateNetwork, native/src/netns_pin.cc) first makes the pin's directory a shared mount
// point, binding it onto itself when it is not one yet, as `ip netns add` does. knit remembers
// each directory it bound (a record under runDir, written before the bind, with the mount's id
// once it exists) and unmounts it when its last pin there goes, or at the next start after a
// crash. It never unmounts a directory it did not bind, nor one anything is still mounted on
// (someone else's `ip netns add` pin in the same directory keeps it).
import { execFile } from 'node:child_process';
import { readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { RecordStore } from '../store/index.js';

interface BoundDir {
  dir: string;
  /** /proc/self/mountinfo's mount ID of knit's bind; absent if knit crashed before it could
   * read it back (then the topmost mount at dir is taken to be it). */
  mountId?: number;
}

interface Mount { id: number; parent: number; mountPoint: string }

/** proc(5): mountinfo escapes space, tab, newline and backslash as \ooo. */
const unescape = (s: string) => s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));

function mounts(): Mount[] {
  return readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter(Boolean).map((line) => {
    const [id, parent, , , mountPoint] = line.split(' ');
    return { id: Number(id), parent: Number(parent), mountPoint: unescape(mountPoint) };
  });
}

/** The mount at dir that is visible: mountinfo lists a mount after the one it covers. */
const topAt = (all: Mount[], dir: string) => all.filter((m) => m.mountPoint === dir).at(-1);

function realDir(dir: string): string | undefined {
  try {
    return realpathSync(dir);
  } catch {
    return undefined;
  }
}

/** umount(8), not lazy: it fails (EBUSY) rather than detach a mount something still uses. */
const unmount = (dir: string) =>
  new Promise<void>((resolve, reject) => {
    execFile('/usr/bin/umount', [dir], (err, _out, stderr) => (err ? reject(new Error(`umount ${dir}: ${stderr.trim() || err.message}`)) : resolve()));
  });

export class NetnsDirMounts {
  /** Binds and unbinds run one at a time, so "was dir a mount point before?" stays true. */
  private queue: Promise<unknown> = Promise.resolve();

  private constructor(private readonly store: RecordStore<BoundDir>) {}

  static async open(runDir: string, onProblem: (p: { file: string; reason: string }) => void): Promise<NetnsDirMounts> {
    return new NetnsDirMounts(await RecordStore.open<BoundDir>(path.join(runDir, 'netns-dir-mounts'), undefined, { onProblem }));
  }

  private serial<T>(job: () => Promise<T>): Promise<T> {
    const run = this.queue.then(job, job);
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** Runs pin (which may bind dir onto itself) and remembers the bind if it made one. */
  pinIn(dir: string, pin: () => Promise<void>): Promise<void> {
    return this.serial(async () => {
      const before = realDir(dir);
      const top = before === undefined ? undefined : topAt(mounts(), before);
      const bound = this.store.get(dir);
      if (top) {
        // A record whose mount is no longer the one there is stale (unmounted under knit).
        if (bound?.mountId !== undefined && bound.mountId !== top.id) await this.store.remove(dir);
        return pin(); // knit's own bind from before, or someone else's mount
      }
      await this.store.put(dir, { dir }); // before the bind: a crash right after it still knows
      try {
        await pin();
      } finally {
        const now = realDir(dir);
        const made = now === undefined ? undefined : topAt(mounts(), now);
        if (made) await this.store.put(dir, { dir, mountId: made.id });
        else await this.store.remove(dir);
      }
    });
  }

  /** Unmounts dir if knit bound it and nothing is mounted on it any more; forgets it once its
   * mount is gone. A dir still in use stays remembered, for the next release. */
  release(dir: string): Promise<void> {
    return this.serial(async () => {
      const bound = this.store.get(dir);
      if (!bound) return;
      const real = realDir(dir);
      const all = mounts();
      const top = real === undefined ? undefined : topAt(all, real);
      const mine = bound.mountId === undefined ? top : all.find((m) => m.id === bound.mountId && m.mountPoint === real);
      if (!mine) {
        await this.store.remove(dir); // unmounted already (a reboot, an operator)
        return;
      }
      if (all.some((m) => m.parent === mine.id)) return; // a pin or a mount on top of it is not knit's to drop
      await unmount(real!);
      await this.store.remove(dir);
    });
  }

  dirs(): string[] {
    return [...this.store.values()].map((b) => b.dir);
  }
}
