// The policy view from the Kubernetes API: informers on Pods (every node's: peers are selected
// cluster-wide), Namespaces and NetworkPolicies, each trimmed to what policy reads as it is
// cached (a Pod is kilobytes; knit keeps its name, labels, addresses, node, hostNetwork and
// named container ports). Loaded only when networkPolicy is on without a literal list. RBAC:
// get, list, watch on pods, namespaces and networking.k8s.io networkpolicies (deploy/rbac.yaml).
// With networkPolicy.clusterNetworkPolicies on, ClusterNetworkPolicies and Nodes too
// (kube-cluster-policy.ts, loaded only then).
import type { Logger } from 'pino';
import type { Informer, KubeClient, KubeObject } from '../kube/index.js';
import type { ContainerPort, NetworkPolicy, PolicyNamespace, PolicyPod, PolicySource, Protocol, SourceChange } from '../policy/types.js';
import type { ClusterPolicyInformers, WatchedList } from './kube-cluster-policy.js';

interface Pod extends KubeObject {
  spec?: { nodeName?: string; hostNetwork?: boolean; containers?: Container[]; initContainers?: Container[] };
  status?: { phase?: string; podIPs?: { ip: string }[]; podIP?: string };
}
interface Container {
  ports?: { name?: string; containerPort: number; protocol?: string }[];
}
type Namespace = KubeObject;
type Policy = KubeObject & NetworkPolicy;

/** A live look-up of one pod at its admit, when the cache does not have it yet. */
const LOOKUP_MS = 2_000;

/** What the informer keeps of a Pod: what podOf reads, and the cache's keys. */
export function podKept(p: Pod): Pod {
  const { name, namespace, uid, resourceVersion, labels } = p.metadata;
  const named = (cs: Container[] = []) => cs.map((c) => ({ ports: (c.ports ?? []).filter((x) => x.name) })).filter((c) => c.ports.length);
  const containers = [...named(p.spec?.containers), ...named(p.spec?.initContainers)];
  return {
    metadata: { name, namespace, uid, resourceVersion, ...(labels && { labels }) },
    spec: { nodeName: p.spec?.nodeName, ...(p.spec?.hostNetwork && { hostNetwork: true }), ...(containers.length && { containers }) },
    status: { phase: p.status?.phase, podIPs: p.status?.podIPs ?? (p.status?.podIP ? [{ ip: p.status.podIP }] : []) },
  };
}

export function podOf(p: Pod): PolicyPod {
  const ports: ContainerPort[] = (p.spec?.containers ?? []).flatMap((c) => (c.ports ?? []).map((x) => ({ name: x.name!, port: x.containerPort, protocol: (x.protocol ?? 'TCP') as Protocol })));
  return {
    namespace: p.metadata.namespace ?? '', name: p.metadata.name, labels: p.metadata.labels ?? {},
    // A pod that is done may have given its address to another.
    ips: p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed' ? [] : (p.status?.podIPs ?? []).map((x) => x.ip),
    ...(p.spec?.nodeName && { node: p.spec.nodeName }),
    ...(p.spec?.hostNetwork && { hostNetwork: true }),
    ...(ports.length && { ports }),
  };
}

const keyOf = (o: KubeObject) => `${o.metadata.namespace}/${o.metadata.name}`;
const nsView = (n: Namespace): PolicyNamespace => ({ name: n.metadata.name, labels: n.metadata.labels ?? {} });

const nsKept = (n: Namespace): Namespace => {
  const { name, uid, resourceVersion, labels } = n.metadata;
  return { metadata: { name, uid, resourceVersion, ...(labels && { labels }) } };
};
const policyKept = (p: Policy): Policy => {
  const { name, namespace, uid, resourceVersion, generation } = p.metadata;
  return { metadata: { name, namespace, uid, resourceVersion, generation }, spec: p.spec };
};

export class KubePolicies implements PolicySource {
  private readonly listeners: ((change: SourceChange) => void)[] = [];
  private readonly podView = new WeakMap<Pod, PolicyPod>();
  private ever = false;
  private announced = false;

