// Every sysfs read and write knit makes goes through one Sysfs object rooted at a directory:
// '/sys' in production, a per-test fake tree in tests. Paths are relative to the root
// ('bus/pci/devices/0000:3b:02.0/driver'). Reads that find nothing return undefined rather than
// throwing, because absence is the normal answer in sysfs (no driver, no physfn, no net/).
//
// I/O is async on purpose: a write to drivers/<x>/bind runs the driver's probe in the writing
// thread, and some probes (mlx5) take seconds; that must not stall the daemon's event loop. A
// read takes two thread-pool hops (open, read; the close is not waited for) where readFile
// takes four or five: an attach reads some twenty attributes of its device. The first read goes
// into a small slice of node's Buffer pool: a page-sized buffer per read is a malloc of its own
// (node pools only what is under half its 8 KiB pool), and an inventory scan of 70 functions
// holds some 900 of them at once, until a full GC frees them: 3 MiB of the daemon's C heap that
// stays resident after it (bench/README.md, "The DRA driver: memory and restart").
import { close, open, read, promises as fs } from 'node:fs';
import path from 'node:path';

export class Sysfs {
  readonly root: string;

  constructor(root = '/sys') {
    this.root = path.resolve(root);
  }

  /** Absolute path of a sysfs-relative one. */
  path(rel: string): string {
    return path.join(this.root, rel);
  }

  /** File content with the trailing newline removed, or undefined if it does not exist. */
  async read(rel: string): Promise<string | undefined> {
    const file = this.path(rel);
    const start = await readStart(file);
    if (start === undefined || start.length < FIRST_READ) return start?.toString('utf8').replace(/\n$/, '');
    return (await fs.readFile(file, 'utf8')).replace(/\n$/, ''); // longer than any attribute knit reads
  }

  /** A decimal or 0x-hex integer file; undefined if missing or not a number. */
  async readInt(rel: string): Promise<number | undefined> {
    const text = (await this.read(rel))?.trim();
    if (text === undefined || !/^(-?\d+|0x[0-9a-f]+)$/i.test(text)) return undefined;
    return Number(text);
  }

  /** Symlink target, or undefined if the link does not exist. */
  async readlink(rel: string): Promise<string | undefined> {
    try {
      return await fs.readlink(this.path(rel));
    } catch (err) {
      if (isMissing(err) || (err as NodeJS.ErrnoException).code === 'EINVAL') return undefined;
      throw err;
    }
  }

  /** Last component of a symlink's target: `driver` -> "mlx5_core", `physfn` -> its BDF. */
  async linkName(rel: string): Promise<string | undefined> {
    const target = await this.readlink(rel);
    return target === undefined ? undefined : path.posix.basename(target);
  }

  /** The path relative to the root after following every symlink, or undefined. */
  async realpath(rel: string): Promise<string | undefined> {
    try {
      return path.relative(this.root, await fs.realpath(this.path(rel)));
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
  }

  /** Directory entries, sorted; [] if the directory does not exist. */
  async list(rel: string): Promise<string[]> {
    try {
      return (await fs.readdir(this.path(rel))).sort();
    } catch (err) {
      if (isMissing(err)) return [];
      throw err;
    }
  }

  async exists(rel: string): Promise<boolean> {
    try {
      await fs.lstat(this.path(rel));
      return true;
    } catch (err) {
      if (isMissing(err)) return false;
      throw err;
    }
  }

  /**
   * Write one sysfs attribute. sysfs takes the whole value in one write(2); the kernel's answer
   * (EBUSY, ENODEV, EINVAL ...) comes back as the write's error. Tests subclass this to let a
   * simulated kernel react to the write.
   */
  async write(rel: string, value: string): Promise<void> {
    // 'r+' never creates a file: writing a sysfs attribute that does not exist is an error,
    // not a new regular file.
    const handle = await fs.open(this.path(rel), 'r+');
    try {
      await handle.write(value);
    } finally {
      await handle.close();
    }
  }
}

/** One show() of a sysfs attribute fills a page, and the first read(2) returns as much of it as
 * asked (Documentation/filesystems/sysfs.rst): a short first read is the whole value. The values
 * knit reads (IDs, a MAC, an MTU, a driver name) are well under this; node pools a Buffer this
 * small. */
const FIRST_READ = 256;

/** Up to FIRST_READ bytes from the start of a file; undefined if it does not exist. */
function readStart(file: string): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    open(file, 'r', (err, fd) => {
      if (err) return isMissing(err) ? resolve(undefined) : reject(err);
      const buf = Buffer.allocUnsafe(FIRST_READ);
      read(fd, buf, 0, FIRST_READ, 0, (readErr, n) => {
        close(fd, () => undefined);
        if (readErr) reject(readErr);
        else resolve(buf.subarray(0, n));
      });
    });
  });
}

export function isMissing(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}
