// Moving an RDMA device between network namespaces (exclusive netns mode only: in shared mode
// RDMA devices are visible everywhere and the kernel refuses the move). The request is
// RDMA_NLDEV_CMD_SET {DEV_INDEX, NET_NS_FD} on NETLINK_RDMA; knit sends it through iproute2's
// rdma(8), run inside the netns that holds the device now (nsenter: a child process, so no
// thread of ours changes namespace), as dranet moves devices back from the pod's side.
//
// rdma(8) takes the target as a *name* and opens /var/run/netns/<name>; a name made of "../"
// steps up to / followed by the absolute path lets it open any netns file (a pinned path or
// /proc/<pid>/ns/net). Paths are resolved by the kernel, so this needs /var/run/netns to exist.
import { execFile } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import { KnitError } from '../base/errors.js';

// Absolute paths, as for nft: npm puts node_modules/.bin first in PATH.
const RDMA = '/usr/bin/rdma';
const NSENTER = '/usr/bin/nsenter';
const NETNS_RUN_DIR = '/var/run/netns';

/** The rdma(8) "netns name" that opens the netns file at absolute path `file`. */
export function rdmaNetnsArg(file: string): string {
  if (!file.startsWith('/')) throw new Error(`rdma netns target must be an absolute path, got ${JSON.stringify(file)}`);
  // /var/run is often a symlink to /run: climb more levels than either spelling has.
  return `../../../../..${file}`;
}

/** argv (after the program) of `rdma dev set <device> netns <target>` run inside `from`. */
export function rdmaMoveCommand(from: string | undefined, device: string, target: string): [string, string[]] {
  const args = ['dev', 'set', device, 'netns', rdmaNetnsArg(target)];
  return from ? [NSENTER, [`--net=${from}`, RDMA, ...args]] : [RDMA, args];
}

function run(cmd: string, argv: string[], what: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(cmd, argv, (err, _stdout, stderr) => {
      if (err) reject(new KnitError('INTERNAL', `${what}: ${stderr.trim() || err.message}`));
      else resolve();
    });
  });
}

/** Move `device` from netns `from` (undefined: the daemon's) to `to` (undefined: the daemon's). */
export async function rdmaMove(from: string | undefined, device: string, to: string | undefined): Promise<void> {
  await mkdir(NETNS_RUN_DIR, { recursive: true });
  // /proc/<pid>, not /proc/self: nsenter and rdma are other processes.
  const target = to ?? `/proc/${process.pid}/ns/net`;
  const [cmd, argv] = rdmaMoveCommand(from, device, target);
  await run(cmd, argv, `moving RDMA device ${device} ${from ? `from netns ${from} ` : ''}to ${to ? `netns ${to}` : 'the host netns'}`);
}

/** Succeeds when `device` is visible in netns `where` (undefined: the daemon's). */
export async function rdmaPresent(where: string | undefined, device: string): Promise<void> {
  const args = ['dev', 'show', device];
  const [cmd, argv] = where ? [NSENTER, [`--net=${where}`, RDMA, ...args]] : [RDMA, args];
  await run(cmd, argv, `RDMA device ${device} in ${where ? `netns ${where}` : 'the host netns'}`);
}
