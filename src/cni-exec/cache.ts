// libcni's result cache, in its location and format, so a runtime that used libcni and knit
// can hand attachments over: <cacheDir>/results/<network>-<containerID>-<ifname>, a cniCacheV1
// JSON document holding the list's config (base64, as Go encodes []byte), the runtime's
// arguments and the chain's final result.
import { readdir, readFile } from 'node:fs/promises';
import { mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
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

const isMissing = (err: unknown) => (err as NodeJS.ErrnoException).code === 'ENOENT';

// Writing, reading and removing one attachment's file is synchronous, on tmpfs and on disk
// alike; listing them all (GC) stays asynchronous, as a node may hold thousands. None of them
// waits for a disk: like libcni, knit never fsyncs the cache (its own record is the journal,
// and the cache only has to outlive the process, like the kernel state it describes), so a
// write of a few KiB lands in the page cache in microseconds. The async forms cost a libuv pool
// hop per call, four per write and three per read, each longer than the work
// (bench/README.md, "Where knit-cni's time goes").

/** Written as libcni's cacheAdd writes it: straight to its name (O_TRUNC), no temporary file
 * and rename. On a disk the rename is the dearest part of the write (about 110 µs against
 * 50 for the create on this VM's ext4), and it buys nothing here: the sandbox's lock keeps
 * knit's own readers out until the write is done, and a kill -9 between create and write
 * leaves an empty file that DEL reads as no cached result, as libcni's DEL does. The results
 * directory is made only when the write finds it missing (the first write, or someone
 * removed it). */
export function writeCache(cacheDir: string, entry: CachedAttachment): void {
  const file = cacheFile(cacheDir, { network: entry.networkName, containerId: entry.containerId, ifName: entry.ifName });
  const text = JSON.stringify(entry);
  try {
    writeFileSync(file, text, { mode: 0o600 });
  } catch (err) {
    if (!isMissing(err)) throw err;
    mkdirSync(resultsDir(cacheDir), { recursive: true, mode: 0o700 });
    writeFileSync(file, text, { mode: 0o600 });
  }
}

/** The cached attachment, or undefined when there is none or it does not parse (a write a
 * crash cut short): libcni's DelNetworkList goes on without a cached result then, and so does
 * knit's DEL. */
export function readCache(cacheDir: string, k: AttachmentKey): CachedAttachment | undefined {
  let text;
  try {
    text = readFileSync(cacheFile(cacheDir, k), 'utf8');
  } catch (err) {
    if (isMissing(err)) return undefined;
    throw err;
  }
  try {
    return JSON.parse(text) as CachedAttachment;
  } catch {
    return undefined;
  }
}

export function removeCache(cacheDir: string, k: AttachmentKey): void {
  try {
    unlinkSync(cacheFile(cacheDir, k));
  } catch (err) {
    if (!isMissing(err)) throw err;
  }
}

/** Every cached attachment of a network (libcni's GetCachedAttachments, one network), or of
 * every network. The file name is ambiguous (ids may hold "-"), so the document's own fields
 * decide. */
export async function listCache(cacheDir: string, network?: string): Promise<CachedAttachment[]> {
  let names: string[];
  try {
    names = await readdir(resultsDir(cacheDir));
  } catch (err) {
    if (isMissing(err)) return [];
    throw err;
  }
  const out: CachedAttachment[] = [];
  // Temporary files are an older knit's (it wrote under a temporary name and renamed).
  for (const name of names.filter((n) => (network === undefined || n.startsWith(`${network}-`)) && !n.endsWith(TMP_SUFFIX))) {
    try {
      const doc = JSON.parse(await readFile(path.join(resultsDir(cacheDir), name), 'utf8')) as CachedAttachment;
      if (doc.kind === 'cniCacheV1' && (network === undefined ? !!doc.networkName : doc.networkName === network)) out.push(doc);
    } catch {
      // a file being written, or not libcni's: not an attachment
    }
  }
  return out;
}

