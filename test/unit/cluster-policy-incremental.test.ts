// The tiers on the incremental compiler's share, pass after pass, as the daemon runs them
// (src/daemon/policy.ts): random sequences of changes (pods of any node added, relabelled,
// readdressed, deleted; namespaces relabelled; NetworkPolicies; this node's pods admitted and
// released; ClusterNetworkPolicies added, changed and deleted; nodes relabelled and readdressed)
// applied one by one. After each, the tiers kept from pass to pass (IncrementalTiers) equal
// those compiled whole on the full compile, the share itself is left NetworkPolicy's, and the
// transaction over what the compiler touched plus the names whose tiers changed (tierChanges)
// equals the transaction over the whole table, adds no chain after a chain that goes to it,
// and leaves the same kernel.
import test from 'ava';
import { IncrementalCompiler } from '../../src/policy/incremental.js';
import { TierIndex } from '../../src/policy/cluster-policy-evaluate.js';
import { addTiers, tierChanges, withTiers, type TierShare } from '../../src/policy/cluster-policy-compile.js';
import { IncrementalTiers } from '../../src/policy/cluster-policy-incremental.js';
import type { ClusterNetworkPolicy, ClusterNetworkPolicyPeer, ClusterNetworkPolicyProtocol, ClusterNetworkPolicyRule, PolicyNode } from '../../src/policy/cluster-policy.js';
import { committed, emptyKernel, mergeTouched, noneTouched, transaction, wanted, BASE_CHAIN, type KernelPolicy } from '../../src/policy/ruleset.js';
import { ViewIndex } from '../../src/policy/view-index.js';
import { NAMESPACE_NAME_LABEL } from '../../src/policy/types.js';
import type { PolicyRuleset } from '../../src/policy/compile.js';
import { NAMESPACES, NODE, PORT_NAMES, change, fullCompile, lines, plain, plainKernel, random, selector, type Rnd, type World } from '../helpers/policy-random.js';

const NODE_NAMES = [NODE, 'n2', 'n3'];

function nodeOf(r: Rnd, name: string, n: number): PolicyNode {
  return { name, labels: { zone: r.pick(['one', 'two']), ...(r.chance(0.5) && { role: r.pick(['a', 'b']) }) }, ips: [`192.168.0.${n}`, ...(r.chance(0.5) ? [`fd01::${n}`] : [])] };
}

function cnpPeer(r: Rnd, egress: boolean): ClusterNetworkPolicyPeer {
  const k = r.int(egress ? 6 : 4);
  if (k === 0) return { namespaces: r.chance(0.3) ? { matchLabels: { [NAMESPACE_NAME_LABEL]: r.pick(NAMESPACES) } } : selector(r) };
  if (k === 1 || k === 2) return { pods: { namespaceSelector: selector(r), podSelector: selector(r) } };
  if (k === 3) return r.chance(0.9) ? { pods: { namespaceSelector: {}, podSelector: selector(r) } } : {}; // {}: unreadable, fails closed
  if (k === 4) return { nodes: r.chance(0.3) ? {} : { matchLabels: { zone: r.pick(['one', 'two']) } } };
  return r.chance(0.9) ? { networks: [r.pick(['10.0.0.0/16', '10.0.1.0/24', '10.0.2.8/29', 'fd00::/64', '192.168.0.0/30'])] } : { domainNames: ['example.com'] };
}

function cnpProtocol(r: Rnd): ClusterNetworkPolicyProtocol {
  const k = r.int(4);
  if (k === 0) return { destinationNamedPort: r.pick(PORT_NAMES) };
  const port = r.chance(0.5) ? { number: r.pick([80, 81, 53]) } : { range: { start: 80, end: r.pick([81, 90]) } };
  return { [r.pick(['tcp', 'udp', 'sctp'])]: r.chance(0.8) ? { destinationPort: port } : {} };
}

function cnpRules(r: Rnd, egress: boolean): ClusterNetworkPolicyRule[] {
  return Array.from({ length: r.int(3) }, () => {
    const peers = Array.from({ length: 1 + r.int(2) }, () => cnpPeer(r, egress));
    const protocols = r.chance(0.5) ? Array.from({ length: 1 + r.int(2) }, () => cnpProtocol(r)) : undefined;
    return { action: r.pick(['Accept', 'Deny', 'Pass']), [egress ? 'to' : 'from']: peers, ...(protocols && { protocols }) };
  });
}

