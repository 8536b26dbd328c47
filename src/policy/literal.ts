// The policy view from the config (networkPolicy.literal): namespaces, pods and policies (and
// ClusterNetworkPolicies and nodes) given as they are, for clusters tried without the API and
// for the tests. Always synced; a config reload replaces it. A pod the list does not name is a pod without labels.
import type { NetworkPolicySettings } from '../config/index.js';
import type { NetworkPolicy, PolicyPod, PolicySource, PolicyView, SourceChange } from './types.js';
import type { ClusterNetworkPolicy } from './cluster-policy.js';

type Literal = NonNullable<NetworkPolicySettings['literal']>;

export class LiteralPolicies implements PolicySource {
  readonly description = 'the config (networkPolicy.literal)';
  private current: ReturnType<PolicySource['view']>;
  private readonly listeners: ((change: SourceChange) => void)[] = [];

  /** `clusterPolicies`: networkPolicy.clusterNetworkPolicies (the lists' ClusterNetworkPolicies and nodes count). */
  constructor(literal: Literal, private readonly clusterPolicies = false) {
    this.current = viewOf(literal, clusterPolicies);
  }

  replace(literal: Literal): void {
    const before = this.current;
    this.current = viewOf(literal, this.clusterPolicies);
    // Only ClusterNetworkPolicies or nodes changed: NetworkPolicy's compiler keeps its share.
    const kind = networkPolicyPart(before) === networkPolicyPart(this.current) ? 'tiers' : 'all';
    for (const fn of this.listeners) fn({ kind });
  }

  start(): void {}
  async stop(): Promise<void> {}
  onChange(fn: (change: SourceChange) => void): void {
    this.listeners.push(fn);
  }
  synced(): boolean {
    return true;
  }
  state() {
    return { state: 'synced', detail: `${this.current.policies.length} policies from the config` };
  }
  view() {
    return this.current;
  }
  async pod(namespace: string, name: string): Promise<PolicyPod> {
    return this.current.pods.find((p) => p.namespace === namespace && p.name === name) ?? { namespace, name, labels: {}, ips: [] };
  }
}

const networkPolicyPart = (v: ReturnType<PolicySource['view']>) => JSON.stringify([v.namespaces, v.pods, v.policies]);

function viewOf(l: Literal, clusterPolicies: boolean): ReturnType<PolicySource['view']> {
  return {
    namespaces: Object.entries(l.namespaces).map(([name, ns]) => ({ name, labels: ns.labels })),
    pods: l.pods.map((p) => ({ ...p, ports: p.ports })),
    policies: l.policies as unknown as NetworkPolicy[],
    ...(clusterPolicies && {
      clusterNetworkPolicies: l.clusterNetworkPolicies as unknown as ClusterNetworkPolicy[],
      policyNodes: Object.entries(l.nodes).map(([name, n]) => ({ name, labels: n.labels, ips: n.ips })),
    }),
  };
}
