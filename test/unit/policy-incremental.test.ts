// The incremental compiler (src/policy/incremental.ts) against the full compile and the oracle:
// random sequences of changes (pods of any node added, relabelled, readdressed, deleted;
// namespaces relabelled; policies added, changed, deleted; this node's pods admitted and
// released, some of unknown labels, some shadowing a stale pod that still holds their address)
// applied one by one. After each, the share it holds equals compileRuleset's on the same view,
// the transaction over what it says it touched equals the transaction over the whole table, and
// the kernel model it leaves equals the ruleset; the node's verdicts agree with evaluate().
// Half the seeds log denied packets (networkPolicy.logDenied: a log rule per chain, one limit).
import test from 'ava';
import { IncrementalCompiler, type LocalInput } from '../../src/policy/incremental.js';
import { compileRuleset, type DeniedLogSettings, type LocalPod, type PolicyRuleset } from '../../src/policy/compile.js';
import { committed, emptyKernel, transaction, wanted, BASE_CHAIN, type KernelPolicy } from '../../src/policy/ruleset.js';
import { canonical, ViewIndex } from '../../src/policy/view-index.js';
import { evaluate } from '../../src/policy/evaluate.js';
import { TierIndex } from '../../src/policy/cluster-policy-evaluate.js';
import { NAMESPACE_NAME_LABEL } from '../../src/policy/types.js';
import { withTiers } from '../../src/policy/cluster-policy-compile.js';
import type { ClusterNetworkPolicy } from '../../src/policy/cluster-policy.js';
import { forwardVerdict } from '../../src/policy/datapath.js';
import type { LabelSelector, NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort, PolicyNamespace, PolicyPod } from '../../src/policy/types.js';

const NODE = 'n1';
const NAMESPACES = ['x', 'y', 'z', 'w'];
const KEYS = ['app', 'tier'];
const VALUES = ['a', 'b', 'c'];
const PORT_NAMES = ['web', 'dns'];

/** A seeded generator (the same sequence on every run; the seed is in the test's name). */
function random(seed: number) {
  let s = seed;
  const next = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32);
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
  const chance = (p: number) => next() < p;
  return { int, pick, chance };
}
type Rnd = ReturnType<typeof random>;

function labels(r: Rnd): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of KEYS) if (r.chance(0.6)) out[k] = r.pick(VALUES);
  return out;
}

function selector(r: Rnd): LabelSelector {
  if (r.chance(0.25)) return {};
  if (r.chance(0.6)) return { matchLabels: { [r.pick(KEYS)]: r.pick(VALUES) } };
  const op = r.pick(['In', 'NotIn', 'Exists', 'DoesNotExist']);
  return { matchExpressions: [{ key: r.pick(KEYS), operator: op, ...(op === 'In' || op === 'NotIn' ? { values: [r.pick(VALUES), r.pick(VALUES)] } : {}) }] };
}

function peer(r: Rnd): NetworkPolicyPeer {
  const k = r.int(4);
  if (k === 0) return { podSelector: selector(r) };
  if (k === 1) return { namespaceSelector: selector(r) };
  if (k === 2) return { namespaceSelector: selector(r), podSelector: selector(r) };
  return r.chance(0.5)
    ? { ipBlock: { cidr: r.pick(['10.0.0.0/16', '10.0.1.0/24', '0.0.0.0/0']), ...(r.chance(0.5) && { except: [`10.0.${r.int(3)}.${r.int(16)}/${r.pick([30, 32])}`] }) } }
    : { ipBlock: { cidr: r.pick(['fd00::/64', 'fd00::1:0/112']) } };
}

function port(r: Rnd): NetworkPolicyPort {
  const protocol = r.pick(['TCP', 'UDP', 'SCTP', undefined]);
  const k = r.int(4);
  if (k === 0) return { ...(protocol && { protocol }) };
  if (k === 1) return { ...(protocol && { protocol }), port: r.pick(PORT_NAMES) };
  if (k === 2) return { ...(protocol && { protocol }), port: r.pick([80, 81, 53]) };
  return { ...(protocol && { protocol }), port: 80, endPort: r.pick([81, 90]) };
}

function rules(r: Rnd) {
  return Array.from({ length: r.int(3) }, () => ({
    ...(r.chance(0.7) && { peers: Array.from({ length: 1 + r.int(2) }, () => peer(r)) }),
    ...(r.chance(0.6) && { ports: Array.from({ length: 1 + r.int(2) }, () => port(r)) }),
  }));
}

