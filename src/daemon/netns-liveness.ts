// Is a sandbox's network namespace gone? Its path is only where it was pinned: `mount --move`
// or a second bind elsewhere keeps the namespace while the path goes. A namespace exists while
// something refers to it, so "gone" means: the path no longer names that inode, AND no nsfs
// mount (`/proc/self/mountinfo`, the bind mounts `ip netns add` and runtimes make) and no
// process (`/proc/<pid>/ns/net`) refers to it any more.
//
// nsfs inodes are reused as soon as a namespace is gone, so on a busy node a new pod's netns
// soon holds a gone one's inode. Where the kernel gives namespaces an id (Linux 6.18+, recorded
// at attach) a holder counts only if its id is the sandbox's; without one the inode decides, and
// a reused inode keeps a gone sandbox until that newer namespace goes too.
//
// What this does not see: an fd some process holds open to the namespace (no cheap way to list
// those), and mounts in other mount namespaces. knit itself holds no fd into a sandbox netns for
// longer than one call (its netlink handles live on a per-call thread, tap fds are closed once
// handed off), but for one: the packet socket of a KubeVirt guest's DHCP responder, which is
// not counted as a holder (the sweep's detach closes it; src/daemon/guest-dhcp.ts). The
// namespaces it pins for KNI are mounts, so they count as alive until DeleteNetwork removes
// them. nsfs is one superblock, so the inode alone names a file there.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { identifyNetns, sameNetns } from '../net/netns.js';
import type { NetnsIdentity } from '../core/record.js';

/** A point-in-time view: the scan of mounts and processes is made once, on first need. */
export function goneNetnsChecker(): (id: NetnsIdentity) => boolean {
  let held: Map<number, string[]> | undefined;
  return (id) => {
    if (names(id.path, id)) return false;
    held ??= netnsHolders();
    return !(held.get(id.ino) ?? []).some((file) => keeps(file, id));
  };
}

/** The path names the namespace of id (by inode, and by namespace id where both have one). */
function names(file: string, id: NetnsIdentity): boolean {
  try {
    return sameNetns(identifyNetns(file), id);
  } catch {
    return false; // missing, or no longer a netns
  }
}

/** A holder the scan found with id's inode keeps it, unless it is seen to be another namespace
 * under a reused inode. One that cannot be looked at again (the process exited, the mount point
 * is covered) keeps it too: the next sweep looks afresh. */
function keeps(file: string, id: NetnsIdentity): boolean {
  try {
    const now = identifyNetns(file);
    return now.ino !== id.ino || sameNetns(now, id);
  } catch {
    return true;
  }
}

/** "net:[4026532001]" → 4026532001 */
const netInode = (text: string): number | undefined => {
  const m = /^net:\[(\d+)\]$/.exec(text);
  return m ? Number(m[1]) : undefined;
};

/** mountinfo escapes space, tab, newline and backslash as octal (\040). */
const unescape = (field: string) => field.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));

/** The files through which a network namespace is held, by inode: nsfs mount points and
 * /proc/<pid>/ns/net. */
export function netnsHolders(): Map<number, string[]> {
  const held = new Map<number, string[]>();
  const add = (ino: number | undefined, file: string) => {
    if (ino !== undefined) held.set(ino, [...(held.get(ino) ?? []), file]);
  };
  // mountinfo (proc(5)): "id parent maj:min root mountpoint options... - fstype source super";
  // an nsfs mount's root is the namespace it pins.
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const fields = line.split(' ');
    const dash = fields.indexOf('-');
    if (dash < 0 || fields[dash + 1] !== 'nsfs') continue;
    add(netInode(fields[3]), unescape(fields[4]));
  }
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      add(netInode(readlinkSync(`/proc/${pid}/ns/net`)), `/proc/${pid}/ns/net`);
    } catch {
      // exited meanwhile, or a kernel thread
    }
  }
  return held;
}
