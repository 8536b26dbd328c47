// The tiered oracle: one flow's verdict under ClusterNetworkPolicy and NetworkPolicy together,
// the reference for the compiled tiers (cluster-policy-compile.ts) and what `knit policy
// explain` answers. Each direction is judged on its own (egress for the source pod, ingress for
// the destination pod), in the order the API defines (v1beta1 ClusterNetworkPolicySpec.Tier):
//   1. the Admin tier: the policies that select the pod, by priority (lower first; the same
//      priority by name, a choice the API leaves open), each one's rules in order; the first
//      rule that matches decides: Accept allows, Deny denies, Pass ends the tier;
//   2. NetworkPolicy: a pod some NetworkPolicy selects for the direction is decided there
//      (evaluate.ts, own node included);
//   3. the Baseline tier, as the Admin tier (Pass ends it);
//   4. allowed.
// A pod reaching its own address is never judged (the API's hairpin semantics), nor is its own
// node reaching it (no ingress peer names a node; its egress to the node is judged).
import { tryParseIp } from '../ipam/ip.js';
import { normalizeClusterPolicy, type Action, type ClusterNetworkPolicy, type ClusterPeer, type ClusterPolicy, type ClusterPort, type ClusterRule, type PolicyNode, type Tier } from './cluster-policy.js';
import { side, type Flow, type SideVerdict } from './evaluate.js';
import { ViewIndex, canonical } from './view-index.js';
import { PROTOCOLS, type Direction, type PolicyPod, type PolicyView, type Protocol } from './types.js';

/** The view's ClusterNetworkPolicies, normalized and in tier order, with the nodes they name. */
export class TierIndex {
  readonly policies: ClusterPolicy[];
  private readonly byTier: Record<Tier, ClusterPolicy[]>;
  private readonly nodeOfIp = new Map<string, PolicyNode>();

