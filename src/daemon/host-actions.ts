// The few changes that are not rtnetlink: nftables tables (through nft(8), run inside the
// target netns by nsenter — a child process, so no thread of ours changes namespace), files a
// launcher reads, CNI plugin chains (src/cni-exec), and for host ports conntrack flushes
// (conntrack(8)) and giving a device's route_localnet back.
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import type { ConntrackFlushAction, HostAction, LocalnetRestoreAction, OpResult, PolicyAdmitAction, PolicyReleaseAction } from '../base/ops.js';
import { removeOwnedFile, writeOwnedFile } from './owned-files.js';
import type { DeviceActionEnv } from '../devices/actions.js';
import { runDeviceAction } from '../../runtimes/with-devices/gate.js';
import { runCniAction, type CniHooks } from '../cni-exec/action.js';
import { isOwnHostPortTable } from '../base/names.js';

// Absolute paths: under npm, PATH starts with node_modules/.bin, where "nft" is an unrelated
// JavaScript tool (@vercel/nft, pulled in by ava) that would "succeed" without touching nftables.
const NFT = '/usr/sbin/nft';
const NSENTER = '/usr/bin/nsenter';
const CONNTRACK = '/usr/sbin/conntrack';

function nftCommand(netns: string | undefined, args: string[]): [string, string[]] {
  return netns ? [NSENTER, [`--net=${netns}`, NFT, ...args]] : [NFT, args];
}

export async function nft(netns: string | undefined, args: string[], input?: string): Promise<string> {
  const [cmd, argv] = nftCommand(netns, args);
  return new Promise<string>((resolve, reject) => {
    const child = execFile(cmd, argv, { maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      if (err) reject(Object.assign(new Error(`nft ${args.join(' ')}${netns ? ` in netns ${netns}` : ''}: ${stderr.trim() || err.message}`), { code: 'ENFT' }));
      else resolve(stdout);
    });
    // nft exits without reading stdin when it needs none; the exit status tells what happened.
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(input ?? '');
  });
}

/** This knit's host-port tables in the daemon's netns. */
export async function ownHostPortTables(): Promise<string[]> {
  const listed = JSON.parse(await nft(undefined, ['-j', 'list', 'tables', 'inet'])) as { nftables: { table?: { name: string } }[] };
  return listed.nftables.flatMap(({ table }) => (table && isOwnHostPortTable(table.name) ? [table.name] : []));
}

/** Whether one of this knit's host-port tables holds a chain of this name. */
async function ownChainExists(name: string): Promise<boolean> {
  const listed = JSON.parse(await nft(undefined, ['-j', 'list', 'chains', 'inet'])) as { nftables: { chain?: { table: string; name: string } }[] };
  return listed.nftables.some(({ chain }) => chain?.name === name && isOwnHostPortTable(chain.table));
}

/** `conntrack -D`; conntrack(8) exits 1 when it deleted nothing, which is the same outcome. */
function flushConntrack(a: ConntrackFlushAction): Promise<void> {
  const args = ['-D', '-f', a.family === 4 ? 'ipv4' : 'ipv6', '-p', a.protocol, '--orig-port-dst', String(a.port), ...(a.replySrc ? ['--reply-src', a.replySrc] : [])];
  return new Promise((resolve, reject) => {
    execFile(CONNTRACK, args, (err, _stdout, stderr) => {
      if (!err || /0 flow entries have been deleted/.test(stderr)) resolve();
      else reject(new Error(`conntrack ${args.join(' ')}: ${stderr.trim() || err.message}`));
    });
  });
}

/** Gives a device's route_localnet back, once no host-port table of this knit guards it. */
async function restoreLocalnet(a: LocalnetRestoreAction): Promise<void> {
  if (await ownChainExists(a.guardChain)) return; // another sandbox still needs it
  try {
    await writeFile(`/proc/sys/net/ipv4/conf/${a.device}/route_localnet`, a.value);
  } catch (err) {
    if (!(a.ignoreMissing && (err as NodeJS.ErrnoException).code === 'ENOENT')) throw err;
  }
}

/** The actions the policy controller carries out (src/daemon/policy.ts), not this file. */
export type PolicyAction = PolicyAdmitAction | PolicyReleaseAction;
export const isPolicyAction = (a: HostAction): a is PolicyAction => a.op === 'policy.admit' || a.op === 'policy.release';

/** runOps: the netlink batches a device action sends, through the caller's sockets (the
 * daemon's host sockets, a pod netns socket per batch). */
export async function runHostAction(netns: string | undefined, a: HostAction, runOps: DeviceActionEnv['runOps'], cni?: CniHooks): Promise<OpResult | void> {
  switch (a.op) {
    case 'cni.add':
    case 'cni.del':
      return runCniAction(a, cni);
    case 'nft.apply':
      // The table is created and filled in one transaction: nft -f applies a file atomically.
      await nft(netns, ['-f', '-'], `table ${a.family} ${a.table}\ndelete table ${a.family} ${a.table}\n${a.ruleset}\n`);
      return;
    case 'conntrack.flush':
      return flushConntrack(a);
    case 'localnet.restore':
      return restoreLocalnet(a);
    case 'nft.delete':
      try {
        await nft(netns, ['delete', 'table', a.family, a.table]);
      } catch (err) {
        if (!(a.ignoreMissing && /No such file or directory/.test((err as Error).message))) throw err;
      }
      return;
    case 'file.write':
      return writeOwnedFile(a);
    case 'file.remove':
      return removeOwnedFile(a);
    case 'policy.admit':
    case 'policy.release':
      throw new Error(`${a.op} is carried out by the policy controller (DaemonActionRunner.policy)`);
    default:
      // SR-IOV / VFIO / RDMA device actions (src/devices/actions.ts), loaded on the first one.
      return runDeviceAction(netns, a, runOps);
  }
}

