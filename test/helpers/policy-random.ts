// A random cluster for the incremental compilers' tests (test/unit/policy-incremental.test.ts,
// cluster-policy-incremental.test.ts): a seeded generator of labels, selectors, NetworkPolicies
// and pods; a world (the source's pods, namespaces and policies, and this node's pods as their
// admits left them); one random change applied to the world and an IncrementalCompiler alike;
// the full compile of the world; and the comparable forms of rulesets, kernels and transactions.
import { IncrementalCompiler, type LocalInput } from '../../src/policy/incremental.js';
import { compileRuleset, type DeniedLogSettings, type LocalPod, type PolicyRuleset } from '../../src/policy/compile.js';
import type { KernelPolicy } from '../../src/policy/ruleset.js';
import { canonical, ViewIndex } from '../../src/policy/view-index.js';
import type { LabelSelector, NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort, PolicyNamespace, PolicyPod } from '../../src/policy/types.js';

export const NODE = 'n1';
export const NAMESPACES = ['x', 'y', 'z', 'w'];
export const KEYS = ['app', 'tier'];
export const VALUES = ['a', 'b', 'c'];
export const PORT_NAMES = ['web', 'dns'];

/** A seeded generator (the same sequence on every run; the seed is in the test's name). */
export function random(seed: number) {
  let s = seed;
  const next = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32);
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
  const chance = (p: number) => next() < p;
  return { int, pick, chance };
}
export type Rnd = ReturnType<typeof random>;

export function labels(r: Rnd): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of KEYS) if (r.chance(0.6)) out[k] = r.pick(VALUES);
  return out;
}

export function selector(r: Rnd): LabelSelector {
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
export interface World {
  pods: Map<string, PolicyPod>;
  namespaces: Map<string, PolicyNamespace>;
  policies: Map<string, NetworkPolicy>;
  locals: Map<string, LocalInput>;
  nextIp: number;
}

export function podOf(r: Rnd, w: World, namespace: string, name: string, node: string): PolicyPod {
  const n = w.nextIp++;
  const ips = [`10.0.${n >> 4 & 3}.${n & 15}`, ...(r.chance(0.7) ? [`fd00::${n >> 4 & 3}:${n & 15}`] : [])];
  const ports = PORT_NAMES.filter(() => r.chance(0.5)).map((pn) => ({ name: pn, port: r.pick([80, 81, 53, 8080]), protocol: r.pick(['TCP', 'UDP'] as const) }));
  return { namespace, name, labels: labels(r), ips, node, ...(r.chance(0.1) && { hostNetwork: true }), ...(ports.length && { ports }) };
}

/** What the daemon used to compute on every pass: the source's pods less those a pod of
 * this node replaces, plus this node's pods, compiled whole. */
export function fullCompile(w: World, logDenied?: DeniedLogSettings): { rs: PolicyRuleset; ix: ViewIndex; local: LocalPod[] } {
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

export const sorted = <V>(m: Map<string, V>) => [...m].sort(([a], [b]) => (a < b ? -1 : 1));
export const plain = (rs: PolicyRuleset) => ({
  sets: sorted(rs.sets), chains: sorted(rs.chains),
  maps: Object.fromEntries(Object.entries(rs.maps).map(([k, m]) => [k, sorted(m)])),
  self: rs.self, counters: rs.counters, limits: sorted(rs.limits),
});
export const plainKernel = (k: KernelPolicy) => ({
  base: k.base, chains: [...k.chains].sort(), counters: [...k.counters].sort(), limits: [...k.limits].sort(),
  sets: sorted(k.sets).map(([n, s]) => [n, s.family, s.kind, [...s.elements].sort()]),
  maps: Object.fromEntries(Object.entries(k.maps).map(([m, v]) => [m, sorted(v)])),
});
/** A transaction's lines with each element list in a fixed order: two transactions that do the
 * same compare equal whatever order they listed elements in. */
export const lines = (tx: string) => tx.split('\n').filter(Boolean).map((l) => l.replace(/\{ (.*) \}$/, (_m, list: string) => `{ ${list.split(', ').sort().join(', ')} }`)).sort();

/** One random change to the world and to the compiler alike; answers what it did. */
export function change(r: Rnd, w: World, c: IncrementalCompiler, step: number): string {
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
