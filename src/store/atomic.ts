// Crash-safe file replacement. After atomicWriteFile resolves, a reader (or a reboot, or a
// crash) sees either the old content or the new, never a mix: the data is written to a
// temporary file in the same directory, fsync'd, renamed over the target (rename is atomic
// within one filesystem), and the directory is fsync'd so the rename itself is on disk.

import { open, rename, unlink } from 'node:fs/promises';
import { closeSync, openSync, renameSync, statfsSync, unlinkSync, writeSync } from 'node:fs';
import path from 'node:path';

/** Temporary files end with this; a store removes leftovers (a crash mid-write) on open. */
export const TMP_SUFFIX = '.tmp';

let counter = 0;

export async function atomicWriteFile(file: string, data: string | Uint8Array, mode = 0o600): Promise<void> {
  const tmp = tmpNameFor(file);
  const handle = await open(tmp, 'wx', mode);
  try {
    await handle.writeFile(data);
    await handle.sync();
  } catch (err) {
    await handle.close().catch(() => {});
    await unlink(tmp).catch(() => {});
    throw err;
  }
  await handle.close();
  try {
    await rename(tmp, file);
  } catch (err) {
    await unlink(tmp).catch(() => {});
    throw err;
  }
  await fsyncDir(path.dirname(file));
}

/** A hidden sibling named after the target, unless that would pass NAME_MAX (255 bytes). By
 * string slicing: file is a normalized path (the stores make it), and path's functions run on
 * every record write. */
function tmpNameFor(file: string): string {
  const slash = file.lastIndexOf('/');
  const base = file.slice(slash + 1);
  const stem = base.length <= 66 || Buffer.byteLength(base) <= 200 ? base : 'long-name';
  return `${file.slice(0, slash + 1)}.${stem}.${process.pid}-${++counter}${TMP_SUFFIX}`;
}

/** Delete a file and make the deletion durable. A file already gone is not an error. */
export async function removeFile(file: string): Promise<void> {
  try {
    await unlink(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  await fsyncDir(path.dirname(file));
}

/** Flush a directory's entries (creates, renames, unlinks) to disk. */
export async function fsyncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** statfs f_type of tmpfs (linux/magic.h). */
const TMPFS_MAGIC = 0x01021994;

/** True when dir lives in memory (tmpfs: /run on a systemd node, /dev/shm). There the whole
 * write-rename is a few microseconds of syscalls, less than one hop through the libuv pool, so
 * the *Sync variants below are the faster way and block the loop for no longer. */
export function onTmpfs(dir: string): boolean {
  try {
    return statfsSync(dir).type === TMPFS_MAGIC;
  } catch {
    return false;
  }
}

// On tmpfs there is no disk to flush: its fsync does nothing (the kernel's noop_fsync), on a
// file or a directory. The in-memory variants below skip those calls; the rename alone makes
// the replacement atomic for every reader, and a crash of knit cannot undo it.

/** atomicWriteFile's replacement, synchronously, for a directory on tmpfs only (see onTmpfs). */
export function replaceInMemoryFile(file: string, data: string | Uint8Array, mode = 0o600): void {
  const tmp = tmpNameFor(file);
  const fd = openSync(tmp, 'wx', mode);
  try {
    const bytes = typeof data === 'string' ? Buffer.from(data) : data;
    for (let off = 0; off < bytes.length; ) off += writeSync(fd, bytes, off);
  } catch (err) {
    closeSync(fd);
    try { unlinkSync(tmp); } catch { /* best effort */ }
    throw err;
  }
  closeSync(fd);
  try {
    renameSync(tmp, file);
  } catch (err) {
    try { unlinkSync(tmp); } catch { /* best effort */ }
    throw err;
  }
}

/** Deletes a file in a tmpfs directory; a file already gone is not an error. */
export function removeInMemoryFile(file: string): void {
  try {
    unlinkSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}