function policy(r: Rnd, namespace: string, name: string): NetworkPolicy {
  const types = r.pick([undefined, ['Ingress'], ['Egress'], ['Ingress', 'Egress']]);
  const ingress = rules(r).map(({ peers, ports }) => ({ ...(peers && { from: peers }), ...(ports && { ports }) }));
  const egress = rules(r).map(({ peers, ports }) => ({ ...(peers && { to: peers }), ...(ports && { ports }) }));
  // Now and then one knit cannot express (fail closed).
  if (r.chance(0.05)) ingress.push({ ports: [{ port: 'x', endPort: 9 }] });
  return { metadata: { namespace, name }, spec: { podSelector: selector(r), ...(types && { policyTypes: types }), ingress, ...(egress.length && { egress }) } };
}

/** The cluster as the source has it, and this node's pods as their admits left them. */
interface World {
  pods: Map<string, PolicyPod>;
  namespaces: Map<string, PolicyNamespace>;
  policies: Map<string, NetworkPolicy>;
  locals: Map<string, LocalInput>;
  nextIp: number;
}

function podOf(r: Rnd, w: World, namespace: string, name: string, node: string): PolicyPod {
  const n = w.nextIp++;
  const ips = [`10.0.${n >> 4 & 3}.${n & 15}`, ...(r.chance(0.7) ? [`fd00::${n >> 4 & 3}:${n & 15}`] : [])];
  const ports = PORT_NAMES.filter(() => r.chance(0.5)).map((pn) => ({ name: pn, port: r.pick([80, 81, 53, 8080]), protocol: r.pick(['TCP', 'UDP'] as const) }));
  return { namespace, name, labels: labels(r), ips, node, ...(r.chance(0.1) && { hostNetwork: true }), ...(ports.length && { ports }) };
}

/** What the daemon used to compute on every pass: the source's pods less those a pod of
 * this node replaces, plus this node's pods, compiled whole. */
function fullCompile(w: World, logDenied?: DeniedLogSettings): { rs: PolicyRuleset; ix: ViewIndex; local: LocalPod[] } {
  const local: LocalPod[] = [...w.locals.values()].map((l) => {
    const known = w.pods.get(`${l.namespace}/${l.name}`) ?? (l.seen === 'unknown' ? undefined : l.seen);
    return { namespace: l.namespace, name: l.name, labels: known?.labels ?? {}, ips: l.ips, node: NODE, ports: known?.ports ?? [], ...(!known && { unknown: true }) };
  });
  const localKeys = new Set(local.map((p) => `${p.namespace}/${p.name}`));
  const localIps = new Set(local.flatMap((p) => p.ips.map(canonical)));
  const pods = [...[...w.pods.values()].filter((p) => !localKeys.has(`${p.namespace}/${p.name}`) && !p.ips.some((ip) => localIps.has(canonical(ip)))), ...local];
  const ix = new ViewIndex({ policies: [...w.policies.values()], namespaces: [...w.namespaces.values()], pods, nodes: {} });
  return { rs: compileRuleset(ix, local, logDenied), ix, local };
}

const sorted = <V>(m: Map<string, V>) => [...m].sort(([a], [b]) => (a < b ? -1 : 1));
const plain = (rs: PolicyRuleset) => ({
  sets: sorted(rs.sets), chains: sorted(rs.chains),
  maps: Object.fromEntries(Object.entries(rs.maps).map(([k, m]) => [k, sorted(m)])),
  self: rs.self, counters: rs.counters, limits: sorted(rs.limits),
});
const plainKernel = (k: KernelPolicy) => ({
  base: k.base, chains: [...k.chains].sort(), counters: [...k.counters].sort(), limits: [...k.limits].sort(),
  sets: sorted(k.sets).map(([n, s]) => [n, s.family, s.kind, [...s.elements].sort()]),
  maps: Object.fromEntries(Object.entries(k.maps).map(([m, v]) => [m, sorted(v)])),
});
/** A transaction's lines with each element list in a fixed order: two transactions that do the
 * same compare equal whatever order they listed elements in. */
