// The Node list from the Kubernetes API: src/kube's Informer (list, watch from its
// resourceVersion with bookmarks, relist on 410 Gone, reconnect with backoff, a resync), read as
// ClusterNodes. Imported lazily by src/daemon/cluster.ts, only when the config names no literal
// node list, so a knit without a cluster network never loads the API client. RBAC: nodes get,
// list, watch (deploy/rbac.yaml).
import type { Logger } from 'pino';
import type { ClusterSettings } from '../config/index.js';
import type { ClusterNode, NodeSource, NodeSourceState } from '../cluster/types.js';
import type { Informer, KubeClient, Node } from '../kube/index.js';
import { tryParseCidr, tryParseIp } from '../ipam/ip.js';

/** The fields knit reads of a Node; a podCIDR or an InternalIP that does not parse is left out
 * (the API server does not check every address a kubelet or a cloud provider reports). */
export function clusterNodeOf(n: Node): ClusterNode {
  return {
    name: n.metadata.name,
    podCIDRs: (n.spec?.podCIDRs ?? (n.spec?.podCIDR ? [n.spec.podCIDR] : [])).filter((c) => tryParseCidr(c)),
    internalIPs: (n.status?.addresses ?? []).filter((a) => a.type === 'InternalIP' && tryParseIp(a.address)).map((a) => a.address),
    ...(n.metadata.creationTimestamp && { createdAt: n.metadata.creationTimestamp }),
  };
}

/** clusterNodeOf, once per version of a Node (the informer hands out the same object until it changes). */
const viewOf = new WeakMap<Node, ClusterNode>();
function clusterNodeCached(n: Node): ClusterNode {
  let view = viewOf.get(n);
  if (!view) viewOf.set(n, (view = clusterNodeOf(n)));
  return view;
}

/** What the informer keeps of a Node: what clusterNodeOf reads and what the cache needs. A
 * real Node carries its images, conditions and capacity (kilobytes each); 1,000 of them held
 * whole would be most of the daemon's heap. */
export function nodeKept(n: Node): Node {
  const { name, uid, resourceVersion, creationTimestamp } = n.metadata;
  return {
    metadata: { name, uid, resourceVersion, ...(creationTimestamp && { creationTimestamp }) },
    spec: { podCIDR: n.spec?.podCIDR, podCIDRs: n.spec?.podCIDRs },
    status: { addresses: n.status?.addresses },
  };
}

export class KubeNodes implements NodeSource {
  private readonly listeners: (() => void)[] = [];
  private detail = 'listing nodes';

  private constructor(
    readonly description: string,
    private readonly client: KubeClient,
    private readonly informer: Informer<Node>,
    private readonly log: Logger,
  ) {
    informer.onChange((kind, obj, old) => {
      // A Node changes often (status heartbeats, conditions): only its podCIDRs and InternalIPs matter here.
      if (kind === 'update' && old && JSON.stringify(clusterNodeCached(obj)) === JSON.stringify(clusterNodeCached(old))) return;
      this.emit();
    });
    informer.onState((state, detail) => {
      this.detail = detail;
      if (state === 'unreachable') log.warn({ source: description, detail }, 'Kubernetes API unreachable; keeping the last node list');
      else log.info({ source: description, state, detail }, 'node list');
      this.emit();
    });
  }

  static async open(cluster: ClusterSettings, log: Logger): Promise<KubeNodes> {
    // Loaded here, on demand, as every user of src/kube does (test/unit/dra-lazy.test.ts).
    const { Informer, KubeClient, loadKubeAccess } = await import('../kube/index.js');
    const access = loadKubeAccess({ ...(cluster.kubeconfig && { kubeconfig: cluster.kubeconfig }) });
    const client = new KubeClient(access, { userAgent: 'knit/cluster-network' });
    // No informer resync: the controller reconciles every minute on its own (src/daemon/cluster.ts).
    const informer = new Informer<Node>(client, '/api/v1/nodes', { transform: nodeKept });
    return new KubeNodes(access.source, client, informer, log);
  }

  private emit(): void {
    for (const fn of this.listeners) fn();
  }

  start(): void {
    this.informer.start();
  }

  async stop(): Promise<void> {
    await this.informer.stop();
    this.client.close();
  }

  nodes(): ClusterNode[] {
    return this.informer.list().map(clusterNodeCached);
  }

  onChange(fn: () => void): void {
    this.listeners.push(fn);
  }

  state(): { state: NodeSourceState; detail: string } {
    return { state: this.informer.state, detail: this.detail };
  }

  async waitSynced(timeoutMs: number): Promise<void> {
    const timeout = AbortSignal.timeout(timeoutMs);
    await this.informer.waitSynced(timeout).catch(() => this.log.warn({ source: this.description, timeoutMs }, 'no node list yet; serving, node-subnet networks not ready until it comes'));
  }
}
