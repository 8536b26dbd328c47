// Files knit writes for a launcher (Kata's DAN file, a DRA claim's CDI spec), as root, at a path a request helped pick.
// So: the directory must resolve (symlinks followed) inside the configured one; the file is
// created exclusively, never over something already there (a symlink included: link(2) does
// not follow its target name); and it is removed only while it still holds what knit wrote.
import { createHash, randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { link, lstat, mkdir, open, readdir, readFile, realpath, unlink } from 'node:fs/promises';
import path from 'node:path';
import type { FileRemoveAction, FileWriteAction } from '../base/ops.js';
import { KnitError } from '../base/errors.js';
import { atomicWriteFile, fsyncDir } from '../store/atomic.js';

// The temporary file's name is short whatever the file's (a sandbox id may be 253 characters):
// a digest of the file's name, so a leftover is found from the name alone.
const tmpStem = (file: string) => `.knit-${createHash('sha256').update(path.basename(file)).digest('hex').slice(0, 16)}.`;
const TMP_TAIL = /^[0-9a-f]{12}\.tmp$/;
const tmpName = (file: string) => `${tmpStem(file)}${randomBytes(6).toString('hex')}.tmp`;

const inside = (dir: string, root: string) => dir === root || dir.startsWith(root === '/' ? '/' : `${root}/`);

/** The file's directory, checked to lie inside `within` once symlinks are resolved. The
 * configured directory itself is made if missing; a directory below it must exist. */
async function confinedDir(file: string, within: string, key: string): Promise<string> {
  const dir = path.dirname(file);
  await mkdir(within, { recursive: true, mode: 0o755 });
  const realDir = await realpath(dir).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'ENOENT') throw err;
    throw new KnitError('FAILED_PRECONDITION', `${dir} does not exist; knit makes only ${within} itself (config ${key})`);
  });
  const realRoot = await realpath(within);
  if (!inside(realDir, realRoot)) {
    throw new KnitError('FAILED_PRECONDITION', `${dir} resolves to ${realDir}, outside ${realRoot} (config ${key}), the directory knit writes it in; knit does not follow it`);
  }
  return dir;
}

export async function writeOwnedFile(a: FileWriteAction): Promise<void> {
  // A record from before confinement: written as it was then.
  if (a.within === undefined) return atomicWriteFile(a.path, a.content, a.mode ?? 0o644);
  const dir = await confinedDir(a.path, a.within, a.withinKey ?? 'kata.danDir');
  // Complete before it appears under its name (a launcher may be looking), then linked there:
  // link(2) fails with EEXIST whatever is at the name, and replaces nothing.
  const tmp = path.join(dir, tmpName(a.path));
  const handle = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, a.mode ?? 0o644);
  try {
    await handle.writeFile(a.content);
    await handle.sync();
    await handle.close();
    await link(tmp, a.path);
  } catch (err) {
    await handle.close().catch(() => undefined);
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
      throw new KnitError('ALREADY_EXISTS', `${a.path} already exists and knit did not write it (config ${a.withinKey ?? 'kata.danDir'}); knit never replaces a file it did not make (remove it if it is a stale one)`);
    }
    throw err;
  } finally {
    await unlink(tmp).catch(() => undefined);
  }
  await fsyncDir(dir);
}

/** What a kill -9 between creating writeOwnedFile's temporary file and unlinking it leaves. */
async function removeTmpLeftovers(file: string): Promise<void> {
  const stem = tmpStem(file);
  const names = await readdir(path.dirname(file)).catch(() => [] as string[]);
  for (const name of names) {
    if (name.startsWith(stem) && TMP_TAIL.test(name.slice(stem.length))) await unlink(path.join(path.dirname(file), name)).catch(() => undefined);
  }
}

export async function removeOwnedFile(a: FileRemoveAction): Promise<void> {
  if (a.sha256 !== undefined) {
    await removeTmpLeftovers(a.path);
    let st;
    try {
      st = await lstat(a.path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return; // never written, or gone
      throw err;
    }
    if (!st.isFile()) return; // a symlink, a directory: not what knit wrote
    const handle = await open(a.path, constants.O_RDONLY | constants.O_NOFOLLOW);
    const content = await readFile(handle).finally(() => handle.close());
    if (createHash('sha256').update(content).digest('hex') !== a.sha256) return; // someone else's now
  }
  try {
    await unlink(a.path);
  } catch (err) {
    if (!((a.ignoreMissing || a.sha256 !== undefined) && (err as NodeJS.ErrnoException).code === 'ENOENT')) throw err;
  }
}