const lines = (tx: string) => tx.split('\n').filter(Boolean).map((l) => l.replace(/\{ (.*) \}$/, (_m, list: string) => `{ ${list.split(', ').sort().join(', ')} }`)).sort();

/** One random change to the world and to the compiler alike; answers what it did. */
function change(r: Rnd, w: World, c: IncrementalCompiler, step: number): string {
  const pods = [...w.pods.keys()];
  switch (r.int(10)) {
    case 0:
    case 1: {
      const ns = r.pick(NAMESPACES);
      const pod = podOf(r, w, ns, `p${step}`, r.chance(0.3) ? NODE : 'n2');
      w.pods.set(`${ns}/${pod.name}`, pod);
      c.setPod(`${ns}/${pod.name}`, pod);
      return `pod ${ns}/${pod.name} added`;
    }
    case 2: {
      if (!pods.length) return 'nothing';
      const key = r.pick(pods);
      const old = w.pods.get(key)!;
      const pod = r.chance(0.7) ? { ...old, labels: labels(r) } : { ...old, ips: r.chance(0.3) ? [] : podOf(r, w, old.namespace, old.name, old.node!).ips };
      w.pods.set(key, pod);
      c.setPod(key, pod);
      return `pod ${key} changed`;
    }
    case 3: {
      if (!pods.length) return 'nothing';
      const key = r.pick(pods);
      w.pods.delete(key);
      c.setPod(key, undefined);
      return `pod ${key} deleted`;
    }
    case 4: {
      const name = r.pick(NAMESPACES);
      const ns = r.chance(0.85) ? { name, labels: labels(r) } : undefined;
      if (ns) w.namespaces.set(name, ns);
      else w.namespaces.delete(name);
      c.setNamespace(name, ns);
      return `namespace ${name} ${ns ? 'relabelled' : 'deleted'}`;
    }
    case 5:
    case 6: {
      const ns = r.pick(NAMESPACES);
      const name = `np${r.int(6)}`;
      const p = policy(r, ns, name);
      w.policies.set(`${ns}/${name}`, p);
      c.setPolicy(`${ns}/${name}`, p);
      return `policy ${ns}/${name} set`;
    }
    case 7: {
      const keys = [...w.policies.keys()];
      if (!keys.length) return 'nothing';
      const key = r.pick(keys);
      w.policies.delete(key);
      c.setPolicy(key, undefined);
      return `policy ${key} deleted`;
    }
    case 8: {
      // A pod of this node admitted: the source's pod of that name, or one it does not have
      // (yet), or one nothing could be learned of. Now and then it takes the address of a pod
      // the source still lists (that pod was deleted; the source has not heard).
      const ns = r.pick(NAMESPACES);
      const onNode = pods.filter((k) => w.pods.get(k)!.node === NODE && ![...w.locals.values()].some((l) => `${l.namespace}/${l.name}` === k));
      const key = onNode.length && r.chance(0.6) ? r.pick(onNode) : `${ns}/l${step}`;
      const [namespace, name] = key.split('/') as [string, string];
      const source = w.pods.get(key);
      const stale = pods.filter((k) => k !== key && w.pods.get(k)!.ips.length);
      const usedLocal = new Set([...w.locals.values()].flatMap((l) => l.ips.map(canonical)));
      let ips = source?.ips.length ? source.ips : podOf(r, w, namespace, name, NODE).ips;
      if (stale.length && r.chance(0.2)) ips = w.pods.get(r.pick(stale))!.ips;
      if (ips.some((ip) => usedLocal.has(canonical(ip)))) ips = podOf(r, w, namespace, name, NODE).ips;
      const seen = r.chance(0.15) ? 'unknown' : source ?? { namespace, name, labels: labels(r), ips: [] };
      const input: LocalInput = { namespace, name, ips, seen };
      const id = `sb${step}`;
      w.locals.set(id, input);
      c.setLocal(id, input);
      return `local ${key} admitted as ${id}${seen === 'unknown' ? ' (unknown)' : ''}`;
    }
    default: {
      const ids = [...w.locals.keys()];
      if (!ids.length) return 'nothing';
      const id = r.pick(ids);
      w.locals.delete(id);
      c.setLocal(id, undefined);
      return `local ${id} released`;
    }
  }
}

