// This node's share of the cluster's ClusterNetworkPolicies, added to the NetworkPolicy
// ruleset compile.ts made (pure). For each pod of the node, direction and family: its Admin
// tier chain (the rules of the Admin policies that select it, in order), then its
// NetworkPolicy chain as compile.ts made it (final: a pod NetworkPolicy selects is decided
// there), else its Baseline tier chain. The pod's entry in the verdict map points at the first
// of them. Pods that the same policies select share chains; a rule is one set lookup, its
// set named after the rule and holding what it matches (docs/network-policy.md,
// "ClusterNetworkPolicy"). Egress to the node's own addresses meets the input hook instead of
// forward: the `local` maps send it through the same Admin and Baseline rules, with
// NetworkPolicy's "the own node is always allowed" in between.
import { tryParseIp, formatIp, familyBits, type IpFamily } from '../ipam/ip.js';
import { mergeIntervals, normalizeBoxes, intervalText, boxText, type Box } from './boxes.js';
import type { ClusterPeer, ClusterPolicy, ClusterRule } from './cluster-policy.js';
import { resolveClusterPort, type TierIndex } from './cluster-policy-evaluate.js';
import { tierChainName, tierCounter, type TierChain, type TierRule } from './cluster-policy-nft.js';
import { shortHash, type LocalPod, type MapName, type PolicyRuleset, type SetSpec } from './compile.js';
import { isolationChain } from './ruleset.js';
import { PROTOCOL_NUMBER, type Direction, type PolicyPod } from './types.js';

const mapOf = (d: Direction, f: IpFamily): MapName => `${d === 'ingress' ? 'in' : 'out'}${f}` as MapName;

/** A copy of `rs` (the incremental compiler's share, which stays NetworkPolicy's alone) with
 * the tiers added: its containers are copied, their entries shared (compileTiers only adds and
 * replaces entries). */
export function withTiers(rs: PolicyRuleset, tix: TierIndex, local: LocalPod[]): PolicyRuleset {
  const copy: PolicyRuleset = {
    ...rs,
    sets: new Map(rs.sets), chains: new Map(rs.chains), counters: [...rs.counters], limits: new Map(rs.limits),
    maps: Object.fromEntries(Object.entries(rs.maps).map(([m, v]) => [m, new Map(v)])) as PolicyRuleset['maps'],
    self: { 4: [...rs.self[4]], 6: [...rs.self[6]] },
  };
  compileTiers(tix, local, copy);
  return copy;
}

/** Adds the tiers of `local`'s pods to `rs` (compileRuleset's answer for the same pods). */
export function compileTiers(tix: TierIndex, local: LocalPod[], rs: PolicyRuleset): void {
  if (!tix.policies.length) return;
  const counters = new Set(rs.counters);
  const sets = new SetBuilder(tix);
  const add = (c: TierChain): string => {
    const name = tierChainName(c);
    rs.chains.set(name, c); // after what it goes to: a transaction adds chains in this order
    return name;
  };
  for (const pod of local) {
    if (pod.unknown) {
      // Labels unknown: fail closed as compile.ts does for NetworkPolicy, when a policy could
      // select the pod's namespace.
      if (!tix.maySelectNamespace(pod.namespace)) continue;
      for (const d of ['ingress', 'egress'] as const) for (const a of addrs(pod)) {
        const m = mapOf(d, a.family);
        if (rs.maps[m].has(formatIp(a))) continue;
        const [name, chain] = isolationChain(d, a.family);
        rs.chains.set(name, chain);
        rs.maps[m].set(formatIp(a), name);
      }
      continue;
    }
    for (const d of ['ingress', 'egress'] as const) {
      const admin = tix.selecting('Admin', d, pod);
      const baseline = tix.selecting('Baseline', d, pod);
      if (!admin.length && !baseline.length) continue;
      for (const p of [...admin, ...baseline]) for (const r of p[d]) counters.add(tierCounter(p.key, d, r.action));
      for (const family of [4, 6] as const) {
        const own = addrs(pod).filter((a) => a.family === family).map(formatIp);
        if (!own.length) continue;
        const rulesOf = (ps: ClusterPolicy[]) => ps.flatMap((p) => p[d].flatMap((r) => tierRule(sets, p, r, d, family, pod)));
        const np = rs.maps[mapOf(d, family)].get(own[0]!);
        const base = baseline.length ? add({ tier: 'Baseline', direction: d, family, rules: rulesOf(baseline) }) : undefined;
        const adminRules = admin.length ? rulesOf(admin) : undefined;
        const adminChain = (next: string | undefined) => add({ tier: 'Admin', direction: d, family, rules: adminRules!, ...(next && { next }) });
        const first = adminRules ? adminChain(np ?? base) : np ?? base;
        for (const a of own) rs.maps[mapOf(d, family)].set(a, first!);
        if (d === 'egress') {
          // To the node itself (input hook): a pod NetworkPolicy selects is allowed there.
          const localFirst = adminRules ? adminChain(np ? undefined : base) : np ? undefined : base;
          if (localFirst) for (const a of own) rs.maps[`local${family}`].set(a, localFirst);
        }
      }
    }
  }
  for (const [name, s] of sets.built) rs.sets.set(name, s);
  rs.counters = [...counters].sort();
}

