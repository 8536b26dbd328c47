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
import type { ViewIndex } from './view-index.js';
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

const mapOf = (d: Direction, f: IpFamily): MapName => `${d === 'ingress' ? 'in' : 'out'}${f}` as MapName;

/** A pod of this node. `unknown`: knit could not learn its labels (the API did not answer its
 * look-up): it is isolated both ways, with nothing allowed, while its namespace has any
 * policy (fail closed), until its labels are known. */
export type LocalPod = PolicyPod & { unknown?: boolean };

/** `local`: the pods this node enforces (its own, with the addresses knit gave them);
 * `logDenied`: what each chain's drop logs. */
export function compileRuleset(ix: ViewIndex, local: LocalPod[], logDenied?: DeniedLogSettings): PolicyRuleset {
  const out: PolicyRuleset = {
    sets: new Map(), chains: new Map(),
    maps: emptyMaps(),
    self: { 4: [], 6: [] }, counters: [], limits: new Map(),
  };
  const limit = logDenied && deniedLimit(logDenied);
  const counters = new Set<string>();
  const peerCache = new Map<string, PolicyPod[]>();
  const peersOf: PeersOf = (p, peer, where) => {
    const key = `${p.key}#${where}`;
    let pods = peerCache.get(key);
    if (!pods) peerCache.set(key, (pods = ix.pods.filter((pod) => ix.peerHas(p, peer, pod))));
    return pods;
  };
  for (const pod of local) {
    for (const ip of pod.ips) {
      const a = tryParseIp(ip);
      if (a) out.self[a.family].push(formatIp(a));
    }
    for (const d of ['ingress', 'egress'] as const) {
      const selecting = pod.unknown ? [] : ix.policies.filter((p) => p[d] && ix.selects(p, pod)).sort((a, b) => (a.key < b.key ? -1 : 1));
      const failClosed = pod.unknown && ix.policies.some((p) => p.namespace === pod.namespace);
      if (!selecting.length && !failClosed) continue;
      for (const p of selecting) {
        counters.add(allowCounter(p.key, d));
        counters.add(denyCounter(p.key, d));
      }
      for (const family of [4, 6] as const) {
        const addrs = pod.ips.map((ip) => tryParseIp(ip)).filter((a) => a?.family === family);
        if (!addrs.length) continue;
        const rules: ChainRule[] = [];
        for (const p of selecting) {
          for (const r of p[d]!) {
            if (r.peers === 'all' && r.ports === 'all') {
              rules.push({ policy: p.key, rule: r.index });
              continue;
            }
            // Named by what the set stands for, not by what it holds: a peer that comes or
            // goes changes its elements in place, and the chains that use it stay as they are.
            // What it holds depends on nothing else, so each is built once per pass.
            const variant = d === 'ingress' ? namedVariant(r, pod) : '';
            const kind = r.ports === 'all' ? 'addr' : 'concat';
            const name = `${d[0]}${family}${kind[0]}_${shortHash(`${p.key}\n${r.index}\n${variant}`)}`;
            if (!out.sets.has(name)) out.sets.set(name, ruleSet(ix, p, r, d, family, pod, peersOf));
            rules.push({ policy: p.key, rule: r.index, set: name, lookup: kind });
          }
        }
        const chain: GroupChain = { direction: d, family, rules, policies: selecting.map((p) => p.key), ...(limit && { log: { group: logDenied!.group, limit: limit.name } }) };
        if (limit) out.limits.set(limit.name, limit.spec);
        const name = `g${d[0]}${family}_${shortHash(JSON.stringify(chain))}`;
        out.chains.set(name, chain);
        for (const a of addrs) out.maps[mapOf(d, family)].set(formatIp(a!), name);
      }
    }
  }
  out.self[4].sort();
  out.self[6].sort();
  out.counters = [...counters].sort();
  return out;
}

/** A selector peer's pods; `where` names the peer within the policy (direction, rule, index). */
type PeersOf = (p: Policy, peer: Extract<Peer, { kind: 'pods' }>, where: string) => PolicyPod[];

/** The numbers an ingress rule's named ports take on this pod: pods that number a name
 * differently need sets of their own. */
function namedVariant(r: Rule, pod: PolicyPod): string {
  if (r.ports === 'all') return '';
  const named = r.ports.filter((m) => 'named' in m);
  return named.length ? JSON.stringify(named.map((m) => resolvePort(m, pod))) : '';
}

/** What rule r of p allows `pod` (ingress: from; egress: to) in one family (a rule of no
 * peers and no ports is no set: it allows everything); a rule that allows nothing (yet) keeps
 * its set, empty, so its chain stays as it is. */
function ruleSet(ix: ViewIndex, p: Policy, r: Rule, d: Direction, family: IpFamily, pod: PolicyPod, peersOf: PeersOf): SetSpec {
  const full: [bigint, bigint] = [0n, (1n << BigInt(familyBits(family))) - 1n];
  // Each peer as its address intervals and, for selector peers, the pods behind them (an
  // egress named port resolves on the destination pod).
  const peers: { ranges: [bigint, bigint][]; pods?: PolicyPod[] }[] = r.peers === 'all'
    ? [{ ranges: [full] }]
    : r.peers.flatMap((peer, j) => {
        if (peer.kind === 'block') return peer.family === family ? [{ ranges: peer.ranges }] : [];
        const pods = peersOf(p, peer, `${d}/${r.index}/${j}`);
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
      for (const m of named) for (const [tlo, thi] of resolvePort(m, pod)) for (const [lo, hi] of peer.ranges) boxes.push(box(lo, hi, m, [tlo, thi]));
    } else {
      // Each destination pod's number: selector peers' pods, or the pods inside a block.
      const pods = peer.pods ?? podsWithin(ix, peer.ranges, family);
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
function addrsOf(pod: PolicyPod, family: IpFamily): bigint[] {
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

function podsWithin(ix: ViewIndex, ranges: [bigint, bigint][], family: IpFamily): PolicyPod[] {
  return ix.pods.filter((q) => addrsOf(q, family).some((v) => ranges.some(([lo, hi]) => v >= lo && v <= hi)));
}