/** This node's verdict on a flow against the oracle's sides that this node judges. */
function oracleMismatches(rs: PolicyRuleset, ix: ViewIndex, local: LocalPod[]): string[] {
  if (local.some((p) => p.unknown)) return []; // fail closed: the oracle knows nothing of it
  const localIps = new Set(local.flatMap((p) => p.ips.map(canonical)));
  const bad: string[] = [];
  const pods = ix.pods;
  for (const from of pods) for (const to of pods) {
    if (from === to) continue;
    for (const family of [4, 6] as const) {
      const src = from.ips.find((ip) => ip.includes(':') === (family === 6));
      const dst = to.ips.find((ip) => ip.includes(':') === (family === 6));
      if (!src || !dst || (!localIps.has(canonical(src)) && !localIps.has(canonical(dst)))) continue;
      for (const [protocol, proto, dport] of [['TCP', 6, 80], ['UDP', 17, 53], ['TCP', 6, 8080]] as const) {
        const v = evaluate(ix, { src, dst, protocol, port: dport });
        const want = (!localIps.has(canonical(src)) || v.egress.allowed) && (!localIps.has(canonical(dst)) || v.ingress.allowed);
        const got = forwardVerdict(rs, { src, dst, proto, dport }) === 'accept';
        if (want !== got) bad.push(`${from.namespace}/${from.name} -> ${to.namespace}/${to.name} ${protocol}/${dport}: oracle ${want}, node ${got}`);
      }
    }
  }
  return bad;
}

const LOG: DeniedLogSettings = { group: 100, rate: '10/second', burst: 20 };

for (const seed of [1, 2, 3, 4, 5, 6]) {
  const logDenied = seed % 2 === 0 ? LOG : undefined;
  test(`random changes applied one by one equal the full compile, the transaction and the oracle (seed ${seed}${logDenied ? ', logDenied' : ''})`, (t) => {
    const r = random(seed);
    const w: World = { pods: new Map(), namespaces: new Map(), policies: new Map(), locals: new Map(), nextIp: 1 };
    const c = new IncrementalCompiler(NODE, logDenied);
    const limitSeen = { on: false, off: false };
    let kernel: KernelPolicy = emptyKernel();
    const history: string[] = [];
    for (let step = 0; step < 220; step++) {
      history.push(change(r, w, c, step));
      const touched = c.flush();
      const { rs, ix, local } = fullCompile(w, logDenied);
      const at = `after step ${step}: ${history.slice(-3).join('; ')}`;
      t.deepEqual(plain(c.ruleset), plain(rs), at);
      // The transaction over what it touched does what the one over the whole table does.
      const whole = transaction('knit-policy', kernel, rs);
      const part = transaction('knit-policy', kernel, c.ruleset, kernel.base ? touched : undefined);
      t.deepEqual(lines(part), lines(whole), at);
      kernel = committed(kernel, c.ruleset, kernel.base ? touched : undefined);
      t.deepEqual(plainKernel(kernel), plainKernel({ ...wanted(rs), chains: new Set([...rs.chains.keys(), BASE_CHAIN]) }), at);
      t.is(transaction('knit-policy', kernel, rs), '', at);
      if (step % 20 === 19) t.deepEqual(oracleMismatches(c.ruleset, ix, local), [], at);
      if (!t.passed) return; // the first difference says enough
      if (touched.limits.size) limitSeen[c.ruleset.limits.size ? 'on' : 'off'] = true;
    }
    t.true(c.ruleset.maps.in4.size + c.ruleset.maps.out4.size > 0, 'the sequence isolated some pod');
    if (logDenied) {
      t.true(limitSeen.on && limitSeen.off, 'the limit came with the first chain and went with the last');
      t.true([...c.ruleset.chains.values()].every((ch) => 'log' in ch && ch.log?.group === LOG.group), 'every chain logs');
    }
  });
}

