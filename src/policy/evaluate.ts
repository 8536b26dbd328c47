// The semantic oracle: one flow, the view, and the verdict with the policies and rules that
// decide it. It is the reference the compiler's rulesets are tested against, and what
// `knit policy explain` prints. Semantics (docs/network-policy.md): a flow passes when its
// source pod may send it (egress) and its destination pod may receive it (ingress). A pod is
// isolated in a direction when some policy of that direction selects it; an isolated pod's
// traffic in that direction passes only when a rule of one of those policies allows it
// (rules and policies are OR'd). Always allowed: a pod to or from its own node, a pod to
// itself. hostNetwork pods are their node's addresses, never pods.
import { tryParseIp } from '../ipam/ip.js';
import type { PortMatch, Policy, Rule } from './normalize.js';
import { ViewIndex, canonical } from './view-index.js';
import { PROTOCOLS, type Direction, type PolicyPod, type PolicyView, type Protocol } from './types.js';

export interface Flow {
  src: string;
  dst: string;
  /** TCP, UDP, SCTP, or another IP protocol by number (ICMP: 1), which only rules without
   * ports allow. */
  protocol: Protocol | number;
  port?: number;
}

export interface SideVerdict {
  /** "namespace/name" of the pod judged on this side; absent when that side is no pod. */
  pod?: string;
  allowed: boolean;
  /** Policies of this direction that select the pod (it is isolated when there is one). */
  selecting: string[];
  /** The rules that allow it, as "namespace/name" and the rule's index. */
  allowedBy: { policy: string; rule: number }[];
  why: string;
}

export interface Verdict {
  allowed: boolean;
  egress: SideVerdict;
  ingress: SideVerdict;
}

export function evaluate(view: PolicyView | ViewIndex, flow: Flow): Verdict {
  const ix = view instanceof ViewIndex ? view : new ViewIndex(view);
  if (!tryParseIp(flow.src) || !tryParseIp(flow.dst)) throw new Error(`flow: ${JSON.stringify(flow.src)} or ${JSON.stringify(flow.dst)} is not an IP address`);
  const src = ix.podAt(flow.src);
  const dst = ix.podAt(flow.dst);
  const egress = side(ix, 'egress', src, dst, flow);
  const ingress = side(ix, 'ingress', dst, src, flow);
  return { allowed: egress.allowed && ingress.allowed, egress, ingress };
}

/** One direction's verdict by NetworkPolicy alone (the tiered oracle, cluster-policy-evaluate.ts,
 * takes it as the NetworkPolicy tier's). */
export function side(ix: ViewIndex, d: Direction, pod: PolicyPod | undefined, other: PolicyPod | undefined, flow: Flow): SideVerdict {
  if (!pod) return { allowed: true, selecting: [], allowedBy: [], why: `no pod ${d === 'egress' ? 'sends' : 'receives'} it here (${d === 'egress' ? flow.src : flow.dst})` };
  const name = `${pod.namespace}/${pod.name}`;
  const otherIp = d === 'egress' ? flow.dst : flow.src;
  const selecting = ix.policies.filter((p) => p[d] && ix.selects(p, pod));
  const base = { pod: name, selecting: selecting.map((p) => p.key) };
  if (other === pod) return { ...base, allowed: true, allowedBy: [], why: 'a pod may always reach itself' };
  if (pod.node && ix.nodeAt(otherIp) === pod.node) return { ...base, allowed: true, allowedBy: [], why: `traffic ${d === 'egress' ? 'to' : 'from'} the pod's own node is always allowed` };
  if (!selecting.length) return { ...base, allowed: true, allowedBy: [], why: `no policy selects ${name} for ${d}` };
  const allowedBy: SideVerdict['allowedBy'] = [];
  for (const p of selecting) for (const r of p[d]!) if (ruleAllows(ix, p, r, otherIp, other, d === 'ingress' ? pod : other, flow)) allowedBy.push({ policy: p.key, rule: r.index });
  return {
    ...base,
    allowed: allowedBy.length > 0,
    allowedBy,
    why: allowedBy.length
      ? `allowed by ${allowedBy.map((a) => `${a.policy} ${d}[${a.rule}]`).join(', ')}`
      : `${name} is isolated for ${d} by ${selecting.map((p) => p.key).join(', ')}, and no rule of ${selecting.length > 1 ? 'them' : 'it'} allows this`,
  };
}

/** Whether rule r of p allows the flow with `peerIp`/`peer` at the other end; named ports
 * resolve against `destination` (the selected pod for ingress, the peer for egress). */
export function ruleAllows(ix: ViewIndex, p: Policy, r: Rule, peerIp: string, peer: PolicyPod | undefined, destination: PolicyPod | undefined, flow: Flow): boolean {
  return peerMatches(ix, p, r, peerIp, peer) && portMatches(r, destination, flow);
}

function peerMatches(ix: ViewIndex, p: Policy, r: Rule, ip: string, pod: PolicyPod | undefined): boolean {
  if (r.peers === 'all') return true;
  const addr = tryParseIp(ip)!;
  return r.peers.some((peer) => {
    if (peer.kind === 'block') return peer.family === addr.family && peer.ranges.some(([lo, hi]) => addr.value >= lo && addr.value <= hi);
    return !!pod && ix.peerHas(p, peer, pod);
  });
}

function portMatches(r: Rule, destination: PolicyPod | undefined, flow: Flow): boolean {
  if (r.ports === 'all') return true;
  if (typeof flow.protocol !== 'string' || !PROTOCOLS.includes(flow.protocol) || flow.port === undefined) return false;
  return r.ports.some((m) => resolvePort(m, destination).some(([lo, hi]) => m.protocol === flow.protocol && flow.port! >= lo && flow.port! <= hi));
}

/** A port match as port ranges: a named port is its number on the destination pod (a
 * container port of that name and protocol), or nothing. */
export function resolvePort(m: PortMatch, destination: PolicyPod | undefined): [number, number][] {
  if (!('named' in m)) return [[m.from, m.to]];
  const cp = destination?.ports?.find((c) => c.name === m.named && c.protocol === m.protocol);
  return cp ? [[cp.port, cp.port]] : [];
}

export { canonical };
