// What ClusterNetworkPolicy adds to the API's policy view (src/daemon/kube-policy.ts), with
// networkPolicy.clusterNetworkPolicies on: informers on every ClusterNetworkPolicy
// (policy.networking.k8s.io/v1beta1, the CRD users install from sigs.k8s.io/network-policy-api) and every Node
// (a nodes peer selects nodes by their labels and matches their addresses), each trimmed to
// what policy reads as it is cached. A Node informer of its own rather than the cluster
// network's (src/daemon/kube-nodes.ts): that one keeps no labels, and runs only when the
// cluster's node list comes from the API. RBAC: get, list, watch on clusternetworkpolicies
// (deploy/rbac.yaml's knit-network-policy) and nodes (its knit-nodes).
import type { Informer, KubeClient, KubeObject, Node } from '../kube/index.js';
import type { Logger } from 'pino';
import { tryParseIp } from '../ipam/ip.js';
import type { ClusterNetworkPolicy, ClusterPolicyView, PolicyNode } from '../policy/cluster-policy.js';

export const CLUSTER_NETWORK_POLICIES = '/apis/policy.networking.k8s.io/v1beta1/clusternetworkpolicies';

type Cnp = KubeObject & ClusterNetworkPolicy;

const CRD_NAME = 'clusternetworkpolicies.policy.networking.k8s.io';
const CRDS = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';
/** Every 2 s for 30 s: the API server takes the new schema into use some moment after the CRD
 * changes, and a list or watch before that is still pruned by the old one. A list of the few
 * ClusterNetworkPolicies a cluster has is cheap; a relist that finds nothing new changes nothing. */
const RELIST_AFTER_CRD_MS = Array.from({ length: 15 }, (_, i) => 1_000 + 2_000 * i);
const crdKept = (c: KubeObject): KubeObject => {
  const { name, uid, resourceVersion, generation } = c.metadata;
  return { metadata: { name, uid, resourceVersion, generation } };
};

/** What an API server without the CRD means, and what to do (docs/network-policy.md). */
export const CRD_MISSING = 'the ClusterNetworkPolicy CRD (clusternetworkpolicies.policy.networking.k8s.io, v1beta1) is not installed; '
  + 'until it is, knit enforces NetworkPolicy alone. Install it from sigs.k8s.io/network-policy-api v0.3.0, or set networkPolicy.clusterNetworkPolicies false';

export const cnpKept = (p: Cnp): Cnp => {
  const { name, uid, resourceVersion, generation } = p.metadata;
  return { metadata: { name, uid, resourceVersion, generation }, spec: p.spec };
};

/** A Node as a peer: its labels and every address of its status that is an IP. */
export function policyNodeOf(n: Node): PolicyNode {
  return { name: n.metadata.name, labels: n.metadata.labels ?? {}, ips: (n.status?.addresses ?? []).map((a) => a.address).filter((a) => tryParseIp(a)) };
}

/** What the informer keeps of a Node (a real one carries kilobytes of images and conditions). */
export function policyNodeKept(n: Node): Node {
  const { name, uid, resourceVersion, labels } = n.metadata;
  return { metadata: { name, uid, resourceVersion, ...(labels && { labels }) }, status: { addresses: (n.status?.addresses ?? []).filter((a) => tryParseIp(a.address)) } };
}

/** What the policy source does with each of its informers, whatever it lists. */
export type WatchedList = Pick<Informer<KubeObject>, 'state' | 'detail' | 'served' | 'start' | 'stop' | 'waitSynced' | 'onState'>;

export interface ClusterPolicyInformers {
  /** By the names the source's state reports them under. */
  informers: Record<string, WatchedList>;
  /** Started and stopped with them, but not part of the view: the view is whole without it. */
  crdWatch: { start(): void; stop(): Promise<void> };
  /** A change policy reads: any ClusterNetworkPolicy change, a Node's labels or addresses. */
  onChange(fn: () => void): void;
  view(): Required<ClusterPolicyView>;
}

export async function clusterPolicyInformers(client: KubeClient, log: Logger): Promise<ClusterPolicyInformers> {
  const { Informer } = await import('../kube/index.js');
  const cnps = new Informer<Cnp>(client, CLUSTER_NETWORK_POLICIES, { transform: cnpKept, notServed: CRD_MISSING });
  // The CRD itself: when it comes, or its schema changes (the standard channel's replaced by the
  // experimental one), the ClusterNetworkPolicies are listed again. A watch begun before the
  // change goes on sending objects as the old schema prunes them (an experimental field
  // dropped), and an object sent that way stays so until it changes.
  const crd = new Informer<KubeObject>(client, CRDS, { fieldSelector: `metadata.name=${CRD_NAME}`, transform: crdKept });
  const timers = new Set<NodeJS.Timeout>();
  let listed = false; // the first list's add is the CRD as knit starts, not a change
  crd.onState((state) => (listed ||= state === 'synced'));
  crd.onChange((kind, obj, old) => {
    if (!listed) return;
    if (kind === 'update' && old && obj.metadata.generation === old.metadata.generation) return;
    log.info({ crd: CRD_NAME, kind, generation: obj.metadata.generation }, 'the ClusterNetworkPolicy CRD changed: listing ClusterNetworkPolicies again for 30 s');
    for (const ms of RELIST_AFTER_CRD_MS) {
      const timer = setTimeout(() => {
        timers.delete(timer);
        void cnps.relistNow();
      }, ms);
      timer.unref();
      timers.add(timer);
    }
  });
  const crdWatch = {
    start: () => crd.start(),
    async stop() {
      for (const t of timers) clearTimeout(t);
      timers.clear();
      await crd.stop();
    },
  };
  const nodes = new Informer<Node>(client, '/api/v1/nodes', { transform: policyNodeKept });
  const nodeView = new WeakMap<Node, PolicyNode>();
  const nodeOf = (n: Node) => {
    let v = nodeView.get(n);
    if (!v) nodeView.set(n, (v = policyNodeOf(n)));
    return v;
  };
  return {
    informers: { clusternetworkpolicies: cnps, nodes },
    crdWatch,
    onChange(fn) {
      cnps.onChange(() => fn());
      // Status heartbeats change neither labels nor addresses.
      nodes.onChange((kind, obj, old) => {
        if (kind === 'update' && old && JSON.stringify(nodeOf(obj)) === JSON.stringify(nodeOf(old))) return;
        fn();
      });
    },
    view: () => ({ clusterNetworkPolicies: cnps.list() as ClusterNetworkPolicy[], policyNodes: nodes.list().map(nodeOf) }),
  };
}