  constructor(readonly ix: ViewIndex, cnps: readonly ClusterNetworkPolicy[], readonly nodes: readonly PolicyNode[]) {
    this.policies = cnps.map(normalized).sort((a, b) => a.priority - b.priority || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    this.byTier = { Admin: this.policies.filter((p) => p.tier === 'Admin'), Baseline: this.policies.filter((p) => p.tier === 'Baseline') };
    for (const n of nodes) for (const ip of n.ips) this.nodeOfIp.set(canonical(ip), n);
  }

  /** The policies of a tier that select the pod and have rules of the direction, in order. */
  selecting(tier: Tier, d: Direction, pod: PolicyPod): ClusterPolicy[] {
    return this.byTier[tier].filter((p) => p[d].length && this.selects(p, pod));
  }

  /** hostNetwork pods are never a subject (nor a pod peer). */
  selects(p: ClusterPolicy, pod: PolicyPod): boolean {
    return !pod.hostNetwork && p.subject.namespaces.matches(this.ix.namespaceLabels(pod.namespace)) && p.subject.pods.matches(pod.labels);
  }

  podPeerHas(peer: Extract<ClusterPeer, { kind: 'pods' }>, pod: PolicyPod): boolean {
    return !pod.hostNetwork && peer.namespaces.matches(this.ix.namespaceLabels(pod.namespace)) && peer.pods.matches(pod.labels);
  }

  nodesOf(peer: Extract<ClusterPeer, { kind: 'nodes' }>): PolicyNode[] {
    return this.nodes.filter((n) => peer.nodes.matches(n.labels));
  }

  nodeAt(ip: string): PolicyNode | undefined {
    return this.nodeOfIp.get(canonical(ip));
  }

  /** Whether a namespace's pods could be a subject of some policy (an unknown pod fails closed). */
  maySelectNamespace(namespace: string): boolean {
    const labels = this.ix.namespaceLabels(namespace);
    return this.policies.some((p) => p.subject.namespaces.matches(labels));
  }
}

const seen = new WeakMap<ClusterNetworkPolicy, ClusterPolicy>();
function normalized(c: ClusterNetworkPolicy): ClusterPolicy {
  let p = seen.get(c);
  if (!p) seen.set(c, (p = normalizeClusterPolicy(c)));
  return p;
}

export interface TierDecision {
  tier: Tier;
  policy: string;
  rule: number;
  ruleName?: string;
  action: Action;
}

export interface TieredSide extends SideVerdict {
  /** Who decided: a tier's rule, NetworkPolicy, or nobody (allowed by default). */
  decidedBy: 'Admin' | 'NetworkPolicy' | 'Baseline' | 'default' | 'none';
  /** The rule that decided, or the Pass rules that ended a tier on the way. */
  decision?: TierDecision;
  passed: TierDecision[];
  /** The ClusterNetworkPolicies that select the pod for this direction. */
  clusterSelecting: string[];
}

export interface TieredVerdict {
  allowed: boolean;
  egress: TieredSide;
  ingress: TieredSide;
}

export function evaluateTiered(view: PolicyView | ViewIndex, cnps: readonly ClusterNetworkPolicy[] | TierIndex, nodes: readonly PolicyNode[] = [], flow: Flow): TieredVerdict {
  const ix = view instanceof ViewIndex ? view : new ViewIndex(view);
  const tix = cnps instanceof TierIndex ? cnps : new TierIndex(ix, cnps, nodes);
  if (!tryParseIp(flow.src) || !tryParseIp(flow.dst)) throw new Error(`flow: ${JSON.stringify(flow.src)} or ${JSON.stringify(flow.dst)} is not an IP address`);
  const src = ix.podAt(flow.src);
  const dst = ix.podAt(flow.dst);
  const egress = tieredSide(tix, 'egress', src, dst, flow);
  const ingress = tieredSide(tix, 'ingress', dst, src, flow);
  return { allowed: egress.allowed && ingress.allowed, egress, ingress };
}

function tieredSide(tix: TierIndex, d: Direction, pod: PolicyPod | undefined, other: PolicyPod | undefined, flow: Flow): TieredSide {
  const np = side(tix.ix, d, pod, other, flow);
  const passed: TierDecision[] = [];
  const base = { ...np, passed, clusterSelecting: [] as string[] };
  if (!pod) return { ...base, decidedBy: 'none' };
  if (other === pod) return { ...base, decidedBy: 'none' };
  const otherIp = d === 'egress' ? flow.dst : flow.src;
  // No ingress peer can name a node: the pod's own node always reaches it.
  if (d === 'ingress' && pod.node && tix.ix.nodeAt(otherIp) === pod.node) return { ...base, decidedBy: 'none', allowed: true, allowedBy: [], why: 'traffic from the pod\'s own node is always allowed' };
  base.clusterSelecting = [...tix.selecting('Admin', d, pod), ...tix.selecting('Baseline', d, pod)].map((p) => p.key);
  const decided = (tier: Tier, t: TierDecision): TieredSide => ({
    ...base, decidedBy: tier, decision: t, allowed: t.action === 'Accept',
    allowedBy: t.action === 'Accept' ? [{ policy: t.policy, rule: t.rule }] : [],
    why: `${t.action === 'Accept' ? 'accepted' : 'denied'} by ${t.policy} ${d}[${t.rule}]${t.ruleName ? ` (${t.ruleName})` : ''}, ${tier} tier${passNote(passed)}`,
  });

  const admin = tierDecision(tix, 'Admin', d, pod, otherIp, other, flow);
  if (admin?.action === 'Pass') passed.push(admin);
  else if (admin) return decided('Admin', admin);
  if (np.selecting.length) return { ...base, decidedBy: 'NetworkPolicy', why: `${np.why}${passNote(passed)}` };
  const baseline = tierDecision(tix, 'Baseline', d, pod, otherIp, other, flow);
  if (baseline?.action === 'Pass') passed.push(baseline);
  else if (baseline) return decided('Baseline', baseline);
  return { ...base, decidedBy: 'default', allowed: true, allowedBy: [], why: `no policy decides ${pod.namespace}/${pod.name}'s ${d}: allowed${passNote(passed)}` };
}

const passNote = (passed: TierDecision[]) => passed.map((p) => `; passed on by ${p.policy} ${p.tier} ${p.rule}${p.ruleName ? ` (${p.ruleName})` : ''}`).join('');

/** The first rule of the tier's policies that selects `pod` matching the flow, if any. */
function tierDecision(tix: TierIndex, tier: Tier, d: Direction, pod: PolicyPod, otherIp: string, other: PolicyPod | undefined, flow: Flow): TierDecision | undefined {
  const destination = d === 'ingress' ? pod : other;
  for (const p of tix.selecting(tier, d, pod)) {
    for (const r of p[d]) {
      if (clusterRuleMatches(tix, r, otherIp, other, destination, flow)) return { tier, policy: p.key, rule: r.index, ...(r.name && { ruleName: r.name }), action: r.action };
    }
  }
  return undefined;
}

/** Whether rule r matches the flow with `peerIp`/`peer` at the other end; a named port
 * resolves on `destination` (the subject for ingress, the peer for egress). */
export function clusterRuleMatches(tix: TierIndex, r: ClusterRule, peerIp: string, peer: PolicyPod | undefined, destination: PolicyPod | undefined, flow: Flow): boolean {
  return peerMatches(tix, r, peerIp, peer) && protocolMatches(r, destination, flow);
}

function peerMatches(tix: TierIndex, r: ClusterRule, ip: string, pod: PolicyPod | undefined): boolean {
  if (r.peers === 'all') return true;
  const addr = tryParseIp(ip)!;
  return r.peers.some((peer) => {
    switch (peer.kind) {
      case 'block': return peer.family === addr.family && peer.ranges.some(([lo, hi]) => addr.value >= lo && addr.value <= hi);
      case 'pods': return !!pod && tix.podPeerHas(peer, pod);
      case 'nodes': {
        const node = tix.nodeAt(ip);
        return !!node && peer.nodes.matches(node.labels);
      }
    }
  });
}

function protocolMatches(r: ClusterRule, destination: PolicyPod | undefined, flow: Flow): boolean {
  if (r.protocols === 'all') return true;
  if (typeof flow.protocol !== 'string' || !PROTOCOLS.includes(flow.protocol) || flow.port === undefined) return false;
  return r.protocols.some((m) => resolveClusterPort(m, destination).some((x) => x.protocol === flow.protocol && flow.port! >= x.from && flow.port! <= x.to));
}

/** A protocol match as (protocol, port range)s: a named port is each container port of that
 * name on the destination pod, with its own protocol; nothing when there is none. */
export function resolveClusterPort(m: ClusterPort, destination: PolicyPod | undefined): { protocol: Protocol; from: number; to: number }[] {
  if (!('named' in m)) return [m];
  return (destination?.ports ?? []).filter((c) => c.name === m.named).map((c) => ({ protocol: c.protocol, from: c.port, to: c.port }));
}
