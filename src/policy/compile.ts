// This node's share of the cluster's policies as an nftables datapath, pure: which of its pods
// are isolated and by which policies, and for each rule of those policies the addresses (and
// protocols and ports) it allows. Pods that the same policies select share one chain per
// direction and family; a rule is one set lookup in it. Per packet the cost is a verdict-map
// lookup and one set lookup per rule of the pod's own policies, whatever the number of pods
// and policies in the cluster (docs/network-policy.md, "The datapath").
import { createHash } from 'node:crypto';
import { tryParseIp, familyBits, formatIp, type IpFamily } from '../ipam/ip.js';
import { mergeIntervals, normalizeBoxes, intervalText, boxText, type Box } from './boxes.js';
import type { Peer, Policy, PortMatch, Rule } from './normalize.js';
import { resolvePort } from './evaluate.js';
import { PROTOCOL_NUMBER, type Direction, type PolicyPod } from './types.js';
import { policySelects, type ViewIndex } from './view-index.js';
import type { TierChain } from './cluster-policy-nft.js';

/** A rule's set: addresses only (a rule without ports), or address . protocol . port. */
export interface SetSpec {
  family: IpFamily;
  kind: 'addr' | 'concat';
  /** nft element texts, canonical (boxes.ts), sorted. */
  elements: string[];
}

/** One allowing rule of a group chain: a set lookup, or (no set) everything. */
export interface ChainRule {
  policy: string;
  rule: number;
  set?: string;
  /** The set's kind: a lookup of the peer's address, or of address . protocol . port. */
  lookup?: SetSpec['kind'];
}

/** The chain of the pods a list of policies selects in one direction and family. Its name
 * is a hash of its content, so a chain never changes: pods move between chains instead. */
export interface GroupChain {
  direction: Direction;
  family: IpFamily;
  rules: ChainRule[];
  /** The selecting policies, for the denied counters. */
  policies: string[];
  /** Denied packets logged (networkPolicy.logDenied): to this nflog group, through this
   * table-wide limit (a named limit object). Part of the chain's content, so of its name. */
  log?: { group: number; limit: string };
}

/** networkPolicy.logDenied, as the compiler takes it. */
export interface DeniedLogSettings {
  group: number;
  /** nft's "<n>/second" (or minute, hour, day). */
  rate: string;
  burst: number;
}

/** The named limit object that logging goes through: named after its rate, so a new rate is
 * a new object (and new chains), never an object changed in place. */
export function deniedLimit(s: DeniedLogSettings): { name: string; spec: string } {
  const spec = `rate ${s.rate} burst ${s.burst} packets`;
  return { name: `l_${shortHash(spec)}`, spec };
}

/** in/out: the forward hook's maps, by destination and by source. local: a pod's egress to
 * its own node (the input hook), where only ClusterNetworkPolicy applies (cluster-policy-compile.ts). */
export type MapName = 'in4' | 'in6' | 'out4' | 'out6' | 'local4' | 'local6';
export const MAP_NAMES: readonly MapName[] = ['in4', 'in6', 'out4', 'out6', 'local4', 'local6'];
export const emptyMaps = () => Object.fromEntries(MAP_NAMES.map((m) => [m, new Map<string, string>()])) as Record<MapName, Map<string, string>>;

export interface PolicyRuleset {
  sets: Map<string, SetSpec>;
  /** NetworkPolicy's group chains, and ClusterNetworkPolicy's tier chains (cluster-policy-nft.ts). */
  chains: Map<string, GroupChain | TierChain>;
  /** Isolated local pod address (canonical text) → its group chain. */
  maps: Record<MapName, Map<string, string>>;
  /** Local pods' addresses: a pod reaching itself always passes. */
  self: Record<IpFamily, string[]>;
  /** Named counters: allowed and denied per policy and direction. */
  counters: string[];
  /** Named limit objects (name → nft spec): the denied log's rate. */
  limits: Map<string, string>;
}

export const shortHash = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 12);

export const allowCounter = (policy: string, d: Direction) => `a${d[0]}_${shortHash(policy)}`;
export const denyCounter = (policy: string, d: Direction) => `d${d[0]}_${shortHash(policy)}`;

export const mapOf = (d: Direction, f: IpFamily): MapName => `${d === 'ingress' ? 'in' : 'out'}${f}` as MapName;

/** A pod of this node. `unknown`: knit could not learn its labels (the API did not answer its
 * look-up): it is isolated both ways, with nothing allowed, while its namespace has any
 * policy (fail closed), until its labels are known. */
export type LocalPod = PolicyPod & { unknown?: boolean };

/** What a rule's set holds depends on these alone; its name (setName) stands for them. */
export interface SetDef {
  policy: Policy;
  rule: Rule;
  direction: Direction;
  family: IpFamily;
  kind: SetSpec['kind'];
  /** An ingress rule's named ports as the selected pod numbers them, one list per named
   * port of the rule, in order: pods that number a name differently need sets of their own. */
  named: [number, number][][];
}

