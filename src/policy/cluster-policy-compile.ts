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
import { tryParseIp, formatIp } from '../ipam/ip.js';
import type { ClusterPolicy, ClusterRule } from './cluster-policy.js';
import type { TierIndex } from './cluster-policy-evaluate.js';
import { tierChainName, tierCounter, type TierChain, type TierRule } from './cluster-policy-nft.js';
import { TierSets } from './cluster-policy-sets.js';
import { emptyMaps, mapOf, MAP_NAMES, type GroupChain, type LocalPod, type MapName, type PolicyRuleset, type SetSpec } from './compile.js';
import { isolationChain, noneTouched, type Touched } from './ruleset.js';
import type { Direction, PolicyPod } from './types.js';

/** What the tiers add to the NetworkPolicy ruleset: every name here is the tiers'. */
export interface TierShare {
  /** Tier chains (and the isolation chains of pods of unknown labels), each after what it goes to. */
  chains: Map<string, TierChain | GroupChain>;
  sets: ReadonlyMap<string, SetSpec>;
  counters: Set<string>;
  /** This node's pods' entries, in place of NetworkPolicy's. */
  maps: Record<MapName, Map<string, string>>;
}

/** One pod of this node's part of the tiers. */
export interface PodTiers {
  chains: [string, TierChain | GroupChain][];
  entries: [MapName, string, string][];
  counters: string[];
  /** The sets its chains look up. */
  sets: string[];
}

/** The tiers of `local`'s pods, compiled whole on `share` (the NetworkPolicy ruleset of the
 * same pods, which it reads the pods' NetworkPolicy chains from). */
export function compileTierShare(tix: TierIndex, local: LocalPod[], share: PolicyRuleset): TierShare {
  const sets = new TierSets(tix);
  return tierShare(local.map((pod) => podTiers(tix, pod, share, sets)), sets.built);
}

/** A copy of `rs` with the tiers added: its containers are copied, their entries shared. */
export function addTiers(rs: PolicyRuleset, t: TierShare): PolicyRuleset {
  const copy: PolicyRuleset = {
    ...rs,
    sets: new Map(rs.sets), chains: new Map(rs.chains), counters: [...rs.counters], limits: new Map(rs.limits),
    maps: Object.fromEntries(Object.entries(rs.maps).map(([m, v]) => [m, new Map(v)])) as PolicyRuleset['maps'],
    self: { 4: [...rs.self[4]], 6: [...rs.self[6]] },
  };
  overlay(copy, t);
  return copy;
}

/** The whole compile, on a copy of `rs` (the incremental compiler's share stays NetworkPolicy's alone). */
export function withTiers(rs: PolicyRuleset, tix: TierIndex, local: LocalPod[]): PolicyRuleset {
  return addTiers(rs, compileTierShare(tix, local, rs));
}

/** Adds the tiers of `local`'s pods to `rs` (compileRuleset's answer for the same pods). */
export function compileTiers(tix: TierIndex, local: LocalPod[], rs: PolicyRuleset): void {
  overlay(rs, compileTierShare(tix, local, rs));
}

/** The names whose tiers differ between two passes' shares (none: no tiers): with what the
 * incremental compiler touched, all a transaction needs to compare. A chain is named after its
 * content; a set kept from the last pass is the same object. */
export function tierChanges(last: TierShare | undefined, now: TierShare | undefined): Touched {
  const out = noneTouched();
  const [a, b] = [last ?? NO_TIERS, now ?? NO_TIERS];
  for (const n of new Set([...a.chains.keys(), ...b.chains.keys()])) if (a.chains.has(n) !== b.chains.has(n)) out.chains.add(n);
  for (const n of new Set([...a.sets.keys(), ...b.sets.keys()])) if (a.sets.get(n) !== b.sets.get(n)) out.sets.add(n);
  for (const n of new Set([...a.counters, ...b.counters])) if (a.counters.has(n) !== b.counters.has(n)) out.counters.add(n);
  for (const m of MAP_NAMES) for (const k of new Set([...a.maps[m].keys(), ...b.maps[m].keys()])) if (a.maps[m].get(k) !== b.maps[m].get(k)) out.maps[m].add(k);
  return out;
}

const NO_TIERS: TierShare = { chains: new Map(), sets: new Map(), counters: new Set(), maps: emptyMaps() };

