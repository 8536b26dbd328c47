#!/usr/bin/env node
// The kernel side of one runc attach through knit's addon, two ways, alternating:
//   floor: the C floor's requests (veth with the peer in the netns, mastered and up; then up,
//          address and default route inside the netns)
//   knit:  the batches knit's own planner makes for the same pod (runtimes/common/pod-veth.ts:
//          the tagged create, the evict check, the conditional rename, lo, ...)
// Both go the daemon's way: the host batch on a pool thread, the pod batch opened, run and
// closed in one pool hop. The difference is what knit's extra requests cost; the rest of
// knit's time beyond the `grpc-addon` bench row is its JavaScript. Prints p50s in ms.
// Usage: node bench/addon-batches.mjs [rounds=150]; after npm run build, as root. Not a test.
import { execFileSync } from 'node:child_process';
import { NetHandle, runInNetns } from '../build/src/net/handle.js';
import { planPodVeth } from '../build/runtimes/common/pod-veth.js';
import { setInstance } from '../build/src/base/names.js';

const ROUNDS = Number(process.argv[2] ?? 150);
const WARMUP = 10;
const BR = 'kbab-br';
const sh = (...args) => execFileSync('ip', args, { stdio: 'ignore' });
setInstance('kbab'); // its own tags and reap group, clear of any knit on this host

function knitBatches(i, netnsPath) {
  const address = `10.251.${i >> 8}.${(i & 255) + 2}`;
  const { steps } = planPodVeth({
    sandboxId: `kbab-${i}`, netnsPath, request: undefined, iface: { name: 'eth0' },
    network: { name: 'kbab', mode: 'bridge', bridge: BR, mtu: 1500, routes: [] },
    addresses: [{ family: 4, address, prefixLen: 16, gateway: '10.251.0.1' }],
  });
  return [steps.filter((s) => !s.netns).map((s) => s.do), steps.filter((s) => s.netns).map((s) => s.do)];
}

function floorBatches(i, netnsPath) {
  return [
    [{ op: 'link.add', kind: 'veth', name: `kbab${i}`, mtu: 1500, master: BR, up: true, peer: { name: 'eth0', netns: netnsPath } }],
    [
      { op: 'link.set', link: 'eth0', up: true },
      { op: 'addr.add', link: 'eth0', address: `10.251.${i >> 8}.${(i & 255) + 2}/16` },
      { op: 'route.add', dst: 'default', gateway: '10.251.0.1' },
    ],
  ];
}

const p50 = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const times = { floor: { host: [], pod: [] }, knit: { host: [], pod: [] } };
const ways = { floor: floorBatches, knit: knitBatches };
try { sh('link', 'del', BR); } catch { /* none */ }
sh('link', 'add', BR, 'type', 'bridge');
sh('addr', 'add', '10.251.0.1/16', 'dev', BR);
sh('link', 'set', BR, 'up');
const host = NetHandle.open();
let netns;
try {
  for (let i = 0; i < ROUNDS + WARMUP; i++) {
    for (const [name, make] of i % 2 ? Object.entries(ways) : Object.entries(ways).reverse()) {
      netns = `kbab-${name}-${i}`;
      sh('netns', 'add', netns);
      const [hostOps, podOps] = make(i, `/run/netns/${netns}`);
      const t0 = performance.now();
      await host.runOnPool(hostOps);
      const t1 = performance.now();
      await runInNetns(`/run/netns/${netns}`, podOps);
      const t2 = performance.now();
      if (i >= WARMUP) {
        times[name].host.push(t1 - t0);
        times[name].pod.push(t2 - t1);
      }
      // untimed: the pair goes with its netns
      sh('netns', 'del', netns);
      netns = undefined;
    }
  }
  console.log(`${ROUNDS} rounds, p50 ms`);
  for (const [name, t] of Object.entries(times)) {
    console.log(`${name.padEnd(6)} host batch ${p50(t.host).toFixed(3)}  pod batch ${p50(t.pod).toFixed(3)}  both ${(p50(t.host) + p50(t.pod)).toFixed(3)}`);
  }
} finally {
  if (netns) try { sh('netns', 'del', netns); } catch { /* gone */ }
  host.close();
  try { sh('link', 'del', BR); } catch { /* gone */ }
}
