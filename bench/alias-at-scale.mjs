#!/usr/bin/env node
// What a host end's create costs with many ports on the bridge, two ways, alternating:
//   up-then-alias: the link made up, then its alias set (what link.add did before)
//   alias-then-up: made down, alias set, then up (what link.add does now)
// The ports live in a throwaway netns (kbas-a), each with carrier and addrgenmode none, as
// knit's bridge-mode host ends are. Their peers share one netns (kbas-b), so they get no IPv6
// addresses either: with 1,000 link-local addresses in one netns, the kernel spends most of
// its time routing their DAD and MLD packets (__find_rr_leaf) and drowns what is measured.
// KBAS_SETTLE=<seconds> waits after the fill. Prints p50/p90 per way, in µs.
// Usage: node bench/alias-at-scale.mjs [ports=1000] [rounds=200]; after npm run build, as
// root. Not a test.
import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
import { writeFileSync, rmSync } from 'node:fs';

const require = createRequire(import.meta.url);
const { Handle } = require('../build/native/Release/knit_native.node');
const PORTS = Number(process.argv[2] ?? 1000);
const ROUNDS = Number(process.argv[3] ?? 200);
const A = 'kbas-a';
const B = 'kbas-b';
const sh = (...args) => execFileSync('ip', args, { stdio: 'ignore' });
const batchFile = '/tmp/kbas-batch';

function fill() {
  const lines = [`link add kbasbr type bridge`, `link set kbasbr up`];
  for (let i = 0; i < PORTS; i++) {
    lines.push(`link add kbp${i} type veth peer name kbq${i} netns ${B}`);
    lines.push(`link set kbp${i} master kbasbr addrgenmode none up`);
  }
  writeFileSync(batchFile, lines.join('\n') + '\n');
  sh('-n', A, '-batch', batchFile);
  const peers = Array.from({ length: PORTS }, (_, i) => `link set kbq${i} addrgenmode none up`);
  writeFileSync(batchFile, peers.join('\n') + '\n');
  sh('-n', B, '-batch', batchFile);
}

const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];

for (const n of [A, B]) { try { sh('netns', 'del', n); } catch { /* none */ } sh('netns', 'add', n); }
const h = new Handle(`/run/netns/${A}`);
try {
  fill();
  if (process.env.KBAS_SETTLE) execFileSync('sleep', [process.env.KBAS_SETTLE]);
  const common = { kind: 'veth', name: 'kbnew', mtu: 1500, master: 'kbasbr', peer: { name: 'kbnewp', netns: `/run/netns/${B}` } };
  const ways = {
    'up-then-alias': [
      { op: 'link.add', ...common, up: true },
      { op: 'link.set', link: 'kbnew', alias: 'knit-kbas:sandbox=x;if=eth0' },
    ],
    'alias-then-up': [{ op: 'link.add', ...common, up: true, alias: 'knit-kbas:sandbox=x;if=eth0', addrGenMode: 'none' }],
  };
  const times = Object.fromEntries(Object.keys(ways).map((k) => [k, []]));
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, ops] of r % 2 ? Object.entries(ways) : Object.entries(ways).reverse()) {
      const t0 = process.hrtime.bigint();
      h.runSync(ops);
      times[name].push(Number(process.hrtime.bigint() - t0) / 1000);
      h.runSync([{ op: 'link.del', link: 'kbnew' }]);
    }
  }
  console.log(`${PORTS} ports, ${ROUNDS} rounds (µs)`);
  for (const [name, xs] of Object.entries(times)) console.log(`${name.padEnd(14)} p50 ${pct(xs, 0.5).toFixed(0)}  p90 ${pct(xs, 0.9).toFixed(0)}`);
} finally {
  h.close?.();
  for (const n of [A, B]) { try { sh('netns', 'del', n); } catch { /* gone */ } }
  rmSync(batchFile, { force: true });
}