function addrs(pod: PolicyPod) {
  return pod.ips.flatMap((ip) => {
    const a = tryParseIp(ip);
    return a ? [a] : [];
  });
}

/** A rule as one lookup in a set of what it matches; a rule that matches everything needs none. */
function tierRule(sets: SetBuilder, p: ClusterPolicy, r: ClusterRule, d: Direction, family: IpFamily, pod: PolicyPod): TierRule[] {
  const base = { policy: p.key, rule: r.index, action: r.action };
  if (r.peers === 'all' && r.protocols === 'all') return [base];
  const kind = r.protocols === 'all' ? 'addr' : 'concat';
  // An ingress rule's named ports take the subject's own numbers: pods that number a name
  // differently need sets of their own.
  const variant = d === 'ingress' && r.protocols !== 'all' && r.protocols.some((m) => 'named' in m) ? JSON.stringify(r.protocols.flatMap((m) => resolveClusterPort(m, pod))) : '';
  const name = `c${d[0]}${family}${kind[0]}_${shortHash(`${p.key}\n${d}\n${r.index}\n${variant}`)}`;
  if (!sets.built.has(name)) sets.built.set(name, sets.build(r, d, family, pod));
  return [{ ...base, set: name, lookup: kind }];
}

/** Each rule's set, built once per pass; each pod's addresses parsed once. */
class SetBuilder {
  readonly built = new Map<string, SetSpec>();
  private readonly parsed = new Map<PolicyPod, Record<IpFamily, bigint[]>>();

  constructor(private readonly tix: TierIndex) {}

  private addrsOf(pod: PolicyPod, family: IpFamily): bigint[] {
    let v = this.parsed.get(pod);
    if (!v) {
      v = { 4: [], 6: [] };
      for (const a of addrs(pod)) v[a.family].push(a.value);
      this.parsed.set(pod, v);
    }
    return v[family];
  }

  /** A peer's address intervals in one family, and the pods behind them (where a named port
   * of an egress rule resolves). */
  private peer(peer: ClusterPeer, family: IpFamily): { ranges: [bigint, bigint][]; pods: PolicyPod[] } {
    const { ix } = this.tix;
    switch (peer.kind) {
      case 'block': {
        if (peer.family !== family) return { ranges: [], pods: [] };
        return { ranges: peer.ranges, pods: ix.pods.filter((q) => this.addrsOf(q, family).some((v) => peer.ranges.some(([lo, hi]) => v >= lo && v <= hi))) };
      }
      case 'pods': {
        const pods = ix.pods.filter((q) => this.tix.podPeerHas(peer, q));
        return { ranges: pods.flatMap((q) => this.addrsOf(q, family).map((v): [bigint, bigint] => [v, v])), pods };
      }
      case 'nodes': {
        const ranges = this.tix.nodesOf(peer).flatMap((n) => n.ips.flatMap((ip) => {
          const a = tryParseIp(ip);
          return a?.family === family ? [[a.value, a.value] as [bigint, bigint]] : [];
        }));
        return { ranges, pods: [] };
      }
    }
  }

  build(r: ClusterRule, d: Direction, family: IpFamily, pod: PolicyPod): SetSpec {
    const full: [bigint, bigint] = [0n, (1n << BigInt(familyBits(family))) - 1n];
    const peers = r.peers === 'all' ? [{ ranges: [full], pods: this.tix.ix.pods }] : r.peers.map((p) => this.peer(p, family));
    if (r.protocols === 'all') {
      const ranges = mergeIntervals(peers.flatMap((x) => x.ranges));
      return { family, kind: 'addr', elements: ranges.map(([lo, hi]) => intervalText(family, lo, hi)).sort() };
    }
    const boxes: Box[] = [];
    for (const peer of peers) {
      for (const m of r.protocols) {
        if (!('named' in m)) {
          for (const [lo, hi] of peer.ranges) boxes.push(box(lo, hi, PROTOCOL_NUMBER[m.protocol], m.from, m.to));
        } else if (d === 'ingress') {
          for (const x of resolveClusterPort(m, pod)) for (const [lo, hi] of peer.ranges) boxes.push(box(lo, hi, PROTOCOL_NUMBER[x.protocol], x.from, x.to));
        } else {
          // The destination pod's own number for the name: each of the peer's pods.
          for (const q of peer.pods) for (const x of resolveClusterPort(m, q)) for (const v of this.addrsOf(q, family)) boxes.push(box(v, v, PROTOCOL_NUMBER[x.protocol], x.from, x.to));
        }
      }
    }
    return { family, kind: 'concat', elements: normalizeBoxes(boxes).map((b) => boxText(family, b)).sort() };
  }
}

const box = (lo: bigint, hi: bigint, proto: number, tlo: number, thi: number): Box => ({ lo, hi, plo: proto, phi: proto, tlo, thi });