/** A counter of this node's share: allowed or denied packets of one policy and direction. */
export interface CounterDef {
  name: string;
  policy: string;
  direction: Direction;
  verdict: 'allowed' | 'denied';
}

/** One local pod's part of the share: its counters, and per direction and family the chain
 * its addresses jump to, with the sets the chain looks up. */
export interface PodShare {
  counters: CounterDef[];
  chains: { map: MapName; addrs: string[]; name: string; chain: GroupChain; sets: { name: string; def: SetDef }[] }[];
}

/** A pod's share, from the policies that may select it (any superset of its namespace's).
 * `log`: where each of its chains logs what it drops (networkPolicy.logDenied). */
export function podShare(pod: LocalPod, policies: Iterable<Policy>, log?: GroupChain['log']): PodShare {
  const candidates = [...policies].filter((p) => p.namespace === pod.namespace);
  const out: PodShare = { counters: [], chains: [] };
  for (const d of ['ingress', 'egress'] as const) {
    const selecting = pod.unknown ? [] : candidates.filter((p) => p[d] && policySelects(p, pod)).sort((a, b) => (a.key < b.key ? -1 : 1));
    const failClosed = pod.unknown && candidates.length > 0;
    if (!selecting.length && !failClosed) continue;
    for (const p of selecting) {
      out.counters.push({ name: allowCounter(p.key, d), policy: p.key, direction: d, verdict: 'allowed' });
      out.counters.push({ name: denyCounter(p.key, d), policy: p.key, direction: d, verdict: 'denied' });
    }
    for (const family of [4, 6] as const) {
      const addrs = pod.ips.map((ip) => tryParseIp(ip)).filter((a) => a?.family === family).map((a) => formatIp(a!));
      if (!addrs.length) continue;
      const rules: ChainRule[] = [];
      const sets: PodShare['chains'][number]['sets'] = [];
      for (const p of selecting) {
        for (const r of p[d]!) {
          if (r.peers === 'all' && r.ports === 'all') {
            rules.push({ policy: p.key, rule: r.index });
            continue;
          }
          // Named by what the set stands for, not by what it holds: a peer that comes or
          // goes changes its elements in place, and the chains that use it stay as they are.
          const named = d === 'ingress' && r.ports !== 'all' ? r.ports.filter((m) => 'named' in m).map((m) => resolvePort(m, pod)) : [];
          const kind = r.ports === 'all' ? 'addr' : 'concat';
          const name = `${d[0]}${family}${kind[0]}_${shortHash(`${p.key}\n${r.index}\n${named.length ? JSON.stringify(named) : ''}`)}`;
          sets.push({ name, def: { policy: p, rule: r, direction: d, family, kind, named } });
          rules.push({ policy: p.key, rule: r.index, set: name, lookup: kind });
        }
      }
      const chain: GroupChain = { direction: d, family, rules, policies: selecting.map((p) => p.key), ...(log && { log }) };
      out.chains.push({ map: mapOf(d, family), addrs, name: `g${d[0]}${family}_${shortHash(JSON.stringify(chain))}`, chain, sets });
    }
  }
  return out;
}

/** Every address of a family, as one interval. */
export const fullRange = (family: IpFamily): [bigint, bigint] => [0n, (1n << BigInt(familyBits(family))) - 1n];

/** A selector peer's pods. */
export type PodsPeer = Extract<Peer, { kind: 'pods' }>;
export type PeerPods = (p: Policy, peer: PodsPeer) => Iterable<PolicyPod>;
/** The pods with an address of `family` inside the ranges (an egress named port to a block). */
export type PodsWithin = (ranges: [bigint, bigint][], family: IpFamily) => Iterable<PolicyPod>;

/** Where chains log their drops, and the limit object that holds them to the rate. */
export function deniedLog(s: DeniedLogSettings | undefined): { log: GroupChain['log']; limit: { name: string; spec: string } } | undefined {
  if (!s) return undefined;
  const limit = deniedLimit(s);
  return { log: { group: s.group, limit: limit.name }, limit };
}

/** The full compile, from the view: the reference the incremental compiler (incremental.ts)
 * is tested against. `local`: the pods this node enforces (its own, with the addresses knit
 * gave them); `logDenied`: what each chain's drop logs. */
