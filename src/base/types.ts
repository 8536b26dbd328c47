// The domain the API speaks to core in. src/api maps protobuf messages (knit.v1 and kni) onto
// these and back; core and the runtime strategies never see protobuf.

import type { RuntimeKind } from './runtime-kinds.js';
import type { Handoff } from './handoff.js';
import type { DnsConfig } from './dns.js';
export type { RuntimeKind } from './runtime-kinds.js';
export type { DnsConfig } from './dns.js';

export interface PortMapping {
  protocol: 'tcp' | 'udp' | 'sctp';
  containerPort: number;
  hostPort: number;
  hostIp?: string;
}


export interface InterfaceRequest {
  /** Name inside the sandbox, e.g. eth0. */
  name: string;
  /** Network name from the config; default: the config's default network. */
  network?: string;
  mac?: string;
  mtu?: number;
  /** Static addresses (CIDR) instead of IPAM. */
  ips?: string[];
  /** Device reference (SR-IOV / DRA), for later runtimes. */
  device?: { bdf?: string; netdev?: string; pool?: string; name?: string; parameters?: unknown };
  /** Strategy options, e.g. {"mode":"tcfilter"} for kata, {"binding":"masquerade"} for kubevirt. */
  binding?: Record<string, string>;
  /** Rate limits (bits per second, bursts in bits); see src/api/bandwidth.ts. */
  bandwidth?: Bandwidth;
  /** This interface's network gives the sandbox its default route (else the first's does). */
  defaultRoute?: boolean;
  /** A network the pod's annotation asked for, resolved by the CNI frontend; no API caller sets
   * it (docs/secondary-networks.md). */
  attachment?: NetworkAttachment;
}

/** An interface made for a network of a pod's `k8s.v1.cni.cncf.io/networks` annotation (or the
 * config's default networks), as Multus would make it. */
export interface NetworkAttachment {
  /** "namespace/name" of its NetworkAttachmentDefinition: the name network-status gives it. */
  name: string;
  /** The CNI chain the definition resolved to, exactly as run at ADD; absent: the interface is
   * on knit's own network (`network`). DEL, CHECK and crash repair run what is recorded here,
   * whatever became of the definition since. */
  chain?: AttachmentChain;
  /** `default-route`: the pod's default route goes through this interface, via these gateways
   * (one per family). */
  gateways?: string[];
}

export interface AttachmentChain {
  /** The conflist's text: the definition's config (a single plugin's as a one-plugin list), its
   * name filled in, the selection's `cni-args` merged into each plugin's `args.cni`. */
  conflist: string;
  /** CNI_ARGS as Multus passes them to a delegate. */
  args: [string, string][];
  /** runtimeConfig offered to the plugins that declare each capability (mac, ips, portMappings,
   * bandwidth, deviceID, infinibandGUID). */
  capabilityArgs: Record<string, unknown>;
  pluginDirs: string[];
  cacheDir: string;
  timeoutMs: number;
}

/** One direction is limited when its rate is set; the burst is then always filled in. */
export interface Bandwidth {
  ingress?: { rate: number; burst: number };
  egress?: { rate: number; burst: number };
}

