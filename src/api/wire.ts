// Domain objects (src/base/types.ts) -> knit.v1 response messages. The reverse direction, for
// requests, is validate.ts.
import type {
  AttachRequest,
  AttachResult,
  AttachmentState,
  Bandwidth,
  DnsConfig,
  Extension,
  NodeStatus,
  RuntimeKind,
  SandboxRecordView,
  WatchEvent,
} from '../base/types.js';
import { toStruct } from './struct.js';
import { guestName } from '../base/handoff.js';
import { runtimeWireName } from '../base/runtime-kinds.js';
import type {
  PhaseName,
  RuntimeName,
  StateName,
  WireAttachRequest,
  WireBandwidth,
  WireDns,
  WireExtension,
  WireIpConfig,
  WireNodeStatus,
  WireResult,
  WireSandboxRecord,
} from './wire-types.js';

/** The CNI spec version knit's results follow. */
export const CNI_VERSION = '1.1.0';

const stateName: Record<AttachmentState, StateName> = {
  attaching: 'ATTACHING',
  attached: 'ATTACHED',
  detaching: 'DETACHING',
  failed: 'FAILED',
};
const phaseName: Record<Extension['phase'], PhaseName> = { 'post-attach': 'POST_ATTACH', 'pre-detach': 'PRE_DETACH' };

export function runtimeToWire(r: RuntimeKind): RuntimeName {
  return runtimeWireName(r);
}

/** uint64 fields as decimal strings; 0 where a direction has no limit (the proto's default). */
function bandwidthToWire(b: Bandwidth): WireBandwidth {
  return {
    ingress_rate: String(b.ingress?.rate ?? 0),
    ingress_burst: String(b.ingress?.burst ?? 0),
    egress_rate: String(b.egress?.rate ?? 0),
    egress_burst: String(b.egress?.burst ?? 0),
  };
}

function dnsToWire(d: DnsConfig | undefined): WireDns | null {
  if (!d) return null;
  return { nameservers: d.nameservers, search: d.search, options: d.options, domain: d.domain ?? '' };
}

/** The name a pod (or its VM guest) knows an interface by: a host-side tap or a VFIO device
 * that carries the pod's addresses is the guest's NIC of that name. */
function podSideName(iface: AttachResult['interfaces'][number]): string {
  return guestName(iface.handoff) ?? iface.name;
}

/**
 * The KNI view of a result: pod interface name -> its addresses and MAC. Devices that carry no
 * pod address (veth host ends) are left out: callers read ipconfigs["eth0"] for pod IPs.
 */
export function ipconfigsOf(result: AttachResult): Record<string, WireIpConfig> {
  const out: Record<string, WireIpConfig> = {};
  result.interfaces.forEach((iface, index) => {
    const owns = result.ips.some((ip) => ip.interface === index);
    if (!iface.sandbox && !owns) return;
    out[iface.sandbox ? iface.name : podSideName(iface)] = {
      ip: result.ips.filter((ip) => ip.interface === index).map((ip) => ip.address),
      mac: iface.mac ?? '',
    };
  });
  return out;
}

/** Pod addresses without prefix, primary first (the first interface's IPv4 first). Every ip
 * of a result is the pod's: host ends carry none, and a Kata host tap or a VFIO device carries
 * the guest's. */
export function podIpsOf(result: AttachResult): string[] {
  return [...result.ips]
    .sort((a, b) => a.interface - b.interface || a.family - b.family)
    .map((ip) => ip.address.split('/')[0]!);
}

export function resultToWire(r: AttachResult): WireResult {
  return {
    cni_version: CNI_VERSION,
    interfaces: r.interfaces.map((i) => ({
      name: i.name,
      mac: i.mac ?? '',
      mtu: i.mtu ?? 0,
      sandbox: i.sandbox ?? '',
      kind: i.kind,
      host_name: i.hostName ?? '',
      socket_path: i.socketPath ?? '',
      pci_id: i.pciId ?? '',
      handoff: i.handoff ? toStruct(i.handoff) : null,
    })),
    ips: r.ips.map((ip) => ({ address: ip.address, gateway: ip.gateway ?? '', family: ip.family, interface: ip.interface })),
    routes: r.routes.map((rt) => ({
      dst: rt.dst,
      gw: rt.gw ?? '',
      mtu: rt.mtu ?? 0,
      priority: rt.priority ?? 0,
      table: rt.table ?? 0,
      scope: rt.scope ?? 0,
    })),
    dns: dnsToWire(r.dns),
    ipconfigs: ipconfigsOf(r),
    sandbox_id: r.sandboxId,
    netns_path: r.netnsPath,
    runtime: runtimeWireName(r.runtime),
  };
}