export function compileRuleset(ix: ViewIndex, local: LocalPod[], logDenied?: DeniedLogSettings): PolicyRuleset {
  const out: PolicyRuleset = {
    sets: new Map(), chains: new Map(),
    maps: emptyMaps(),
    self: { 4: [], 6: [] }, counters: [], limits: new Map(),
  };
  const logging = deniedLog(logDenied);
  const counters = new Set<string>();
  // Each peer's pods once per compile (a peer object belongs to one normalized policy).
  const peerCache = new Map<PodsPeer, PolicyPod[]>();
  const peersOf: PeerPods = (p, peer) => {
    let pods = peerCache.get(peer);
    if (!pods) peerCache.set(peer, (pods = ix.pods.filter((pod) => ix.peerHas(p, peer, pod))));
    return pods;
  };
  const within: PodsWithin = (ranges, family) => ix.pods.filter((q) => addrsOf(q, family).some((v) => ranges.some(([lo, hi]) => v >= lo && v <= hi)));
  for (const pod of local) {
    for (const ip of pod.ips) {
      const a = tryParseIp(ip);
      if (a) out.self[a.family].push(formatIp(a));
    }
    const share = podShare(pod, ix.policies, logging?.log);
    for (const c of share.counters) counters.add(c.name);
    for (const c of share.chains) {
      for (const s of c.sets) if (!out.sets.has(s.name)) out.sets.set(s.name, ruleSet(s.def, peersOf, within));
      out.chains.set(c.name, c.chain);
      for (const a of c.addrs) out.maps[c.map].set(a, c.name);
    }
  }
  // The one limit, while a chain logs through it.
  if (logging && out.chains.size) out.limits.set(logging.limit.name, logging.limit.spec);
  out.self[4].sort();
  out.self[6].sort();
  out.counters = [...counters].sort();
  return out;
}

/** What a rule allows (ingress: from; egress: to) in one family, as a set's canonical
 * elements (a rule of no peers and no ports is no set: it allows everything); a rule that
 * allows nothing (yet) keeps its set, empty, so its chain stays as it is. */
export function ruleSet(def: SetDef, peerPods: PeerPods, podsWithin: PodsWithin): SetSpec {
  const { policy: p, rule: r, direction: d, family } = def;
  const full = fullRange(family);
  // Each peer as its address intervals and, for selector peers, the pods behind them (an
  // egress named port resolves on the destination pod).
  const peers: { ranges: [bigint, bigint][]; pods?: Iterable<PolicyPod> }[] = r.peers === 'all'
    ? [{ ranges: [full] }]
    : r.peers.flatMap((peer) => {
        if (peer.kind === 'block') return peer.family === family ? [{ ranges: peer.ranges }] : [];
        const pods = [...peerPods(p, peer)];
        return [{ ranges: pods.flatMap((q) => addrsOf(q, family).map((v): [bigint, bigint] => [v, v])), pods }];
      });
  if (r.ports === 'all') {
    const ranges = mergeIntervals(peers.flatMap((x) => x.ranges));
    return { family, kind: 'addr', elements: ranges.map(([lo, hi]) => intervalText(family, lo, hi)).sort() };
  }
  const boxes: Box[] = [];
  const numeric = r.ports.filter((m) => !('named' in m));
  const named = r.ports.filter((m): m is Extract<PortMatch, { named: string }> => 'named' in m);
  for (const peer of peers) {
    for (const m of numeric) for (const [lo, hi] of peer.ranges) boxes.push(box(lo, hi, m, [(m as { from: number }).from, (m as { to: number }).to]));
    if (!named.length) continue;
    if (d === 'ingress') {
      // The selected pod's own number for the name.
      named.forEach((m, i) => {
        for (const [tlo, thi] of def.named[i]!) for (const [lo, hi] of peer.ranges) boxes.push(box(lo, hi, m, [tlo, thi]));
      });
    } else {
      // Each destination pod's number: selector peers' pods, or the pods inside a block.
      const pods = peer.pods ?? podsWithin(peer.ranges, family);
      for (const q of pods) for (const m of named) for (const [tlo, thi] of resolvePort(m, q)) for (const v of addrsOf(q, family)) boxes.push(box(v, v, m, [tlo, thi]));
    }
  }
  return { family, kind: 'concat', elements: normalizeBoxes(boxes).map((b) => boxText(family, b)).sort() };
}

function box(lo: bigint, hi: bigint, m: PortMatch, [tlo, thi]: [number, number]): Box {
  const proto = PROTOCOL_NUMBER[m.protocol];
  return { lo, hi, plo: proto, phi: proto, tlo, thi };
}

/** A pod's addresses of one family, parsed once per pod object (a pass reads each many times). */
const parsed = new WeakMap<PolicyPod, Record<IpFamily, bigint[]>>();
export function addrsOf(pod: PolicyPod, family: IpFamily): bigint[] {
  let v = parsed.get(pod);
  if (!v) {
    v = { 4: [], 6: [] };
    for (const ip of pod.ips) {
      const a = tryParseIp(ip);
      if (a) v[a.family].push(a.value);
    }
    parsed.set(pod, v);
  }
  return v[family];
}
