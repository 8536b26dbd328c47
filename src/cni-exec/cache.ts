// libcni's result cache, in its location and format, so a runtime that used libcni and knit
// can hand attachments over: <cacheDir>/results/<network>-<containerID>-<ifname>, a cniCacheV1
// JSON document holding the list's config (base64, as Go encodes []byte), the runtime's
// arguments and the chain's final result.
import { mkdir, open, readdir, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { existsSync, mkdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { onTmpfs, TMP_SUFFIX } from '../store/atomic.js';

export interface CachedAttachment {
  kind: 'cniCacheV1';
  containerId: string;
  /** base64 of the conflist text. */
  config: string;
  ifName: string;
  networkName: string;
  netns?: string;
  cniArgs?: [string, string][];
  capabilityArgs?: Record<string, unknown>;
  result?: Record<string, unknown>;
}

export interface AttachmentKey { network: string; containerId: string; ifName: string }

export const resultsDir = (cacheDir: string) => path.join(cacheDir, 'results');
export const cacheFile = (cacheDir: string, k: AttachmentKey) => path.join(resultsDir(cacheDir), `${k.network}-${k.containerId}-${k.ifName}`);

/** Cache directories on tmpfs, decided once per directory: there each file operation is a few
 * microseconds of syscalls, less than one hop through libuv's thread pool, so the cache is
 * read and written synchronously, as the record store does on tmpfs (src/store/atomic.ts). */
const inMemory = new Map<string, boolean>();
function syncHere(cacheDir: string): boolean {
  let known = inMemory.get(cacheDir);
  if (known === undefined) {
    if (!existsSync(cacheDir)) return false; // decided once the first write has made it
    known = onTmpfs(cacheDir);
    inMemory.set(cacheDir, known);
  }
  return known;
}

const isMissing = (err: unknown) => (err as NodeJS.ErrnoException).code === 'ENOENT';

/** Written whole under a temporary name and renamed, so a reader (or a kill -9) never sees half
 * of it; not fsync'd, as libcni does not: knit's own record is the journal, and the cache only
 * has to survive the process, like the kernel state it describes. The results directory is
 * made only when the write finds it missing (the first write, or someone removed it). */
export async function writeCache(cacheDir: string, entry: CachedAttachment): Promise<void> {
  const file = cacheFile(cacheDir, { network: entry.networkName, containerId: entry.containerId, ifName: entry.ifName });
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}${TMP_SUFFIX}`);
  const text = JSON.stringify(entry);
  if (syncHere(cacheDir)) {
    try {
      writeFileSync(tmp, text, { mode: 0o600 });
    } catch (err) {
      if (!isMissing(err)) throw err;
      mkdirSync(resultsDir(cacheDir), { recursive: true, mode: 0o700 });
      writeFileSync(tmp, text, { mode: 0o600 });
    }
    renameSync(tmp, file);
    return;
  }
  await writeFile(tmp, text, { mode: 0o600 }).catch(async (err: unknown) => {
    if (!isMissing(err)) throw err;
    await mkdir(resultsDir(cacheDir), { recursive: true, mode: 0o700 });
    await writeFile(tmp, text, { mode: 0o600 });
  });
  await rename(tmp, file);
}

/** open, read, close: three pool hops where readFile takes four (it fstat()s for the size
 * first); a cache file is a few KiB. */
async function readSmall(file: string): Promise<string> {
  const handle = await open(file, 'r');
  try {
    const chunks: Buffer[] = [];
    let n;
    do {
      const buf = Buffer.allocUnsafe(READ_CHUNK);
      ({ bytesRead: n } = await handle.read(buf, 0, READ_CHUNK, null));
      chunks.push(buf.subarray(0, n));
    } while (n === READ_CHUNK);
    return Buffer.concat(chunks).toString('utf8');
  } finally {
    await handle.close();
  }
}
const READ_CHUNK = 64 << 10;

export async function readCache(cacheDir: string, k: AttachmentKey): Promise<CachedAttachment | undefined> {
  let text;
  try {
    text = syncHere(cacheDir) ? readFileSync(cacheFile(cacheDir, k), 'utf8') : await readSmall(cacheFile(cacheDir, k));
  } catch (err) {
    if (isMissing(err)) return undefined;
    throw err;
  }
  return JSON.parse(text) as CachedAttachment;
}

export async function removeCache(cacheDir: string, k: AttachmentKey): Promise<void> {
  try {
    if (syncHere(cacheDir)) unlinkSync(cacheFile(cacheDir, k));
    else await unlink(cacheFile(cacheDir, k));
  } catch (err) {
    if (!isMissing(err)) throw err;
  }
}

/** Every cached attachment of a network (libcni's GetCachedAttachments, one network). The file
 * name is ambiguous (ids may hold "-"), so the document's own fields decide. */
export async function listCache(cacheDir: string, network: string): Promise<CachedAttachment[]> {
  let names: string[];
  try {
    names = await readdir(resultsDir(cacheDir));
  } catch (err) {
    if (isMissing(err)) return [];
    throw err;
  }
  const out: CachedAttachment[] = [];
  for (const name of names.filter((n) => n.startsWith(`${network}-`) && !n.endsWith(TMP_SUFFIX))) {
    try {
      const doc = JSON.parse(await readFile(path.join(resultsDir(cacheDir), name), 'utf8')) as CachedAttachment;
      if (doc.kind === 'cniCacheV1' && doc.networkName === network) out.push(doc);
    } catch {
      // a file being written, or not libcni's: not an attachment
    }
  }
  return out;
}
