// The cluster as knit sees it: the few fields of each Node it reads, and where they come from.
// A NodeSource is either the literal map in the config (src/cluster/static-nodes.ts) or the
// Kubernetes API's Node list and watch (src/daemon/kube-nodes.ts); the reconciler cannot tell.
import type { ClusterPeerStatus } from '../base/types.js';

/** One node: Node.metadata.name, .spec.podCIDRs, the InternalIP entries of .status.addresses.
 * Every source hands out only CIDRs and addresses that parse (the config's schema, or
 * clusterNodeOf for the API's), so planning tells a family by its text alone. */
export interface ClusterNode {
  name: string;
  podCIDRs: string[];
  internalIPs: string[];
  /** Node.metadata.creationTimestamp (RFC 3339, to the second): of two Nodes whose blocks
   * overlap, the one created first is routed (src/cluster/refusals.ts). The literal map has none. */
  createdAt?: string;
}

export type NodeSourceState = 'starting' | 'synced' | 'unreachable';

export interface NodeSource {
  /** What it reads from, for messages ("config cluster.nodes", "in-cluster", ...). */
  readonly description: string;
  start(): void;
  stop(): Promise<void>;
  /** The last full view; kept while the source is unreachable. */
  nodes(): ClusterNode[];
  /** Called after any change to nodes() and on every state change. */
  onChange(fn: () => void): void;
  state(): { state: NodeSourceState; detail: string };
  /** Resolves at the first full list, or after timeoutMs, whichever comes first. */
  waitSynced?(timeoutMs: number): Promise<void>;
}

/** How one peer node is reached, as NodeStatus and `knit check --node` show it. */
export type PeerStatus = ClusterPeerStatus;

export interface ClusterNetworkStatus {
  network: string;
  crossNode?: 'routes' | 'vxlan' | 'none';
  /** The node's own subnets of this network. */
  subnets: string[];
  peers: PeerStatus[];
}
