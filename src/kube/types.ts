// The few Kubernetes object shapes knit reads and writes, written by hand and partial on purpose:
// only the fields some part of knit uses. Field names follow the published API reference
// (core/v1 Node, resource.k8s.io/v1 ResourceClaim and ResourceSlice, Kubernetes 1.34); anything
// not listed here still arrives in the object, it is just not typed.

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  finalizers?: string[];
  ownerReferences?: { apiVersion: string; kind: string; name: string; uid: string; controller?: boolean }[];
}

/** What every object knit handles carries. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
}

export interface ListMeta {
  resourceVersion?: string;
  continue?: string;
  remainingItemCount?: number;
}

/** meta/v1 Status: what the API answers for a failure, and the object of a watch ERROR event. */
export interface Status {
  kind: 'Status';
  apiVersion?: string;
  status?: 'Success' | 'Failure';
  message?: string;
  reason?: string;
  code?: number;
  details?: {
    name?: string;
    group?: string;
    kind?: string;
    causes?: { reason?: string; message?: string; field?: string }[];
    retryAfterSeconds?: number;
  };
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

export interface WatchEvent<T = any> {
  type: WatchEventType;
  object: T;
}

/** A condition as meta/v1 Condition (status.conditions of most kinds). */
export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
  observedGeneration?: number;
}

// ---- core/v1 Node ----

export type NodeAddressType = 'InternalIP' | 'ExternalIP' | 'Hostname' | 'InternalDNS' | 'ExternalDNS';

export interface Node extends KubeObject {
  spec?: {
    /** The first of podCIDRs (the IPv4 one on a dual-stack node that lists IPv4 first). */
    podCIDR?: string;
    /** At most one per family, set by the node IPAM controller or by hand. */
    podCIDRs?: string[];
    providerID?: string;
    unschedulable?: boolean;
    taints?: { key: string; value?: string; effect: 'NoSchedule' | 'PreferNoSchedule' | 'NoExecute' }[];
  };
  status?: {
    addresses?: { type: NodeAddressType | string; address: string }[];
    conditions?: { type: string; status: 'True' | 'False' | 'Unknown'; reason?: string; message?: string }[];
    nodeInfo?: { kubeletVersion?: string; kernelVersion?: string; containerRuntimeVersion?: string };
  };
}

// ---- resource.k8s.io/v1 (DRA, GA in Kubernetes 1.34) ----

/** One typed attribute value: exactly one of the four is set. Versions are semver strings. */
export interface DeviceAttribute {
  string?: string;
  int?: number;
  bool?: boolean;
  version?: string;
}

export interface DeviceCapacity {
  /** A resource.Quantity in its string form, e.g. "10Gi". */
  value: string;
}

export interface Device {
  name: string;
  /** Keyed by qualified name, e.g. "dra.net/ifName"; an unqualified name gets the driver's domain. */
  attributes?: Record<string, DeviceAttribute>;
  capacity?: Record<string, DeviceCapacity>;
}

export interface ResourcePool {
  name: string;
  /** Slices of an older generation than the newest seen are stale and ignored by the scheduler. */
  generation: number;
  resourceSliceCount: number;
}

export interface ResourceSlice extends KubeObject {
  spec: {
    driver: string;
    pool: ResourcePool;
    /** Set when the slice's devices are local to one node (exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection). */
    nodeName?: string;
    allNodes?: boolean;
    devices?: Device[];
  };
}

export interface DeviceSelector {
  cel?: { expression: string };
}

export interface ExactDeviceRequest {
  deviceClassName: string;
  selectors?: DeviceSelector[];
  allocationMode?: 'ExactCount' | 'All';
  count?: number;
  adminAccess?: boolean;
}

export interface DeviceRequest {
  name: string;
  /** Exactly one of exactly and firstAvailable is set. */
  exactly?: ExactDeviceRequest;
  firstAvailable?: (ExactDeviceRequest & { name: string })[];
}

/** Driver-specific parameters: the only configuration form resource.k8s.io/v1 has. */
export interface OpaqueDeviceConfiguration {
  driver: string;
  /** Any JSON object; the driver defines its shape (knit's in src/devices). */
  parameters: unknown;
}

export interface DeviceClaimConfiguration {
  /** The requests this config applies to; none means all of the claim's requests. Subrequests as "<request>/<subrequest>". */
  requests?: string[];
  opaque?: OpaqueDeviceConfiguration;
}

export interface DeviceRequestAllocationResult {
  /** The request name, or "<request>/<subrequest>" for a firstAvailable pick. */
  request: string;
  driver: string;
  pool: string;
  device: string;
  adminAccess?: boolean;
}

export interface DeviceAllocationConfiguration extends DeviceClaimConfiguration {
  /** Whether the config came from the DeviceClass or the claim; claim config follows class config and wins. */
  source: 'FromClass' | 'FromClaim';
}

export interface ResourceClaimConsumerReference {
  apiGroup?: string;
  /** "pods" for a pod; the uid is then the pod's UID. */
  resource: string;
  name: string;
  uid: string;
}

/** KEP-4817 network data a driver reports per allocated device. */
export interface NetworkDeviceData {
  interfaceName?: string;
  /** CIDR form, e.g. "10.9.8.7/24". */
  ips?: string[];
  hardwareAddress?: string;
}

export interface AllocatedDeviceStatus {
  driver: string;
  pool: string;
  device: string;
  conditions?: Condition[];
  data?: unknown;
  networkData?: NetworkDeviceData;
}

export interface ResourceClaim extends KubeObject {
  spec: {
    devices?: {
      requests?: DeviceRequest[];
      config?: DeviceClaimConfiguration[];
    };
  };
  status?: {
    allocation?: {
      devices?: {
        results?: DeviceRequestAllocationResult[];
        config?: DeviceAllocationConfiguration[];
      };
      nodeSelector?: unknown;
    };
    reservedFor?: ResourceClaimConsumerReference[];
    devices?: AllocatedDeviceStatus[];
  };
}

// ---- core/v1 Pod, and k8s.cni.cncf.io/v1 NetworkAttachmentDefinition ----

/** A Pod, as far as knit reads it: its annotations (the networks it asks for) and its node. */
export interface Pod extends KubeObject {
  spec?: { nodeName?: string };
  status?: { phase?: string };
}

/** The Network Plumbing Working Group's NetworkAttachmentDefinition: a CNI config, or none (a
 * file by its name on the node). */
export interface NetworkAttachmentDefinition extends KubeObject {
  spec?: { config?: string };
}