test('a change touches only its own: a new peer is its sets\' elements, a label its map entries', (t) => {
  const c = new IncrementalCompiler(NODE);
  const ns = (name: string) => ({ name, labels: { team: name } });
  const pod = (namespace: string, name: string, app: string, ip: string, node = 'n2'): PolicyPod => ({ namespace, name, labels: { app }, ips: [ip], node });
  c.load({
    namespaces: [ns('x'), ns('y')],
    pods: [pod('y', 'client', 'c', '10.0.1.1'), pod('x', 'server', 's', '10.0.0.1', NODE)],
    policies: [{ metadata: { namespace: 'x', name: 'p' }, spec: { podSelector: { matchLabels: { app: 's' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'y' } } }], ports: [{ port: 80 }] }] } }],
  });
  c.setLocal('sb1', { namespace: 'x', name: 'server', ips: ['10.0.0.1'], seen: 'unknown' });
  const first = c.flush();
  t.is(first.chains.size, 1);
  t.deepEqual([...first.maps.in4], ['10.0.0.1']);

  c.setPod('y/other', pod('y', 'other', 'o', '10.0.1.7'));
  const peer = c.flush();
  t.deepEqual([...peer.sets].length, 1, 'one set gets the new peer');
  t.deepEqual([peer.chains.size, peer.counters.size, peer.maps.in4.size, peer.self], [0, 0, 0, false]);

  c.setPod('y/unrelated', pod('z', 'unrelated', 'o', '10.0.2.7'));
  t.deepEqual(c.flush(), { sets: new Set(), chains: new Set(), counters: new Set(), limits: new Set(), self: false, maps: { in4: new Set(), in6: new Set(), out4: new Set(), out6: new Set(), local4: new Set(), local6: new Set() } }, 'a pod no peer selects touches nothing');

  c.setPod('x/server', pod('x', 'server', 'other', '10.0.0.1', NODE));
  const relabel = c.flush();
  t.deepEqual([...relabel.maps.in4], ['10.0.0.1'], 'the server left the policy: its map entry');
  t.deepEqual([...relabel.chains].length, 1, 'and its chain, now unused');
  t.false(c.ruleset.maps.in4.has('10.0.0.1'));
});

/** ClusterNetworkPolicies over the random world's namespaces and labels: the daemon adds their
 * tiers, compiled whole, to a copy of the incremental share at every pass. */
const CNPS: ClusterNetworkPolicy[] = [
  { metadata: { name: 'deny-y-to-x' }, spec: { tier: 'Admin', priority: 10, subject: { namespaces: { matchLabels: { [NAMESPACE_NAME_LABEL]: 'x' } } }, ingress: [{ action: 'Deny', from: [{ namespaces: { matchLabels: { [NAMESPACE_NAME_LABEL]: 'y' } } }] }] } },
  { metadata: { name: 'pass-app-a' }, spec: { tier: 'Admin', priority: 20, subject: { pods: { namespaceSelector: {}, podSelector: { matchLabels: { app: 'a' } } } }, egress: [{ action: 'Pass', to: [{ pods: { namespaceSelector: {}, podSelector: { matchLabels: { tier: 'b' } } } }], protocols: [{ tcp: { destinationPort: { number: 80 } } }] }] } },
  { metadata: { name: 'baseline-z' }, spec: { tier: 'Baseline', priority: 5, subject: { namespaces: { matchLabels: { [NAMESPACE_NAME_LABEL]: 'z' } } }, ingress: [{ action: 'Deny', from: [{ namespaces: {} }], protocols: [{ destinationNamedPort: 'web' }] }] } },
];

for (const seed of [7, 8]) {
  test(`with ClusterNetworkPolicies: the tiers added to the incremental share equal those added to the full compile, and leave the share as it was (seed ${seed})`, (t) => {
    const r = random(seed);
    const w: World = { pods: new Map(), namespaces: new Map(), policies: new Map(), locals: new Map(), nextIp: 1 };
    const c = new IncrementalCompiler(NODE);
    let tiered = 0;
    for (let step = 0; step < 150; step++) {
      const what = change(r, w, c, step);
      c.flush();
      const { rs, ix, local } = fullCompile(w);
      const before = plain(c.ruleset);
      const incremental = withTiers(c.ruleset, new TierIndex(new ViewIndex(c.view()), CNPS, []), c.localShare());
      const full = withTiers(rs, new TierIndex(ix, CNPS, []), local);
      const same = (x: PolicyRuleset) => ({ ...plain(x), counters: [...x.counters].sort() });
      t.deepEqual(same(incremental), same(full), `after step ${step}: ${what}`);
      t.deepEqual(plain(c.ruleset), before, 'the share itself is not changed');
      if (!t.passed) return;
      if ([...incremental.chains.keys()].some((n) => /^[ab][ie][46]_/.test(n))) tiered++;
    }
    t.true(tiered > 50, `tier chains in the table after ${tiered} of 150 steps`);
  });
}
