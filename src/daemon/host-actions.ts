// The few changes that are not rtnetlink: nftables tables (through nft(8), run inside the
// target netns by nsenter — a child process, so no thread of ours changes namespace) and
// files a launcher reads, and CNI plugin chains (src/cni-exec).
import { execFile } from 'node:child_process';
import { unlink } from 'node:fs/promises';
import type { HostAction, OpResult } from '../base/ops.js';
import { atomicWriteFile } from '../store/atomic.js';
import { defaultDeviceEnv, runDeviceAction } from '../devices/actions.js';
import { withHandle } from '../net/handle.js';
import { runCniAction, type CniHooks } from '../cni-exec/action.js';


// Absolute paths: under npm, PATH starts with node_modules/.bin, where "nft" is an unrelated
// JavaScript tool (@vercel/nft, pulled in by ava) that would "succeed" without touching nftables.
const NFT = '/usr/sbin/nft';
const NSENTER = '/usr/bin/nsenter';

function nftCommand(netns: string | undefined, args: string[]): [string, string[]] {
  return netns ? [NSENTER, [`--net=${netns}`, NFT, ...args]] : [NFT, args];
}

async function nft(netns: string | undefined, args: string[], input?: string): Promise<void> {
  const [cmd, argv] = nftCommand(netns, args);
  await new Promise<void>((resolve, reject) => {
    const child = execFile(cmd, argv, (err, _stdout, stderr) => {
      if (err) reject(Object.assign(new Error(`nft ${args.join(' ')}${netns ? ` in netns ${netns}` : ''}: ${stderr.trim() || err.message}`), { code: 'ENFT' }));
      else resolve();
    });
    child.stdin?.end(input ?? '');
  });
}

export async function runHostAction(netns: string | undefined, a: HostAction, cni?: CniHooks): Promise<OpResult | void> {
  switch (a.op) {
    case 'cni.add':
    case 'cni.del':
      return runCniAction(a, cni);
    case 'nft.apply':
      // The table is created and filled in one transaction: nft -f applies a file atomically.
      return nft(netns, ['-f', '-'], `table ${a.family} ${a.table}\ndelete table ${a.family} ${a.table}\n${a.ruleset}\n`);
    case 'nft.delete':
      try {
        await nft(netns, ['delete', 'table', a.family, a.table]);
      } catch (err) {
        if (!(a.ignoreMissing && /No such file or directory/.test((err as Error).message))) throw err;
      }
      return;
    case 'file.write':
      return atomicWriteFile(a.path, a.content, a.mode ?? 0o644);
    case 'file.remove':
      try {
        await unlink(a.path);
      } catch (err) {
        if (!(a.ignoreMissing && (err as NodeJS.ErrnoException).code === 'ENOENT')) throw err;
      }
      return;
    default:
      // SR-IOV / VFIO / RDMA device actions (src/devices/actions.ts).
      return runDeviceAction(netns, a, defaultDeviceEnv((ns, ops) => withHandle(ns, (h) => h.run(ops))));
  }
}

