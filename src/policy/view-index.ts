// The view, indexed once for the questions the evaluator and the compiler ask: a policy's
// selected pods, a peer's pods, a pod by address, a namespace's labels, a node's addresses.
import { tryParseIp } from '../ipam/ip.js';
import { normalizePolicy, type Peer, type Policy } from './normalize.js';
import { NAMESPACE_NAME_LABEL, type NetworkPolicy, type PolicyPod, type PolicyView } from './types.js';

export class ViewIndex {
  readonly policies: Policy[];
  private readonly nsLabels = new Map<string, Record<string, string>>();
  /** By address, made when first asked: a compile asks only for pods and labels. */
  private addrs: { podByIp: Map<string, PolicyPod>; nodeOfIp: Map<string, string> } | undefined;
  readonly pods: PolicyPod[];

  constructor(readonly view: PolicyView) {
    this.policies = view.policies.map(normalized);
    for (const ns of view.namespaces) this.nsLabels.set(ns.name, { ...ns.labels, [NAMESPACE_NAME_LABEL]: ns.name });
    this.pods = view.pods.filter(isPeerPod);
  }

  private byAddress() {
    if (this.addrs) return this.addrs;
    const podByIp = new Map<string, PolicyPod>();
    const nodeOfIp = new Map<string, string>();
    for (const pod of this.pods) for (const ip of pod.ips) podByIp.set(canonical(ip), pod);
    for (const [node, addrs] of Object.entries(this.view.nodes)) for (const a of addrs) nodeOfIp.set(canonical(a), node);
    // A hostNetwork pod's address is its node's (docs/network-policy.md).
    for (const pod of this.view.pods) if (pod.hostNetwork && pod.node) for (const ip of pod.ips) if (!nodeOfIp.has(canonical(ip))) nodeOfIp.set(canonical(ip), pod.node);
    return (this.addrs = { podByIp, nodeOfIp });
  }

  /** A namespace's labels; one the view does not list still carries its name label. */
  namespaceLabels(ns: string): Record<string, string> {
    return this.nsLabels.get(ns) ?? { [NAMESPACE_NAME_LABEL]: ns };
  }

  podAt(ip: string): PolicyPod | undefined {
    return this.byAddress().podByIp.get(canonical(ip));
  }

  nodeAt(ip: string): string | undefined {
    return this.byAddress().nodeOfIp.get(canonical(ip));
  }

  selects(p: Policy, pod: PolicyPod): boolean {
    return policySelects(p, pod);
  }

  /** Whether a pod is one of a selector peer's pods (the policy's namespace for 'own'). */
  peerHas(p: Policy, peer: Extract<Peer, { kind: 'pods' }>, pod: PolicyPod): boolean {
    const nsOk = peer.namespaces === 'own' ? pod.namespace === p.namespace : peer.namespaces.matches(this.namespaceLabels(pod.namespace));
    return nsOk && peer.pods.matches(pod.labels);
  }
}

/** Whether a policy selects a pod (its own namespace, its podSelector). */
export const policySelects = (p: Policy, pod: PolicyPod): boolean => pod.namespace === p.namespace && p.selector.matches(pod.labels);

/** normalizePolicy, once per policy object (a source hands out the same object until it changes). */
const seen = new WeakMap<NetworkPolicy, Policy>();
export function normalized(np: NetworkPolicy): Policy {
  let p = seen.get(np);
  if (!p) seen.set(np, (p = normalizePolicy(np)));
  return p;
}

/** Pods that count as pods for policy: with an address, not on the host network, not done
 * (a finished pod's address may already be another's). */
export function isPeerPod(p: PolicyPod): boolean {
  return !p.hostNetwork && p.ips.length > 0;
}

export function canonical(ip: string): string {
  const parsed = tryParseIp(ip);
  return parsed ? `${parsed.family}:${parsed.value}` : ip;
}
