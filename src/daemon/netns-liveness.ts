// Is a sandbox's network namespace gone? Its path is only where it was pinned: `mount --move`
// or a second bind elsewhere keeps the namespace while the path goes. A namespace exists while
// something refers to it, so "gone" means: the path no longer names that inode, AND no nsfs
// mount (`/proc/self/mountinfo`, the bind mounts `ip netns add` and runtimes make) and no
// process (`/proc/<pid>/ns/net`) refers to it any more.
//
// What this does not see: an fd some process holds open to the namespace (no cheap way to list
// those), and mounts in other mount namespaces. knit itself holds no fd into a sandbox netns for
// longer than one call (its netlink handles live on a per-call thread, tap fds are closed once
// handed off); the namespaces it pins for KNI are mounts, so they count as alive until
// DeleteNetwork removes them. nsfs is one superblock, so the inode alone names a namespace.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { identifyNetns, sameNetns } from '../net/netns.js';
import type { NetnsIdentity } from '../core/record.js';

/** A point-in-time view: the scan of mounts and processes is made once, on first need. */
export function goneNetnsChecker(): (id: NetnsIdentity) => boolean {
  let held: Set<number> | undefined;
  return (id) => {
    if (pathStillNames(id)) return false;
    held ??= heldNetnsInodes();
    return !held.has(id.ino);
  };
}

function pathStillNames(id: NetnsIdentity): boolean {
  try {
    return sameNetns(identifyNetns(id.path), id);
  } catch {
    return false; // missing, or no longer a netns
  }
}

/** "net:[4026532001]" → 4026532001 */
const netInode = (text: string): number | undefined => {
  const m = /^net:\[(\d+)\]$/.exec(text);
  return m ? Number(m[1]) : undefined;
};

/** Inodes of the network namespaces an nsfs mount or a process refers to. */
export function heldNetnsInodes(): Set<number> {
  const held = new Set<number>();
  // mountinfo (proc(5)): "id parent maj:min root mountpoint options... - fstype source super";
  // an nsfs mount's root is the namespace it pins.
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const fields = line.split(' ');
    const dash = fields.indexOf('-');
    if (dash < 0 || fields[dash + 1] !== 'nsfs') continue;
    const ino = netInode(fields[3]);
    if (ino !== undefined) held.add(ino);
  }
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const ino = netInode(readlinkSync(`/proc/${pid}/ns/net`));
      if (ino !== undefined) held.add(ino);
    } catch {
      // exited meanwhile, or a kernel thread
    }
  }
  return held;
}
