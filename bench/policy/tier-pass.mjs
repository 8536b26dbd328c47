#!/usr/bin/env node
// The CPU of one NetworkPolicy pass with ClusterNetworkPolicies (bench/README.md,
// "NetworkPolicy"; issue 35), pure: no kernel, no API. The cluster: 10,000 pods in ten
// namespaces, 2,000 NetworkPolicies, 100 ClusterNetworkPolicies (half Admin, half Baseline, each
// selecting one namespace's pods, with an Accept, Deny or Pass rule from one app's pods on one
// port), 110 pods on this node. After a first pass, five kinds of change three times each (a pod
// of another node relabelled, one deleted, a NetworkPolicy changed, a ClusterNetworkPolicy's
// priority changed, a pod of this node released), each followed by a pass as src/daemon/policy.ts
// runs it, two ways:
//   whole        the tiers compiled whole (withTiers) and the transaction over the whole table,
//                as every pass did before the tiers were kept from pass to pass
//   incremental  the tiers kept (IncrementalTiers), and the transaction over what the
//                NetworkPolicy compiler touched plus the names whose tiers changed
// Each pass is split into NetworkPolicy's flush (the same both ways), the tiers (the view, its
// index and the tier compile) and the diff (the transaction and the kernel model after it); the
// table's lines show both ways write the same.
//
// Usage (after npm run build): node bench/policy/tier-pass.mjs [--pods 10000] [--policies 2000] [--cnps 100]
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const built = (p) => import(pathToFileURL(path.join(root, 'build/src/policy', p)).href);
const { IncrementalCompiler } = await built('incremental.js');
const { addTiers, tierChanges, withTiers } = await built('cluster-policy-compile.js');
const { IncrementalTiers } = await built('cluster-policy-incremental.js');
const { TierIndex } = await built('cluster-policy-evaluate.js');
const { ViewIndex } = await built('view-index.js');
const { committed, emptyKernel, mergeTouched, transaction } = await built('ruleset.js');

const { values: opts } = parseArgs({ options: { pods: { type: 'string', default: '10000' }, policies: { type: 'string', default: '2000' }, cnps: { type: 'string', default: '100' } } });
const PODS = Number(opts.pods), NPS = Number(opts.policies), CNPS = Number(opts.cnps), LOCAL = 110;

function cluster() {
  const namespaces = Array.from({ length: 10 }, (_, i) => ({ name: `ns${i}`, labels: { team: `t${i}` } }));
  const ip = (i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255 || 1}`;
  const pods = Array.from({ length: PODS }, (_, i) => ({ namespace: `ns${i % 10}`, name: `p${i}`, labels: { app: `a${i % 20}`, role: `r${i % 5}` }, ips: [ip(i + 256)], node: i < LOCAL ? 'me' : `n${i % 50}` }));
  const policies = Array.from({ length: NPS }, (_, i) => ({ metadata: { namespace: `ns${i % 10}`, name: `np${i}` }, spec: { podSelector: { matchLabels: { app: `a${i % 20}` } }, ingress: [{ from: [{ podSelector: { matchLabels: { role: `r${i % 5}` } } }], ports: [{ port: 80 + (i % 7) }] }] } }));
  const cnps = Array.from({ length: CNPS }, (_, i) => ({ metadata: { name: `c${i}` }, spec: { tier: i % 2 ? 'Admin' : 'Baseline', priority: i, subject: { namespaces: { matchLabels: { team: `t${i % 10}` } } }, ingress: [{ action: ['Accept', 'Deny', 'Pass'][i % 3], from: [{ pods: { namespaceSelector: {}, podSelector: { matchLabels: { app: `a${i % 20}` } } } }], protocols: [{ tcp: { destinationPort: { number: 1000 + i } } }] }] } }));
  return { namespaces, pods, policies, cnps };
}

function run(mode) {
  const { namespaces, pods, policies, cnps: first } = cluster();
  let cnps = first;
  const c = new IncrementalCompiler('me');
  c.load({ policies, namespaces, pods });
  for (let i = 0; i < LOCAL; i++) c.setLocal(`id${i}`, { namespace: pods[i].namespace, name: pods[i].name, ips: pods[i].ips, seen: pods[i] });
  const tiers = new IncrementalTiers();
  let kernel = emptyKernel();
  let last;
  const pass = () => {
    const t0 = performance.now();
    const touched = c.flush();
    const t1 = performance.now();
    const tix = new TierIndex(new ViewIndex({ ...c.view(), nodes: {} }), cnps, []);
    const share = mode === 'incremental' ? tiers.update(tix, c.localShare(), c.ruleset, touched) : undefined;
    const rs = share ? addTiers(c.ruleset, share) : withTiers(c.ruleset, tix, c.localShare());
    const t2 = performance.now();
    const only = share && kernel.base ? mergeTouched(touched, tierChanges(last, share)) : undefined;
    const tx = transaction('knit-policy', kernel, rs, only);
    kernel = committed(kernel, rs, only);
    last = share;
    const t3 = performance.now();
    return { flush: t1 - t0, tiers: t2 - t1, diff: t3 - t2, lines: tx.split('\n').length - 1 };
  };
  pass();
  const changes = {
    'pod relabelled': (r) => c.setPod(`${pods[5000 + r].namespace}/${pods[5000 + r].name}`, { ...pods[5000 + r], labels: { ...pods[5000 + r].labels, app: `a${(5001 + r) % 20}` } }),
    'pod deleted': (r) => c.setPod(`${pods[6000 + r].namespace}/${pods[6000 + r].name}`, undefined),
    'NetworkPolicy changed': (r) => c.setPolicy(`${policies[3 + r].metadata.namespace}/${policies[3 + r].metadata.name}`, { ...policies[3 + r], spec: { ...policies[3 + r].spec, ingress: [{ from: [{ podSelector: {} }], ports: [{ port: 9000 + r }] }] } }),
    'CNP changed': (r) => (cnps = cnps.map((p, i) => (i === 7 + r ? { ...p, spec: { ...p.spec, priority: 500 + r } } : p))),
    'local pod released': (r) => c.setLocal(`id${20 + r}`, undefined),
  };
  const rows = [];
  for (let r = 0; r < 3; r++) for (const [what, change] of Object.entries(changes)) {
    change(r);
    rows.push({ what, ...pass() });
  }
  return rows;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const ms = (x) => x.toFixed(1).padStart(7);
console.log(`${PODS} pods, ${NPS} NetworkPolicies, ${CNPS} ClusterNetworkPolicies, ${LOCAL} pods on this node; ms per pass (median of three)`);
console.log(`${'change'.padEnd(22)} ${'mode'.padEnd(12)}   flush   tiers    diff   lines`);
const results = Object.fromEntries(['whole', 'incremental'].map((mode) => [mode, run(mode)]));
for (const what of [...new Set(results.whole.map((r) => r.what)), 'all']) {
  for (const mode of ['whole', 'incremental']) {
    const rows = results[mode].filter((r) => what === 'all' || r.what === what);
    console.log(`${what.padEnd(22)} ${mode.padEnd(12)} ${ms(median(rows.map((r) => r.flush)))} ${ms(median(rows.map((r) => r.tiers)))} ${ms(median(rows.map((r) => r.diff)))} ${String(median(rows.map((r) => r.lines))).padStart(7)}`);
  }
}
