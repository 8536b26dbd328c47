#!/usr/bin/env node
// What knit's DHCP/RA responder costs per KubeVirt VM (README.md, "KubeVirt", "Guest addresses"):
// arms N responders (build/src/dhcp/responders.js, as the daemon does) on N taps in a
// throwaway netns (kbdh-a), and reports the daemon-side cost per VM: resident memory, JS heap
// and file descriptors, each after minus before, divided by N; then the CPU time of one
// answer (a DISCOVER turned into an OFFER by the pure responder, p50 of 20,000).
// Usage: node bench/dhcp-responders.mjs [taps=200]; after npm run build, as root. Not a test.
import { execFileSync } from 'node:child_process';
import { readdirSync, writeFileSync, rmSync } from 'node:fs';
import { GuestResponders } from '../build/src/dhcp/responders.js';
import { leaseFrom } from '../build/src/dhcp/lease.js';
import { respond } from '../build/src/dhcp/responder.js';
import { dhcpFrame } from '../build/test/helpers/dhcp-client.js';

const N = Number(process.argv[2] ?? 200);
const NS = 'kbdh-a';
const guest = (i) => ({
  name: 'eth0', mac: `0a:58:0a:76:${(i >> 8).toString(16).padStart(2, '0')}:${(i & 255).toString(16).padStart(2, '0')}`, mtu: 1500, delivery: 'dhcp', neighbors: [],
  ips: [{ address: `10.118.${i >> 8}.${i & 255}/20`, family: 4, gateway: '10.118.0.1' }], routes: [{ dst: '0.0.0.0/0', gateway: '10.118.0.1' }],
  dns: { nameservers: ['10.96.0.10'], search: ['default.svc.cluster.local'], options: [] },
});
const sample = () => {
  global.gc?.();
  return { rss: process.memoryUsage().rss, heap: process.memoryUsage().heapUsed, fds: readdirSync('/proc/self/fd').length };
};

try { execFileSync('ip', ['netns', 'del', NS], { stdio: 'ignore' }); } catch { /* none */ }
execFileSync('ip', ['netns', 'add', NS]);
try {
  const batch = Array.from({ length: N }, (_, i) => `tuntap add t${i} mode tap user 107 group 107\nlink set t${i} up`).join('\n');
  writeFileSync('/tmp/kbdh.batch', batch + '\n');
  execFileSync('ip', ['-n', NS, '-b', '/tmp/kbdh.batch']);
  const responders = new GuestResponders(() => undefined, () => undefined);
  const before = sample();
  for (let i = 0; i < N; i++) responders.arm(`vm${i}`, { netns: `/run/netns/${NS}`, tap: `t${i}`, lease: leaseFrom(guest(i), { mac: '0e:00:00:00:00:01', isRouter6: false, hostname: `vm${i}` }) });
  const after = sample();
  const per = (k) => ((after[k] - before[k]) / N);
  console.log(`armed ${N} responders: per VM rss ${(per('rss') / 1024).toFixed(1)} KiB, heap ${(per('heap') / 1024).toFixed(1)} KiB, fds ${per('fds').toFixed(2)}`);
  const lease = leaseFrom(guest(5), { mac: '0e:00:00:00:00:01', isRouter6: false });
  const frame = dhcpFrame(1, lease.guestMac);
  const times = [];
  for (let i = 0; i < 20000; i++) {
    const t0 = process.hrtime.bigint();
    respond(lease, frame);
    times.push(Number(process.hrtime.bigint() - t0));
  }
  times.sort((a, b) => a - b);
  console.log(`one DISCOVER -> OFFER in JS: p50 ${(times[10000] / 1000).toFixed(1)} µs, p99 ${(times[19800] / 1000).toFixed(1)} µs`);
  responders.close();
} finally {
  execFileSync('ip', ['netns', 'del', NS]);
  rmSync('/tmp/kbdh.batch', { force: true });
}
