import type { ClusterPolicyView } from './cluster-policy.js';

// What the policy layer reads of the cluster, as plain data: NetworkPolicy objects as the API
// serves them (networking.k8s.io/v1, the fields knit reads), and the few fields of Pods,
// Namespaces and Nodes that decide a verdict. The daemon fills these from its informers or
// from the config's literal lists (docs/network-policy.md).

/** metav1.LabelSelector. An empty selector ({}) selects everything. */
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
}

export interface NetworkPolicyPort {
  /** Default TCP (the API defaults it). */
  protocol?: string;
  /** A number, or the name of a container port of the destination pod. Absent: every port. */
  port?: number | string;
  /** With a numeric port: the range port..endPort, inclusive. */
  endPort?: number;
}

export interface NetworkPolicyPeer {
  podSelector?: LabelSelector;
  namespaceSelector?: LabelSelector;
  ipBlock?: { cidr: string; except?: string[] };
}

export interface NetworkPolicyIngressRule {
  from?: NetworkPolicyPeer[];
  ports?: NetworkPolicyPort[];
}

export interface NetworkPolicyEgressRule {
  to?: NetworkPolicyPeer[];
  ports?: NetworkPolicyPort[];
}

/** networking.k8s.io/v1 NetworkPolicy, the fields policy reads. */
export interface NetworkPolicy {
  metadata: { name: string; namespace?: string; uid?: string; resourceVersion?: string; generation?: number };
  spec: {
    podSelector?: LabelSelector;
    policyTypes?: string[];
    ingress?: NetworkPolicyIngressRule[];
    egress?: NetworkPolicyEgressRule[];
  };
}

export type Protocol = 'TCP' | 'UDP' | 'SCTP';
export const PROTOCOLS: readonly Protocol[] = ['TCP', 'UDP', 'SCTP'];
/** IANA protocol numbers, as nftables' meta l4proto compares them. */
export const PROTOCOL_NUMBER: Record<Protocol, number> = { TCP: 6, UDP: 17, SCTP: 132 };

export interface ContainerPort {
  name: string;
  port: number;
  protocol: Protocol;
}

/** A pod as policy sees it. hostNetwork pods are their node's addresses: never a pod peer. */
export interface PolicyPod {
  namespace: string;
  name: string;
  labels: Record<string, string>;
  /** status.podIPs (or, for a pod of this node, the addresses knit gave it). */
  ips: string[];
  node?: string;
  hostNetwork?: boolean;
  /** Only the named container ports: named ports resolve against them. */
  ports?: ContainerPort[];
}

export interface PolicyNamespace {
  name: string;
  labels: Record<string, string>;
}

/** The label every namespace carries since Kubernetes 1.21, immutable, its name. */
export const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';

/** Everything a verdict depends on. */
export interface PolicyView {
  policies: NetworkPolicy[];
  namespaces: PolicyNamespace[];
  pods: PolicyPod[];
  /** Node name → its addresses: traffic between a pod and its own node always passes. */
  nodes: Record<string, string[]>;
}

export type Direction = 'ingress' | 'egress';

/** One object of the view that came, changed or (without it) went, by key ("namespace/name"
 * for pods and policies); a ClusterNetworkPolicy or Node changed ('tiers': the next pass reads
 * their lists and compares them with its last); or the view as a whole is new (read it again). */
export type SourceChange =
  | { kind: 'pod'; key: string; pod?: PolicyPod }
  | { kind: 'namespace'; name: string; namespace?: PolicyNamespace }
  | { kind: 'policy'; key: string; policy?: NetworkPolicy }
  | { kind: 'tiers' }
  | { kind: 'all' };

/** Where the cluster's policies, namespaces and pods come from: the config's literal lists, or
 * the API's informers (src/daemon/kube-policy.ts). */
export interface PolicySource {
  readonly description: string;
  start(): void;
  stop(): Promise<void>;
  /** Each change once the view has been read whole; before that, 'all' when it first is. */
  onChange(fn: (change: SourceChange) => void): void;
  /** Whether the view was read whole at least once: before that it says nothing, and knit
   * changes nothing it holds (a restart with the API down keeps its rules). */
  synced(): boolean;
  state(): { state: string; detail: string };
  view(): Pick<PolicyView, 'policies' | 'namespaces' | 'pods'> & ClusterPolicyView;
  /** A pod's labels and named ports for its admit: the view's, else a bounded look-up of the
   * pod itself; 'unknown' when nothing answers (knit then fails closed). */
  pod(namespace: string, name: string): Promise<PolicyPod | 'unknown'>;
  waitSynced?(timeoutMs: number): Promise<void>;
}
