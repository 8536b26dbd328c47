// Who else could change what knit trusts. knit runs as root and acts on what its config file
// says and on what lies in its directories (records it replays, sockets it answers on): a file
// or directory another user can write lets that user steer a root daemon. So knit refuses to
// start, naming the path, its mode and owner, when one of them (or a directory above it) is
// writable by someone other than root and knit's own uid. A sticky directory (/tmp) above is
// fine: others can add entries there but not rename or remove knit's. So is anything on a
// read-only mount, whatever its mode: no one writes there, and only root could remount it (a
// ConfigMap volume's directory is 0777, as every emptyDir is, and the DaemonSet mounts it
// read-only).
import { lstatSync, readFileSync, realpathSync, statSync, type Stats } from 'node:fs';
import path from 'node:path';
import { KnitError } from '../base/errors.js';
import type { KnitConfig } from './resolve.js';

const octal = (mode: number) => `0${(mode & 0o7777).toString(8)}`;

function trusted(st: Stats, uid: number, gid: number): { owner: boolean; group: boolean } {
  return { owner: st.uid === 0 || st.uid === uid, group: st.gid === 0 || st.gid === gid };
}

/** Why the file or directory at p (followed) lets another user change it, if it does. */
function ownProblem(p: string, st: Stats, uid: number, gid: number, sticky: boolean): string | undefined {
  const who = trusted(st, uid, gid);
  const is = `${p} (mode ${octal(st.mode)}, uid ${st.uid}, gid ${st.gid})`;
  if (!who.owner) return `${is} is owned by uid ${st.uid}, neither root nor knit's uid ${uid}`;
  if (sticky && st.isDirectory() && st.mode & 0o1000) return undefined;
  if (st.mode & 0o002) return `${is} is world-writable`;
  if (st.mode & 0o020 && !who.group) return `${is} is writable by group ${st.gid}`;
  return undefined;
}

function lstatIfAny(p: string): Stats | undefined {
  try {
    return lstatSync(p);
  } catch {
    return undefined;
  }
}

/** Mount points (/proc/self/mountinfo, field 5, octal escapes decoded) whose mount is read-only. */
function readOnlyMounts(): { all: Set<string>; readOnly: Set<string> } {
  const all = new Set<string>();
  const readOnly = new Set<string>();
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const f = line.split(' ');
    if (f.length < 6) continue;
    const point = f[4]!.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
    all.add(point);
    // A later mount on the same point hides the earlier one: the last line decides.
    if (f[5]!.split(',').includes('ro')) readOnly.add(point);
    else readOnly.delete(point);
  }
  return { all, readOnly };
}

/** Whether the (real) path lies on a read-only mount: its deepest mount point's. */
function onReadOnlyMount(p: string, mounts: ReturnType<typeof readOnlyMounts>): boolean {
  for (let at = p; ; at = path.dirname(at)) {
    if (mounts.all.has(at)) return mounts.readOnly.has(at);
    if (at === '/') return false;
  }
}

/** The first problem with p itself or, when p exists, with a directory above it (sticky ones
 * pass, and so does anything on a read-only mount). A path that does not exist yet is checked
 * from its deepest existing directory. */
export function pathProblem(p: string, uid = process.getuid?.() ?? 0, gid = process.getgid?.() ?? 0): string | undefined {
  let at = path.resolve(p);
  let self = true;
  // A symlink's owner may point it elsewhere at any time (a ConfigMap's are root's).
  const link = lstatIfAny(at);
  if (link?.isSymbolicLink() && link.uid !== 0 && link.uid !== uid) {
    return `${at} is a symlink owned by uid ${link.uid}, neither root nor knit's uid ${uid}`;
  }
  // Up to what exists: knit makes the rest itself, with mode 0700.
  for (;;) {
    try {
      at = realpathSync(at);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || at === '/') throw err;
      at = path.dirname(at);
      self = false;
    }
  }
  let mounts: ReturnType<typeof readOnlyMounts> | undefined;
  for (;;) {
    const problem = ownProblem(at, statSync(at), uid, gid, !self);
    if (problem && !onReadOnlyMount(at, (mounts ??= readOnlyMounts()))) return problem;
    if (at === '/') return undefined;
    at = path.dirname(at);
    self = false;
  }
}

/** Throws FAILED_PRECONDITION naming the key and the path when pathProblem finds one. */
export function refuseInsecure(key: string, p: string): void {
  const problem = pathProblem(p);
  if (problem) {
    throw new KnitError('FAILED_PRECONDITION', `${key}: ${problem}; knit runs as root and will not trust it (chmod go-w, or chown to root)`, { field: key });
  }
}

/** The places knit keeps records, sockets and queues, makes netns pins and writes DAN files,
 * and those of CNI networks (the plugins knit execs as root, the conflist, the result cache):
 * each, or the directory above one not made yet, must be knit's alone. Checked before knit
 * makes anything, and on each reload. */
export function refuseInsecureDirs(config: KnitConfig): void {
  refuseInsecure('runDir', config.runDir);
  refuseInsecure('stateDir', config.stateDir);
  refuseInsecure('netnsDir', config.netnsDir);
  refuseInsecure('cniDeleteQueue', config.cniDeleteQueue);
  refuseInsecure('kata.danDir', config.kata.danDir);
  for (const key of ['socket', 'handoffSocket', 'cniSocket'] as const) refuseInsecure(key, path.dirname(config[key]));
  config.networks.forEach(({ cni }, i) => {
    if (!cni) return;
    cni.pluginDirs.forEach((dir, j) => refuseInsecure(`networks[${i}].cni.pluginDirs[${j}]`, dir));
    refuseInsecure(`networks[${i}].cni.cacheDir`, cni.cacheDir);
    if (cni.conflistFile) refuseInsecure(`networks[${i}].cni.conflistFile`, cni.conflistFile);
  });
}
