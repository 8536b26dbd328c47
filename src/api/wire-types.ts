// The decoded shapes of knit.v1 messages as proto-loader delivers them (keepCase, enums as
// names, defaults filled, absent sub-messages null). Hand-kept in step with knit.proto.
import type { StructMsg } from './struct.js';

export type { RuntimeWireName as RuntimeName } from '../base/runtime-kinds.js';
import type { RuntimeWireName as RuntimeName } from '../base/runtime-kinds.js';
export type ProtocolName = 'PROTOCOL_UNSPECIFIED' | 'TCP' | 'UDP' | 'SCTP';
export type PhaseName = 'EXTENSION_PHASE_UNSPECIFIED' | 'POST_ATTACH' | 'PRE_DETACH';
export type StateName = 'ATTACHMENT_STATE_UNSPECIFIED' | 'ATTACHING' | 'ATTACHED' | 'DETACHING' | 'FAILED';

export interface WireDeviceRef {
  bdf: string;
  netdev: string;
  pool: string;
  device: string;
  parameters: StructMsg | null;
}

export interface WireInterfaceRequest {
  name: string;
  network: string;
  mac: string;
  mtu: number;
  ips: string[];
  device: WireDeviceRef | null;
  binding: Record<string, string>;
  bandwidth?: WireBandwidth | null;
  default_route: boolean;
}

/** uint64 fields arrive as decimal strings (loaderOptions.longs = String). */
export interface WireBandwidth {
  ingress_rate: string | number;
  ingress_burst: string | number;
  egress_rate: string | number;
  egress_burst: string | number;
}

export interface WirePortMapping {
  protocol: ProtocolName | string;
  container_port: number;
  host_port: number;
  host_ip: string;
}

export interface WireDns {
  nameservers: string[];
  search: string[];
  options: string[];
  domain: string;
}

export interface WireAttachRequest {
  sandbox_id: string;
  pod_name: string;
  pod_namespace: string;
  pod_uid: string;
  netns_path: string;
  runtime: RuntimeName | string;
  interfaces: WireInterfaceRequest[];
  port_mappings: WirePortMapping[];
  dns: WireDns | null;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

export interface WireInterface {
  name: string;
  mac: string;
  mtu: number;
  sandbox: string;
  kind: string;
  host_name: string;
  socket_path: string;
  pci_id: string;
  handoff: StructMsg | null;
}

export interface WireIp {
  address: string;
  gateway: string;
  family: number;
  interface?: number;
}

export interface WireRoute {
  dst: string;
  gw: string;
  mtu: number;
  priority: number;
  table: number;
  scope: number;
}

export interface WireIpConfig {
  ip: string[];
  mac: string;
}

export interface WireResult {
  cni_version: string;
  interfaces: WireInterface[];
  ips: WireIp[];
  routes: WireRoute[];
  dns: WireDns | null;
  ipconfigs: Record<string, WireIpConfig>;
  sandbox_id: string;
  netns_path: string;
  runtime: RuntimeName;
}

export interface WireSandboxRecord {
  request: WireAttachRequest;
  result: WireResult | null;
  state: StateName;
  created_at: string;
}

export interface WireExtension {
  name: string;
  endpoint: string;
  phase: PhaseName | string;
  required: boolean;
  order: number;
}

export interface WireNodeStatus {
  ready: boolean;
  reason: string;
  message: string;
  schedulable: boolean;
  networks: {
    name: string;
    mode: string;
    ready: boolean;
    cni_status: string;
    pools: { family: number; subnet: string; size: string; used: string; free: string }[];
    cross_node: string;
    node_subnets: string[];
    peers: { node: string; subnets: string[]; via: string; in_place: boolean; problem: string }[];
  }[];
  sandboxes: number;
  cluster?: { node: string; source: string; state: string; detail: string };
  cluster_differences: string[];
  network_policy?: { source: string; state: string; detail: string };
}