export function requestToWire(r: AttachRequest): WireAttachRequest {
  return {
    sandbox_id: r.sandboxId,
    pod_name: r.podName ?? '',
    pod_namespace: r.podNamespace ?? '',
    pod_uid: r.podUid ?? '',
    netns_path: r.netnsPath,
    runtime: runtimeWireName(r.runtime),
    interfaces: r.interfaces.map((i) => ({
      name: i.name,
      network: i.network ?? '',
      mac: i.mac ?? '',
      mtu: i.mtu ?? 0,
      ips: i.ips ?? [],
      device: i.device
        ? {
            bdf: i.device.bdf ?? '',
            netdev: i.device.netdev ?? '',
            pool: i.device.pool ?? '',
            device: i.device.name ?? '',
            parameters:
              i.device.parameters && typeof i.device.parameters === 'object'
                ? toStruct(i.device.parameters as Record<string, unknown>)
                : null,
          }
        : null,
      binding: i.binding ?? {},
      bandwidth: i.bandwidth ? bandwidthToWire(i.bandwidth) : null,
      default_route: i.defaultRoute ?? false,
    })),
    port_mappings: r.portMappings.map((p) => ({
      protocol: p.protocol.toUpperCase(),
      container_port: p.containerPort,
      host_port: p.hostPort,
      host_ip: p.hostIp ?? '',
    })),
    dns: dnsToWire(r.dns),
    labels: r.labels,
    annotations: r.annotations,
  };
}

export function recordToWire(v: SandboxRecordView): WireSandboxRecord {
  return {
    request: requestToWire(v.request),
    result: v.result ? resultToWire(v.result) : null,
    state: stateName[v.state] ?? 'ATTACHMENT_STATE_UNSPECIFIED',
    created_at: v.createdAt,
  };
}

const UINT64_MAX = 18446744073709551615n;

/** uint64 as a decimal string (longs: String), clamped: a /0 IPv6 pool is 2^128 addresses. */
export function uint64(n: number): string {
  if (!Number.isFinite(n) || n <= 0) return '0';
  const big = BigInt(Math.floor(n));
  return (big > UINT64_MAX ? UINT64_MAX : big).toString();
}

export function nodeStatusToWire(s: NodeStatus): WireNodeStatus {
  return {
    ready: s.ready,
    reason: s.reason,
    message: s.message,
    schedulable: s.schedulable,
    networks: s.networks.map((n) => ({
      name: n.name,
      mode: n.mode,
      ready: n.ready,
      cni_status: n.cniStatus ?? '',
      pools: n.pools.map((p) => ({
        family: p.family,
        subnet: p.subnet,
        size: uint64(p.size),
        used: uint64(p.used),
        free: uint64(p.free),
      })),
      cross_node: n.crossNode ?? '',
      node_subnets: n.nodeSubnets ?? [],
      peers: (n.peers ?? []).map((p) => ({ node: p.node, subnets: p.subnets, via: p.via ?? '', in_place: p.inPlace, problem: p.problem ?? '' })),
    })),
    sandboxes: s.sandboxes,
    ...(s.cluster && { cluster: s.cluster }),
    cluster_differences: s.clusterDifferences ?? [],
    ...(s.networkPolicy && { network_policy: s.networkPolicy }),
  };
}

export function extensionToWire(e: Extension): WireExtension {
  return { name: e.name, endpoint: e.endpoint, phase: phaseName[e.phase], required: e.required, order: e.order };
}

export function phaseToWire(p: Extension['phase']): PhaseName {
  return phaseName[p];
}

export function watchEventToWire(e: WatchEvent): object {
  switch (e.type) {
    case 'attach':
    case 'detach':
    case 'interface-added':
    case 'interface-removed':
      return { sandbox: { type: e.type, sandbox_id: e.sandboxId, result: e.result ? resultToWire(e.result) : null, reason: e.reason ?? '' } };
    case 'link':
      return { link: { netns: e.netns ?? '', name: e.name, index: e.index, up: e.up, removed: e.removed, sandbox_id: e.sandboxId ?? '' } };
    case 'address':
      return { address: { netns: e.netns ?? '', index: e.index, address: e.address, removed: e.removed } };
  }
}

/** Plan steps carry ops from src/base/ops.ts: plain data, so they travel as Structs. */
export function planToWire(plan: { steps: { description: string; op: unknown; undo?: unknown }[] }): object {
  const asStruct = (v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) ? toStruct(v as Record<string, unknown>) : v === undefined ? null : toStruct({ value: v });
  return { steps: plan.steps.map((s) => ({ description: s.description, op: asStruct(s.op), undo: asStruct(s.undo) })) };
}
