// Network namespace files: create (pinned by a bind mount, like `ip netns add`), delete,
// identify, and tell apart from ordinary files and from the host's own namespace.
//
// A netns is named by its path; two paths name the same netns when their NetnsId (the nsfs
// file's st_dev/st_ino) are equal. Create and delete mount and unmount, which takes about a
// millisecond, so they return Promises; identify is a few syscalls and synchronous.
import path from 'node:path';
import { KernelError, type NativeOpError } from './errors.js';
import { native } from './native.js';

export interface NetnsId {
  dev: number;
  ino: number;
  /** The kernel's namespace id (NS_GET_ID, Linux 6.18+), in decimal: never reused, where the
   * inode is reused as soon as the namespace is gone. Absent on older kernels. */
  id?: string;
}

/** Why a netns call failed, in terms a caller can map to an API status. */
export type NetnsErrorReason =
  | 'missing' // the path does not exist (ENOENT)
  | 'exists' // create: something already exists at the path (EEXIST)
  | 'not-netns' // the path exists but is not a network namespace
  | 'host-netns' // the path is the host's (or the daemon's) own netns and the caller refused it
  | 'invalid' // a bad argument
  | 'os'; // anything else the kernel refused (EACCES, EBUSY, ...)

const EINVAL = 22;

/** A KernelError (so callers can catch both alike) that also says why, as a reason. */
export class NetnsError extends KernelError {
  constructor(
    message: string,
    readonly reason: NetnsErrorReason,
    readonly path: string,
    /** errno name from the kernel ("ENOENT"), or "EINVAL" for argument / kind errors. */
    code: string,
    errno = EINVAL,
    context?: string,
  ) {
    super(message, { code, errno, netns: path, context, completed: [] });
    this.name = 'NetnsError';
  }
}

function reasonOf(e: NativeOpError): NetnsErrorReason {
  if (e.code === 'ENOENT') return 'missing';
  if (e.code === 'EEXIST') return 'exists';
  if (e.code === 'EINVAL' && e.context?.includes('is not a network namespace')) return 'not-netns';
  if (e.code === 'EINVAL') return 'invalid';
  return 'os';
}

// The addon says "ENOENT: No such file or directory during open netns /x"; a user reads
// "open netns /x: No such file or directory (ENOENT)", or the sentence itself for kind errors.
function wrap(err: unknown, file: string): NetnsError {
  const e = err as NativeOpError;
  if (!e || typeof e.code !== 'string') return new NetnsError(String((err as Error)?.message ?? err), 'os', file, 'EIO', 5);
  const reason = reasonOf(e);
  const description = e.message.split(' during ')[0].replace(/^[A-Z0-9]+: /, '');
  const message = reason === 'not-netns' && e.context ? e.context : `${e.context ?? 'netns ' + file}: ${description} (${e.code})`;
  return new NetnsError(message, reason, file, e.code, e.errno ?? EINVAL, e.context);
}

function checkPath(field: string, value: unknown, absolute: boolean): string {
  if (typeof value !== 'string' || value.length === 0) {
    throw new NetnsError(`${field} must be a non-empty path`, 'invalid', String(value), 'EINVAL');
  }
  if (value.includes('\0')) throw new NetnsError(`${field} must not contain NUL bytes`, 'invalid', value, 'EINVAL');
  if (absolute && !path.isAbsolute(value)) {
    throw new NetnsError(`${field} must be an absolute path (got "${value}")`, 'invalid', value, 'EINVAL');
  }
  return value;
}

/**
 * Creates a new, empty network namespace (only `lo`, down) pinned at `file`. The parent
 * directory (the run dir) is created if needed and made a shared mount, so the pin is
 * visible in other mount namespaces (containers, runtimes) as with /run/netns.
 * Fails with reason 'exists' if anything is at `file`; leaves nothing behind on failure.
 */
export async function createNetns(file: string): Promise<NetnsId> {
  checkPath('netns path', file, true);
  try {
    return (await native.netnsCreate(file)) as NetnsId;
  } catch (err) {
    throw wrap(err, file);
  }
}

/**
 * Unmounts and removes a pinned netns. The namespace itself lives on while any process or
 * open fd still uses it. Refuses a path that is not a netns (it never unmounts anything
 * else). With ignoreMissing a missing path is success (undo and GC paths).
 */
export async function deleteNetns(file: string, opts: { ignoreMissing?: boolean } = {}): Promise<void> {
  checkPath('netns path', file, true);
  try {
    await native.netnsDelete(file, opts.ignoreMissing === true);
  } catch (err) {
    throw wrap(err, file);
  }
}

/** True when `file` is the host's netns (pid 1's) or the daemon's own. Throws if not a netns. */
export function isHostNetns(file: string): boolean {
  return isHostNetnsId(identifyNetns(file));
}

/** True when the namespace is the host's (pid 1's) or the daemon's own, however it was reached:
 * /proc/1/ns/net, a bind mount of it, a symlink to either. */
export function isHostNetnsId(id: NetnsId): boolean {
  return hostNetnsIds().some((host) => sameNetns(host, id));
}

/**
 * The identity of the netns at `file`. Throws NetnsError: 'missing', 'not-netns' (with the
 * kind of file it is), or with rejectHost, 'host-netns' — a sandbox path must never be the
 * host's namespace.
 */
export function identifyNetns(file: string, opts: { rejectHost?: boolean } = {}): NetnsId {
  checkPath('netns path', file, false);
  let id: NetnsId;
  try {
    id = native.netnsIdentify(file) as NetnsId;
  } catch (err) {
    throw wrap(err, file);
  }
  if (opts.rejectHost && isHostNetnsId(id)) {
    throw new NetnsError(`${file} is the host's network namespace, not a sandbox's`, 'host-netns', file, 'EINVAL');
  }
  return id;
}

/** What counts as the host: pid 1's netns (the host's; in a container, the container's root,
 * which knit must not treat as a sandbox either) and the daemon's own, which differs when a test
 * harness runs it inside a netns. Identified once: neither changes while the daemon runs (its
 * threads never setns for good), so an attach does not open and stat them again (some 30 µs a
 * call here). A /proc/1 that cannot be read leaves only the daemon's own. */
let hostIds: NetnsId[] | undefined;
function hostNetnsIds(): NetnsId[] {
  if (!hostIds) {
    const ids: NetnsId[] = [];
    for (const ref of ['/proc/1/ns/net', '/proc/self/ns/net']) {
      try {
        ids.push(native.netnsIdentify(ref) as NetnsId);
      } catch {
        // unreadable: not a host netns knit can be handed
      }
    }
    hostIds = ids;
  }
  return hostIds;
}

/** Same inode, and the same namespace id where both have one (an inode can be a newer namespace's). */
export function sameNetns(a: NetnsId, b: NetnsId): boolean {
  return a.dev === b.dev && a.ino === b.ino && (a.id === undefined || b.id === undefined || a.id === b.id);
}
