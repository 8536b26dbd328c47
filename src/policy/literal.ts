// The policy view from the config (networkPolicy.literal): namespaces, pods and policies given
// as they are, for clusters tried without the API and for the tests. Always synced; a config
// reload replaces it. A pod the list does not name is a pod without labels.
import type { NetworkPolicySettings } from '../config/index.js';
import type { NetworkPolicy, PolicyPod, PolicySource, PolicyView, SourceChange } from './types.js';

type Literal = NonNullable<NetworkPolicySettings['literal']>;

export class LiteralPolicies implements PolicySource {
  readonly description = 'the config (networkPolicy.literal)';
  private current: Pick<PolicyView, 'policies' | 'namespaces' | 'pods'>;
  private readonly listeners: ((change: SourceChange) => void)[] = [];

  constructor(literal: Literal) {
    this.current = viewOf(literal);
  }

  replace(literal: Literal): void {
    this.current = viewOf(literal);
    for (const fn of this.listeners) fn({ kind: 'all' });
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

function viewOf(l: Literal): Pick<PolicyView, 'policies' | 'namespaces' | 'pods'> {
  return {
    namespaces: Object.entries(l.namespaces).map(([name, ns]) => ({ name, labels: ns.labels })),
    pods: l.pods.map((p) => ({ ...p, ports: p.ports })),
    policies: l.policies as unknown as NetworkPolicy[],
  };
}
