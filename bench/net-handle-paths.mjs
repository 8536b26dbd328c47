#!/usr/bin/env node
// Which netlink ops are quick enough to run on the JS thread (runSync) and which block in
// the kernel. Prints the median wall time of each op over N rounds in throwaway netns
// (kbnh-*). Not a test: numbers vary by machine; handle.ts records what we saw and why.
import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';

const require = createRequire(import.meta.url);
const { Handle } = require('../build/native/Release/knit_native.node');
const N = Number(process.argv[2] ?? 30);
const A = '/run/netns/kbnh-a';
const B = '/run/netns/kbnh-b';
const sh = (...args) => execFileSync('ip', args, { stdio: 'ignore' });
for (const n of ['kbnh-a', 'kbnh-b']) { try { sh('netns', 'del', n); } catch {} sh('netns', 'add', n); }

const times = {};
function time(label, h, ops) {
  const t0 = process.hrtime.bigint();
  h.runSync(ops);
  (times[label] ??= []).push(Number(process.hrtime.bigint() - t0) / 1000);
}
const h = new Handle(A);
try {
  h.runSync([{ op: 'link.add', kind: 'bridge', name: 'kbbr', up: true }]);
  for (let i = 0; i < N; i++) {
    time('link.add veth (same netns)', h, [{ op: 'link.add', kind: 'veth', name: 'kbv0', peer: { name: 'kbv1' } }]);
    time('link.set up+master', h, [{ op: 'link.set', link: 'kbv0', up: true, master: 'kbbr' }]);
    time('addr.add', h, [{ op: 'addr.add', link: 'kbv0', address: '10.77.0.1/24' }]);
    time('route.add', h, [{ op: 'route.add', dst: '10.78.0.0/24', gateway: '10.77.0.2' }]);
    time('neigh.add', h, [{ op: 'neigh.add', link: 'kbv0', address: '10.77.0.9', lladdr: '02:00:00:00:00:09' }]);
    time('qdisc.add ingress', h, [{ op: 'qdisc.add', link: 'kbv0', kind: 'ingress' }]);
    time('filter.add', h, [{ op: 'filter.add', link: 'kbv0', parent: 'ingress', redirectTo: 'kbv1' }]);
    time('link.get', h, [{ op: 'link.get', link: 'kbv0' }]);
    time('addr.list (one link)', h, [{ op: 'addr.list', link: 'kbv0' }]);
    time('sysctl.set', h, [{ op: 'sysctl.set', key: 'net.ipv4.conf.kbv0.arp_notify', value: '1' }]);
    time('link.set netns (move)', h, [{ op: 'link.set', link: 'kbv1', netns: B }]);
    time('link.del veth', h, [{ op: 'link.del', link: 'kbv0' }]);
    time('link.add veth (peer in other netns)', h, [{ op: 'link.add', kind: 'veth', name: 'kbv2', peer: { name: 'kbv3', netns: B } }]);
    time('link.add veth + aliases', h, [{ op: 'link.add', kind: 'veth', name: 'kbv4', alias: 'knit:x', peer: { name: 'kbv5', netns: B, alias: 'knit:y' } }]);
    time('link.del veth (peer in other netns)', h, [{ op: 'link.del', link: 'kbv2' }]);
    time('link.add bridge', h, [{ op: 'link.add', kind: 'bridge', name: 'kbbr2' }]);
    time('link.del bridge', h, [{ op: 'link.del', link: 'kbbr2' }]);
    time('tun.add tap', h, [{ op: 'tun.add', name: 'kbtap', mode: 'tap' }]);
    time('tun.add tap 4 queues', h, [{ op: 'tun.add', name: 'kbtap4', mode: 'tap', queues: 4 }]);
    time('link.del tap', h, [{ op: 'link.del', link: 'kbtap' }]);
    h.runSync([{ op: 'link.del', link: 'kbtap4' }, { op: 'link.del', link: 'kbv4' }]);
    time('link.add 10 veth group 9', h, Array.from({ length: 10 }, (_, j) => ({ op: 'link.add', kind: 'veth', name: `kbg${j}`, group: 9, peer: { name: `kbh${j}` } })));
    time('link.delGroup (10 veths)', h, [{ op: 'link.delGroup', group: 9 }]);
  }
} finally {
  h.close();
  for (const n of ['kbnh-a', 'kbnh-b']) { try { sh('netns', 'del', n); } catch {} }
}
const median = (v) => v.sort((a, b) => a - b)[Math.floor(v.length / 2)];
for (const [label, v] of Object.entries(times)) console.log(`${label.padEnd(40)} ${median(v).toFixed(0).padStart(7)} µs median, max ${Math.max(...v).toFixed(0)}`);