function cnpOf(r: Rnd, name: string): ClusterNetworkPolicy {
  // Half the subjects every namespace: most steps have tier chains to check.
  const namespaces = r.chance(0.5) ? {} : selector(r);
  const subject = r.chance(0.5) ? { namespaces } : { pods: { namespaceSelector: namespaces, podSelector: selector(r) } };
  const ingress = cnpRules(r, false);
  const egress = cnpRules(r, true);
  return { metadata: { name }, spec: { tier: r.pick(['Admin', 'Baseline']), priority: r.int(4), subject, ...(ingress.length && { ingress }), ...(egress.length && { egress }) } };
}

/** The tiers' own inputs, beside the NetworkPolicy world. */
interface Tiers {
  cnps: Map<string, ClusterNetworkPolicy>;
  nodes: Map<string, PolicyNode>;
  nextNodeIp: number;
}

/** A change of the tiers' inputs (a third of the time), else one of the NetworkPolicy world's. */
function tierChange(r: Rnd, w: World, tiers: Tiers, c: IncrementalCompiler, step: number): string {
  if (r.chance(0.67)) return change(r, w, c, step);
  if (r.chance(0.2)) {
    const name = r.pick(NODE_NAMES);
    tiers.nodes.set(name, nodeOf(r, name, tiers.nextNodeIp++ % 8));
    return `node ${name} changed`;
  }
  const name = `c${r.int(5)}`;
  if (tiers.cnps.has(name) && r.chance(0.3)) {
    tiers.cnps.delete(name);
    return `cnp ${name} deleted`;
  }
  tiers.cnps.set(name, cnpOf(r, name));
  return `cnp ${name} set`;
}

/** Jumps in a transaction to chains it adds later (the kernel refuses them). */
function jumpsAhead(tx: string): string[] {
  const ls = tx.split('\n');
  const addedAt = new Map(ls.flatMap((l, i) => (l.startsWith('add chain ') ? [[l.split(' ').pop()!, i] as const] : [])));
  return ls.flatMap((l, i) => [...l.matchAll(/goto (\S+)/g)].filter((m) => (addedAt.get(m[1]!) ?? -1) > i).map(() => l));
}

const nodeAddrs = (nodes: PolicyNode[]) => Object.fromEntries(nodes.map((n) => [n.name, n.ips]));

for (const seed of [11, 12, 13, 14]) {
  test(`ClusterNetworkPolicy: pass after pass, the tiers equal the whole compile, and the transaction over the touched and the tiers' names equals the whole table's (seed ${seed})`, (t) => {
    const r = random(seed);
    const w: World = { pods: new Map(), namespaces: new Map(), policies: new Map(), locals: new Map(), nextIp: 1 };
    const tiers: Tiers = { cnps: new Map(), nodes: new Map(), nextNodeIp: 1 };
    for (const name of NODE_NAMES) tiers.nodes.set(name, nodeOf(r, name, tiers.nextNodeIp++));
    const c = new IncrementalCompiler(NODE);
    const tc = new IncrementalTiers();
    let kernel: KernelPolicy = emptyKernel();
    let last: TierShare | undefined;
    const history: string[] = [];
    let tiered = 0;
    let txs = 0;
    for (let step = 0; step < 200; step++) {
      history.push(tierChange(r, w, tiers, c, step));
      const at = `after step ${step}: ${history.slice(-3).join('; ')}`;
      const touched = c.flush();
      const nodes = [...tiers.nodes.values()];
      const cnps = [...tiers.cnps.values()];
      const before = plain(c.ruleset);
      const share = tc.update(new TierIndex(new ViewIndex({ ...c.view(), nodes: nodeAddrs(nodes) }), cnps, nodes), c.localShare(), c.ruleset, touched);
      const rs = addTiers(c.ruleset, share);
      t.deepEqual(plain(c.ruleset), before, `${at}: the share itself is not changed`);
      // The tiers on the incremental share equal the tiers on the full compile.
      const full = fullCompile(w);
      const wholeRs = withTiers(full.rs, new TierIndex(new ViewIndex({ ...full.ix.view, nodes: nodeAddrs(nodes) }), cnps, nodes), full.local);
      const same = (x: PolicyRuleset) => ({ ...plain(x), counters: [...x.counters].sort() });
      t.deepEqual(same(rs), same(wholeRs), at);
      // The transaction over the touched names and the tiers' before and after, as the daemon
      // sends it, does what the one over the whole table does, and leaves the same kernel.
      const only = kernel.base ? mergeTouched(touched, tierChanges(last, share)) : undefined;
      const whole = transaction('knit-policy', kernel, rs);
      const part = transaction('knit-policy', kernel, rs, only);
      t.deepEqual(lines(part), lines(whole), at);
      t.deepEqual(jumpsAhead(part), [], at);
      kernel = committed(kernel, rs, only);
      t.deepEqual(plainKernel(kernel), plainKernel({ ...wanted(rs), chains: new Set([...rs.chains.keys(), BASE_CHAIN]) }), at);
      t.is(transaction('knit-policy', kernel, rs), '', at);
      last = share;
      if (!t.passed) return; // the first difference says enough
      if ([...rs.chains.keys()].some((n) => /^[ab][ie][46]_/.test(n))) tiered++;
      if (whole) txs++;
    }
    t.true(tiered > 60, `tier chains in the table after ${tiered} of 200 steps`);
    t.true(txs > 50, `${txs} of 200 passes changed the table`);
  });
}