export interface AttachRequest {
  sandboxId: string;
  podName?: string;
  podNamespace?: string;
  podUid?: string;
  netnsPath: string;
  runtime: RuntimeKind;
  interfaces: InterfaceRequest[];
  portMappings: PortMapping[];
  dns?: DnsConfig;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

export interface ResultInterface {
  name: string;
  mac?: string;
  mtu?: number;
  /** netns path for sandbox-side interfaces; absent for host-side ones. */
  sandbox?: string;
  /** veth | bridge | tap | macvtap | vf | vfio */
  kind: string;
  /** The host-side device knit made for this interface (veth host end, tap, ...). */
  hostName?: string;
  /** CNI 1.1 interface fields: vhost-user socket, and the PCI address of a VF/VFIO device. */
  socketPath?: string;
  pciId?: string;
  /** What a VMM, launcher or DRA driver needs beyond the device (src/base/handoff.ts). */
  handoff?: Handoff;
}

export interface ResultIp {
  /** CIDR */
  address: string;
  gateway?: string;
  family: 4 | 6;
  /** index into interfaces */
  interface: number;
}

export interface ResultRoute {
  dst: string;
  gw?: string;
  mtu?: number;
  priority?: number;
  table?: number;
  scope?: number;
}

export interface AttachResult {
  sandboxId: string;
  netnsPath: string;
  runtime: RuntimeKind;
  interfaces: ResultInterface[];
  ips: ResultIp[];
  routes: ResultRoute[];
  dns?: DnsConfig;
}

export type AttachmentState = 'attaching' | 'attached' | 'detaching' | 'failed';

export interface SandboxRecordView {
  request: AttachRequest;
  result?: AttachResult;
  state: AttachmentState;
  createdAt: string;
}

export interface CheckReport {
  ok: boolean;
  /** Each difference between the record and the live kernel, one sentence each. */
  differences: string[];
}

export interface NetworkStatus {
  name: string;
  mode: 'bridge' | 'routed' | 'cni';
  /** mode "cni": the chain's CNI STATUS, or why it was not asked. */
  cniStatus?: string;
  ready: boolean;
  pools: { family: 4 | 6; subnet: string; size: number; used: number; free: number }[];
  /** A network that spans the cluster: how it reaches other nodes, this node's subnets, and
   * each other node. */
  crossNode?: 'routes' | 'vxlan' | 'none';
  nodeSubnets?: string[];
  peers?: ClusterPeerStatus[];
}

/** One other node, as a cluster network reaches it. */
export interface ClusterPeerStatus {
  node: string;
  subnets: string[];
  /** The node address its routes (or VTEP entries) go through. */
  via?: string;
  /** Its routes, neighbour and FDB entries are in the kernel as planned (crossNode none: some
   * route to its block is, from a BGP speaker). */
  inPlace: boolean;
  /** Why it is not routed. */
  problem?: string;
}

/** Where this node's view of the cluster comes from. */
export interface ClusterSourceStatus {
  node: string;
  /** "config cluster.nodes", "in-cluster", "kubeconfig <path> ..." */
  source: string;
  state: string;
  detail: string;
}

export interface NodeStatus {
  ready: boolean;
  reason: string;
  message: string;
  /** false when any pool is exhausted: stop placing pods here, but do not evict. */
  schedulable: boolean;
  networks: NetworkStatus[];
  sandboxes: number;
  cluster?: ClusterSourceStatus;
  /** Asked for with checkNode: what the kernel's cluster routes, neighbours and FDB entries
   * lack or hold beyond the node list. */
  clusterDifferences?: string[];
  /** NetworkPolicy on: its view's source and state. */
  networkPolicy?: { source: string; state: string; detail: string };
}

export type WatchEvent =
  | { type: 'attach' | 'detach' | 'interface-added' | 'interface-removed'; sandboxId: string; result?: AttachResult;
      /** detach only: set when knit detached the sandbox itself ('netns-gone': its netns no longer exists). */
      reason?: 'netns-gone' }
  | { type: 'link'; sandboxId?: string; netns?: string; name: string; index: number; up: boolean; removed: boolean }
  | { type: 'address'; netns?: string; index: number; address: string; removed: boolean };

export interface Extension {
  name: string;
  /** unix socket path of the extension's knit.v1.Extension service */
  endpoint: string;
  phase: 'post-attach' | 'pre-detach';
  required: boolean;
  order: number;
}

/** What src/api calls. Errors are KnitError (src/base/errors.ts) with a code the API maps. */
export interface SandboxService {
  attach(req: AttachRequest): Promise<AttachResult>;
  detach(sandboxId: string, netnsPath?: string): Promise<void>;
  check(sandboxId: string): Promise<CheckReport>;
  query(sandboxId: string): Promise<SandboxRecordView & { live: CheckReport }>;
  /** The record Query would show (a Detach that has answered reads as gone), without Query's
   * live comparison with the kernel: undefined where Query answers NOT_FOUND. The result
   * carries fresh hand-off tokens only when `tokens` asks, as an Attach answer does. */
  lookup(sandboxId: string, opts?: { tokens?: boolean }): SandboxRecordView | undefined;
  list(): Promise<SandboxRecordView[]>;
  nodeStatus(opts?: { checkNode?: boolean }): Promise<NodeStatus>;
  garbageCollect(valid: { sandboxId: string; interface?: string }[]): Promise<{ removed: string[]; errors: string[] }>;
  plan(req: AttachRequest): Promise<{ steps: { description: string; op: unknown; undo?: unknown }[] }>;
  /** Hot-plug one interface into an attached sandbox; answers the sandbox's whole result. */
  addInterface(sandboxId: string, iface: InterfaceRequest): Promise<AttachResult>;
  removeInterface(sandboxId: string, name: string): Promise<void>;
  /** What addInterface would do, step by step, without doing it. */
  planAddInterface(sandboxId: string, iface: InterfaceRequest): Promise<{ steps: { description: string; op: unknown; undo?: unknown }[] }>;
  watch(listener: (e: WatchEvent) => void): () => void;
  registerExtension(ext: Extension): Promise<void>;
  unregisterExtension(name: string): Promise<void>;
  listExtensions(): Promise<Extension[]>;
}
