// libcni's result cache, in its location and format, so a runtime that used libcni and knit
// can hand attachments over: <cacheDir>/results/<network>-<containerID>-<ifname>, a cniCacheV1
// JSON document holding the list's config (base64, as Go encodes []byte), the runtime's
// arguments and the chain's final result.
import { mkdir, readdir, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { TMP_SUFFIX } from '../store/atomic.js';

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

/** Written whole under a temporary name and renamed, so a reader (or a kill -9) never sees half
 * of it; not fsync'd, as libcni does not: knit's own record is the journal, and the cache only
 * has to survive the process, like the kernel state it describes. */
export async function writeCache(cacheDir: string, entry: CachedAttachment): Promise<void> {
  await mkdir(resultsDir(cacheDir), { recursive: true, mode: 0o700 });
  const file = cacheFile(cacheDir, { network: entry.networkName, containerId: entry.containerId, ifName: entry.ifName });
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}${TMP_SUFFIX}`);
  await writeFile(tmp, JSON.stringify(entry), { mode: 0o600 });
  await rename(tmp, file);
}

export async function readCache(cacheDir: string, k: AttachmentKey): Promise<CachedAttachment | undefined> {
  let text;
  try {
    text = await readFile(cacheFile(cacheDir, k), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  return JSON.parse(text) as CachedAttachment;
}

export async function removeCache(cacheDir: string, k: AttachmentKey): Promise<void> {
  await unlink(cacheFile(cacheDir, k)).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'ENOENT') throw err;
  });
}

/** Every cached attachment of a network (libcni's GetCachedAttachments, one network). The file
 * name is ambiguous (ids may hold "-"), so the document's own fields decide. */
export async function listCache(cacheDir: string, network: string): Promise<CachedAttachment[]> {
  let names: string[];
  try {
    names = await readdir(resultsDir(cacheDir));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
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
