// ClusterNetworkPolicies over the NetworkPolicy model (policy-model.ts: namespaces x, y, z
// labelled ns=<name>, pods a, b, c labelled pod=<name>, nodes n1 and n2), and the model's nodes
// as peers: n1 labelled zone=one, n2 zone=two, both kubernetes.io/os=linux.
import type { ClusterNetworkPolicy, ClusterNetworkPolicyRule, PolicyNode } from '../../src/policy/cluster-policy.js';
import { NODE_ADDRS } from './policy-model.js';

export const MODEL_NODES: PolicyNode[] = [
  { name: 'n1', labels: { zone: 'one', 'kubernetes.io/os': 'linux' }, ips: NODE_ADDRS.n1! },
  { name: 'n2', labels: { zone: 'two', 'kubernetes.io/os': 'linux' }, ips: NODE_ADDRS.n2! },
];

type Spec = Partial<ClusterNetworkPolicy['spec']>;

/** A ClusterNetworkPolicy; the subject defaults to every namespace. */
export const cnp = (name: string, tier: 'Admin' | 'Baseline', priority: number, spec: Spec): ClusterNetworkPolicy => ({
  metadata: { name },
  spec: { tier, priority, subject: { namespaces: {} }, ...spec },
});

export const nsSel = (ns: string) => ({ matchLabels: { ns } });
export const podSel = (pod: string) => ({ matchLabels: { pod } });
/** Peers: pods of namespace `ns` (every pod without `pod`). */
export const fromNs = (ns: string) => ({ namespaces: nsSel(ns) });
export const fromPod = (ns: string | undefined, pod: string) => ({ pods: { namespaceSelector: ns ? nsSel(ns) : {}, podSelector: podSel(pod) } });
export const rule = (action: string, peers: ClusterNetworkPolicyRule['from'], extra: Partial<ClusterNetworkPolicyRule> = {}): ClusterNetworkPolicyRule => ({ action, from: peers, to: peers, ...extra });
