// `knit install-cni` / `knit uninstall-cni`: put knit-cni into a CNI bin dir and a conflist
// into a CNI conf dir, the way node network daemons install their plugin. Each file is
// written to a temporary name and renamed (a runtime never reads half a file), and neither
// command touches a file knit did not write: the conflist carries INSTALLED_BY_KEY, the shim
// carries SHIM_MARKER in its bytes. What was installed is recorded in the daemon's state dir
// (installRecordPath), so CNI STATUS can tell the runtime when the install is no longer whole.
import { open, readFile, rename, rm, chmod, mkdir, copyFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { KnitError } from '../base/errors.js';

export const INSTALLED_BY_KEY = 'knit.dev/installed-by';
const SHIM_MARKER = 'knit-cni-shim-marker/1';
export const SHIM_NAME = 'knit';

/** The shim the build made (build/native/knit-cni). */
export const BUILT_SHIM = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'native', 'knit-cni');

export interface InstallOptions {
  binDir: string;
  confDir: string;
  /** knit network; '' = the daemon's default network. */
  network: string;
  socket: string;
  deleteQueue: string;
  /** conflist file name (the runtime picks the first in lexical order). */
  fileName: string;
  /** CNI network name in the conflist (what runtimes select by). */
  networkName: string;
  shim?: string;
  /** Where to record what was installed (installRecordPath of the daemon's stateDir). */
  record?: string;
}

/** The daemon's record of `knit install-cni`: the two files CNI STATUS checks. */
export const installRecordPath = (stateDir: string) => path.join(stateDir, 'cni-install.json');

interface InstallRecord {
  shim: string;
  conflist: string;
}

export function conflist(o: InstallOptions): object {
  return {
    cniVersion: '1.0.0',
    name: o.networkName,
    [INSTALLED_BY_KEY]: 'knit install-cni',
    plugins: [
      {
        type: SHIM_NAME,
        ...(o.network ? { network: o.network } : {}),
        socket: o.socket,
        deleteQueue: o.deleteQueue,
        capabilities: { portMappings: true, bandwidth: true, ips: true, mac: true, 'io.kubernetes.cri.pod-annotations': true },
      },
    ],
  };
}

async function contentOf(file: string): Promise<Buffer | undefined> {
  try {
    return await readFile(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

function conflistIsKnits(bytes: Buffer): boolean {
  try {
    return (JSON.parse(bytes.toString('utf8')) as Record<string, unknown>)[INSTALLED_BY_KEY] !== undefined;
  } catch {
    return false;
  }
}

const shimIsKnits = (bytes: Buffer) => bytes.includes(SHIM_MARKER);

/** Refuses when `file` exists and knit did not write it. */
async function mayReplace(file: string, isKnits: (b: Buffer) => boolean): Promise<void> {
  const bytes = await contentOf(file);
  if (bytes && !isKnits(bytes)) throw new KnitError('FAILED_PRECONDITION', `${file} exists and was not written by knit; not replacing it`);
}

async function syncDir(dir: string): Promise<void> {
  const fd = await open(dir, 'r');
  await fd.sync().finally(() => fd.close());
}

async function writeAtomically(file: string, fill: (tmp: string) => Promise<void>, mode: number): Promise<void> {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.knit-tmp-${process.pid}`);
  try {
    await fill(tmp);
    await chmod(tmp, mode);
    const fd = await open(tmp, 'r');
    await fd.sync().finally(() => fd.close());
    await rename(tmp, file);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  await syncDir(path.dirname(file));
}

export async function installCni(o: InstallOptions): Promise<{ shim: string; conflist: string }> {
  const shimTarget = path.join(o.binDir, SHIM_NAME);
  const confTarget = path.join(o.confDir, o.fileName);
  await mayReplace(shimTarget, shimIsKnits);
  await mayReplace(confTarget, conflistIsKnits);
  const source = o.shim ?? BUILT_SHIM;
  const shimBytes = await contentOf(source);
  if (!shimBytes || !shimIsKnits(shimBytes)) throw new KnitError('FAILED_PRECONDITION', `${source} is not a knit-cni build (run npm run build:native)`);
  await mkdir(o.binDir, { recursive: true });
  await mkdir(o.confDir, { recursive: true });
  // The shim first: a runtime that sees the conflist must find the plugin it names.
  await writeAtomically(shimTarget, (tmp) => copyFile(source, tmp), 0o755);
  await writeAtomically(confTarget, async (tmp) => {
    const fd = await open(tmp, 'w', 0o644);
    await fd.writeFile(`${JSON.stringify(conflist(o), null, 2)}\n`).finally(() => fd.close());
  }, 0o644);
  if (o.record) {
    const record: InstallRecord = { shim: shimTarget, conflist: confTarget };
    await mkdir(path.dirname(o.record), { recursive: true, mode: 0o700 });
    await writeAtomically(o.record, (tmp) => writeFile(tmp, `${JSON.stringify(record)}\n`), 0o600);
  }
  return { shim: shimTarget, conflist: confTarget };
}

/**
 * Why the recorded install is not whole ([] when it is, or when knit-cni was installed by other
 * means and nothing was recorded): each file must still be there and still be knit's.
 */
export async function installProblems(recordFile: string): Promise<string[]> {
  const bytes = await contentOf(recordFile);
  if (!bytes) return [];
  let record: Partial<InstallRecord>;
  try {
    record = JSON.parse(bytes.toString('utf8')) as Partial<InstallRecord>;
  } catch {
    return [`${recordFile} is not JSON; run knit install-cni again`];
  }
  const problems: string[] = [];
  const checks: [string | undefined, (b: Buffer) => boolean, string][] = [
    [record.conflist, conflistIsKnits, 'conflist'],
    [record.shim, shimIsKnits, 'knit-cni'],
  ];
  for (const [file, isKnits, what] of checks) {
    if (!file) {
      problems.push(`${recordFile} names no ${what}`);
      continue;
    }
    const content = await contentOf(file);
    if (!content) problems.push(`the ${what} knit install-cni wrote (${file}) is missing`);
    else if (!isKnits(content)) problems.push(`${file} is no longer knit's ${what}`);
  }
  return problems;
}

/** Removes the conflist, then the shim, each only if knit wrote it. Answers what it removed. */
export async function uninstallCni(o: Pick<InstallOptions, 'binDir' | 'confDir' | 'fileName' | 'record'>): Promise<string[]> {
  const removed: string[] = [];
  const targets: [string, (b: Buffer) => boolean][] = [
    [path.join(o.confDir, o.fileName), conflistIsKnits],
    [path.join(o.binDir, SHIM_NAME), shimIsKnits],
  ];
  for (const [file, isKnits] of targets) {
    const bytes = await contentOf(file);
    if (!bytes) continue;
    if (!isKnits(bytes)) throw new KnitError('FAILED_PRECONDITION', `${file} was not written by knit; leaving it`);
    await rm(file);
    removed.push(file);
  }
  // The record goes only when it describes this install (another conf dir may be recorded).
  const record = o.record ? await contentOf(o.record) : undefined;
  if (o.record && record?.toString('utf8').includes(JSON.stringify(path.join(o.confDir, o.fileName)))) await rm(o.record, { force: true });
  return removed;
}