function overlay(rs: PolicyRuleset, t: TierShare): void {
  for (const [name, c] of t.chains) rs.chains.set(name, c);
  for (const [name, s] of t.sets) rs.sets.set(name, s);
  for (const m of MAP_NAMES) for (const [a, c] of t.maps[m]) rs.maps[m].set(a, c);
  if (t.counters.size) rs.counters = [...new Set([...rs.counters, ...t.counters])].sort();
}

/** The pods' parts as one share; `sets`: at least the sets they look up. */
export function tierShare(parts: Iterable<PodTiers>, sets: ReadonlyMap<string, SetSpec>): TierShare {
  const t: TierShare = { chains: new Map(), sets, counters: new Set(), maps: emptyMaps() };
  for (const part of parts) {
    for (const [name, c] of part.chains) t.chains.set(name, c);
    for (const [m, a, c] of part.entries) t.maps[m].set(a, c);
    for (const c of part.counters) t.counters.add(c);
  }
  return t;
}

/** One pod's part: its Admin chain (going on to its NetworkPolicy chain in `share`, else its
 * Baseline chain), its Baseline chain, and its map entries. */
export function podTiers(tix: TierIndex, pod: LocalPod, share: PolicyRuleset, sets: TierSets): PodTiers {
  const part: PodTiers = { chains: [], entries: [], counters: [], sets: [] };
  if (!tix.policies.length) return part;
  if (pod.unknown) {
    // Labels unknown: fail closed as compile.ts does for NetworkPolicy, when a policy could
    // select the pod's namespace.
    if (!tix.maySelectNamespace(pod.namespace)) return part;
    for (const d of ['ingress', 'egress'] as const) for (const a of addrs(pod)) {
      const m = mapOf(d, a.family);
      if (share.maps[m].has(formatIp(a))) continue;
      const [name, chain] = isolationChain(d, a.family);
      part.chains.push([name, chain]);
      part.entries.push([m, formatIp(a), name]);
    }
    return part;
  }
  const add = (c: TierChain): string => {
    const name = tierChainName(c);
    part.chains.push([name, c]);
    return name;
  };
  for (const d of ['ingress', 'egress'] as const) {
    const admin = tix.selecting('Admin', d, pod);
    const baseline = tix.selecting('Baseline', d, pod);
    if (!admin.length && !baseline.length) continue;
    for (const p of [...admin, ...baseline]) for (const r of p[d]) part.counters.push(tierCounter(p.key, d, r.action));
    for (const family of [4, 6] as const) {
      const own = addrs(pod).filter((a) => a.family === family).map(formatIp);
      if (!own.length) continue;
      const rulesOf = (ps: ClusterPolicy[]) => ps.flatMap((p) => p[d].map((r) => tierRule(sets, part, p, r, d, family, pod)));
      const np = share.maps[mapOf(d, family)].get(own[0]!);
      const base = baseline.length ? add({ tier: 'Baseline', direction: d, family, rules: rulesOf(baseline) }) : undefined;
      const adminRules = admin.length ? rulesOf(admin) : undefined;
      const adminChain = (next: string | undefined) => add({ tier: 'Admin', direction: d, family, rules: adminRules!, ...(next && { next }) });
      const first = adminRules ? adminChain(np ?? base) : np ?? base;
      for (const a of own) part.entries.push([mapOf(d, family), a, first!]);
      if (d === 'egress') {
        // To the node itself (input hook): a pod NetworkPolicy selects is allowed there.
        const localFirst = adminRules ? adminChain(np ? undefined : base) : np ? undefined : base;
        if (localFirst) for (const a of own) part.entries.push([`local${family}`, a, localFirst]);
      }
    }
  }
  return part;
}

function addrs(pod: PolicyPod) {
  return pod.ips.flatMap((ip) => {
    const a = tryParseIp(ip);
    return a ? [a] : [];
  });
}

/** A rule as one lookup in a set of what it matches; a rule that matches everything needs none. */
function tierRule(sets: TierSets, part: PodTiers, p: ClusterPolicy, r: ClusterRule, d: Direction, family: 4 | 6, pod: PolicyPod): TierRule {
  const base = { policy: p.key, rule: r.index, action: r.action };
  if (r.peers === 'all' && r.protocols === 'all') return base;
  const { name, kind } = sets.nameFor(p, r, d, family, pod);
  part.sets.push(name);
  return { ...base, set: name, lookup: kind };
}