  private constructor(
    readonly description: string,
    private readonly client: KubeClient,
    private readonly pods: Informer<Pod>,
    private readonly namespaces: Informer<Namespace>,
    private readonly policies: Informer<Policy>,
    private readonly log: Logger,
    private readonly tiers?: ClusterPolicyInformers,
  ) {
    // A Pod changes often (status, conditions): only a change of what policy reads counts.
    pods.onChange((kind, obj, old) => {
      if (kind === 'update' && old && JSON.stringify(this.viewOf(obj)) === JSON.stringify(this.viewOf(old))) return;
      this.emit({ kind: 'pod', key: keyOf(obj), ...(kind !== 'delete' && { pod: this.viewOf(obj) }) });
    });
    namespaces.onChange((kind, obj) => this.emit({ kind: 'namespace', name: obj.metadata.name, ...(kind !== 'delete' && { namespace: nsView(obj) }) }));
    policies.onChange((kind, obj) => this.emit({ kind: 'policy', key: keyOf(obj), ...(kind !== 'delete' && { policy: obj }) }));
    // Changes count once the view was read whole; a relist after the API comes back is
    // reported object by object, as a watch would have (src/kube/informer.ts).
    // A ClusterNetworkPolicy or Node change: a pass, whose tier part compares the lists with
    // its last (src/policy/cluster-policy-incremental.ts); NetworkPolicy's compiler stays.
    tiers?.onChange(() => this.emit({ kind: 'tiers' }));
    for (const inf of this.all()) {
      inf.onState((state, detail) => {
        if (state === 'unreachable') log.warn({ source: description, detail }, 'Kubernetes API unreachable; NetworkPolicy keeps its last view');
        if (state === 'synced' && !inf.served) log.warn({ source: description, detail }, 'a kind policy reads is not served by the Kubernetes API');
        if (!this.announced && this.synced()) {
          this.announced = true;
          this.emit({ kind: 'all' });
        }
      });
    }
  }

  /** podOf, once per version of a Pod (the informer hands out the same object until it changes). */
  private viewOf(p: Pod): PolicyPod {
    let v = this.podView.get(p);
    if (!v) this.podView.set(p, (v = podOf(p)));
    return v;
  }

  /** Every informer by the name its state is reported under. */
  private named(): Record<string, WatchedList> {
    return { pods: this.pods, namespaces: this.namespaces, networkpolicies: this.policies, ...this.tiers?.informers };
  }

  private all(): WatchedList[] {
    return Object.values(this.named());
  }

  static async open(kubeconfig: string | undefined, log: Logger, clusterPolicies = false): Promise<KubePolicies> {
    const { Informer, KubeClient, loadKubeAccess } = await import('../kube/index.js');
    const access = loadKubeAccess({ ...(kubeconfig && { kubeconfig }) });
    // A connection per watch (pods, namespaces, networkpolicies; with ClusterNetworkPolicy
    // clusternetworkpolicies, nodes and the CRD too) and one for the pods looked up at an admit.
    const client = new KubeClient(access, { userAgent: 'knit/network-policy', connections: (clusterPolicies ? 6 : 3) + 1 });
    return new KubePolicies(
      access.source,
      client,
      new Informer<Pod>(client, '/api/v1/pods', { transform: podKept }),
      new Informer<Namespace>(client, '/api/v1/namespaces', { transform: nsKept }),
      new Informer<Policy>(client, '/apis/networking.k8s.io/v1/networkpolicies', { transform: policyKept }),
      log,
      clusterPolicies ? await (await import('./kube-cluster-policy.js')).clusterPolicyInformers(client, log) : undefined,
    );
  }

  private emit(change: SourceChange): void {
    if (!this.ever) return;
    for (const fn of this.listeners) fn(change);
  }

  start(): void {
    for (const inf of this.all()) inf.start();
    this.tiers?.crdWatch.start();
  }

  async stop(): Promise<void> {
    await Promise.all([...this.all(), ...(this.tiers ? [this.tiers.crdWatch] : [])].map((i) => i.stop()));
    this.client.close();
  }

  onChange(fn: (change: SourceChange) => void): void {
    this.listeners.push(fn);
  }

  synced(): boolean {
    if (!this.ever) this.ever = this.all().every((i) => i.state === 'synced');
    return this.ever;
  }

  state() {
    const bad = Object.entries(this.named()).find(([, i]) => i.state !== 'synced');
    if (bad) return { state: bad[1].state, detail: `${bad[0]}: ${bad[1].detail}` };
    const absent = Object.entries(this.named()).filter(([, i]) => !i.served).map(([name, i]) => `; ${name}: ${i.detail}`);
    return { state: 'synced', detail: `${this.policies.list().length} policies, ${this.pods.list().length} pods${absent.join('')}` };
  }

  view() {
    return {
      policies: this.policies.list() as NetworkPolicy[],
      namespaces: this.namespaces.list().map(nsView),
      pods: this.pods.list().map((p) => this.viewOf(p)),
      ...this.tiers?.view(),
    };
  }

  async pod(namespace: string, name: string): Promise<PolicyPod | 'unknown'> {
    const cached = this.pods.get(`${namespace}/${name}`);
    if (cached) return podOf(cached);
    try {
      const live = await this.client.get<Pod>(`/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(name)}`, { signal: AbortSignal.timeout(LOOKUP_MS) });
      return podOf(podKept(live));
    } catch (err) {
      this.log.warn({ pod: `${namespace}/${name}`, err: (err as Error).message }, 'NetworkPolicy: cannot read the pod');
      return 'unknown';
    }
  }

  async waitSynced(timeoutMs: number): Promise<void> {
    const signal = AbortSignal.timeout(timeoutMs);
    await Promise.all(this.all().map((i) => i.waitSynced(signal))).catch(() => this.log.warn({ source: this.description, timeoutMs }, 'no NetworkPolicy view yet; the table stays as it is until there is one'));
  }
}