test('a change makes again only what it reaches: a peer its sets, a ClusterNetworkPolicy its own sets, a node the sets that name nodes', (t) => {
  const c = new IncrementalCompiler(NODE);
  const pod = (namespace: string, name: string, app: string, ip: string, node = 'n2') => ({ namespace, name, labels: { app }, ips: [ip], node });
  c.load({ namespaces: [{ name: 'x', labels: {} }, { name: 'y', labels: {} }], policies: [], pods: [pod('y', 'client', 'c', '10.0.1.1'), pod('y', 'other', 'o', '10.0.1.2')] });
  c.setLocal('sb1', { namespace: 'x', name: 'server', ips: ['10.0.0.1'], seen: pod('x', 'server', 's', '10.0.0.1', NODE) });
  const peer = (app: string) => ({ pods: { namespaceSelector: {}, podSelector: { matchLabels: { app } } } });
  const cnps: ClusterNetworkPolicy[] = [
    { metadata: { name: 'from-c' }, spec: { tier: 'Admin', priority: 1, subject: { namespaces: {} }, ingress: [{ action: 'Deny', from: [peer('c')] }] } },
    { metadata: { name: 'from-o' }, spec: { tier: 'Admin', priority: 2, subject: { namespaces: {} }, ingress: [{ action: 'Accept', from: [peer('o')] }] } },
    { metadata: { name: 'to-nodes' }, spec: { tier: 'Baseline', priority: 1, subject: { namespaces: {} }, egress: [{ action: 'Deny', to: [{ nodes: { matchLabels: { zone: 'one' } } }] }] } },
  ];
  let nodes: PolicyNode[] = [{ name: 'n2', labels: { zone: 'one' }, ips: ['192.168.0.2'] }];
  const tiers = new IncrementalTiers();
  const pass = () => {
    const touched = c.flush();
    return tiers.update(new TierIndex(new ViewIndex({ ...c.view(), nodes: nodeAddrs(nodes) }), cnps, nodes), c.localShare(), c.ruleset, touched);
  };
  const setsOf = (t: TierShare) => [...t.sets.keys()];
  const first = pass();
  t.is(first.sets.size, 3);
  const [fromC, fromO, toNodes] = setsOf(first);
  t.deepEqual(setsOf(first).map((n) => first.sets.get(n)!.elements), [['10.0.1.1'], ['10.0.1.2'], ['192.168.0.2']]);

  c.setPod('y/client', pod('y', 'client', 'c', '10.0.1.9'));
  const moved = pass();
  t.deepEqual([...tierChanges(first, moved).sets], [fromC], 'a peer that moved: its set alone');
  t.deepEqual(moved.sets.get(fromC)!.elements, ['10.0.1.9']);
  t.deepEqual(tierChanges(first, moved).chains.size, 0);

  c.setPod('z/unrelated', pod('z', 'unrelated', 'u', '10.0.2.1'));
  const unrelated = pass();
  t.deepEqual(tierChanges(moved, unrelated), noneTouched(), 'a pod no peer selects: nothing');

  cnps[1] = { ...cnps[1]!, spec: { ...cnps[1]!.spec, ingress: [{ action: 'Accept', from: [peer('u')] }] } };
  const policy = pass();
  const changed = tierChanges(unrelated, policy);
  t.deepEqual([...changed.sets], [fromO], 'a ClusterNetworkPolicy changed: its own set');
  t.deepEqual(policy.sets.get(fromO)!.elements, ['10.0.2.1']);
  t.is(policy.sets.get(fromC), unrelated.sets.get(fromC), 'the others are kept as they were');

  nodes = [{ name: 'n2', labels: { zone: 'one' }, ips: ['192.168.0.3'] }];
  const node = pass();
  t.deepEqual([...tierChanges(policy, node).sets], [toNodes], 'a node readdressed: the sets that name nodes');
  t.deepEqual(node.sets.get(toNodes)!.elements, ['192.168.0.3']);
});
