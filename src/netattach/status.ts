// The pod annotation `k8s.v1.cni.cncf.io/network-status`, as Multus writes it: one entry per
// pod interface of each network's CNI result (network-attachment-definition-client v1.7
// pkg/utils/net-attach-def.go CreateNetworkStatuses), the NetworkStatus fields in their Go order
// (pkg/apis/k8s.cni.cncf.io/v1/types.go), each entry json.MarshalIndent'ed with four spaces and
// the entries joined with "," inside "[…]" (SetNetworkStatus). KubeVirt reads `name` and
// `interface` back to map a VM's networks to pod interfaces.
import { goMarshalIndent } from './go-json.js';
import { normalizeIp } from '../ipam/ip.js';

export const NETWORK_STATUS_ANNOTATION = 'k8s.v1.cni.cncf.io/network-status';

export interface StatusDns {
  nameservers?: string[];
  domain?: string;
  search?: string[];
  options?: string[];
}

/** The NPWG device-info spec (version 1.1.0); knit fills in `pci` for the devices it moves in. */
export interface DeviceInfo {
  type?: string;
  version?: string;
  pci?: { 'pci-address'?: string; 'vhost-net'?: string; 'rdma-device'?: string; 'pf-pci-address'?: string };
}

/** One entry; the keys in the order Go writes them. */
export interface NetworkStatus {
  name: string;
  interface?: string;
  ips?: string[];
  mac?: string;
  mtu?: number;
  default?: boolean;
  dns: StatusDns;
  'device-info'?: DeviceInfo;
  gateway?: string[];
}

/** The part of a CNI result (any version knit reads) that the status is built from. */
export interface ResultLike {
  interfaces?: { name?: string; mac?: string; mtu?: number; sandbox?: string }[];
  ips?: { address: string; gateway?: string; interface?: number }[];
  routes?: { dst: string; gw?: string }[];
  dns?: StatusDns;
}

/** Go's net.IP.String() of an address in a result (a CIDR's address part). */
const ipText = (cidr: string) => normalizeIp(cidr.split('/')[0]!);

/** isDefaultRoute: the destination address is 0.0.0.0 or :: (whatever its prefix). */
const isDefaultRoute = (dst: string) => {
  const ip = dst.split('/')[0]!;
  try {
    return normalizeIp(ip) === '0.0.0.0' || normalizeIp(ip) === '::';
  } catch {
    return false;
  }
};

/** The gateways of the default routes. A default route with no gateway (an IPAM's
 * `{"dst": "0.0.0.0/0"}`) gives none: Multus prints Go's nil net.IP there, "<nil>", which
 * names no address (docs/secondary-networks.md, "Where knit differs"). */
const gatewaysOf = (r: ResultLike) => (r.routes ?? []).filter((rt) => rt.gw && isDefaultRoute(rt.dst)).map((rt) => normalizeIp(rt.gw!));

function dnsOf(r: ResultLike): StatusDns {
  const d = r.dns ?? {};
  return {
    ...(d.nameservers?.length && { nameservers: [...d.nameservers] }),
    ...(d.domain && { domain: d.domain }),
    ...(d.search?.length && { search: [...d.search] }),
    ...(d.options?.length && { options: [...d.options] }),
  };
}

/** Drops what Go's omitempty leaves out, keeping the key order of NetworkStatus. */
function entry(s: NetworkStatus): NetworkStatus {
  return {
    name: s.name,
    ...(s.interface && { interface: s.interface }),
    ...(s.ips?.length && { ips: s.ips }),
    ...(s.mac && { mac: s.mac }),
    ...(s.mtu && { mtu: s.mtu }),
    ...(s.default && { default: true }),
    dns: s.dns,
    ...(s['device-info'] && { 'device-info': s['device-info'] }),
    ...(s.gateway?.length && { gateway: s.gateway }),
  };
}

/**
 * The entries for one network's CNI result: with one interface in the result, one entry with
 * every address (CreateNetworkStatus); otherwise one entry per pod interface (those with a
 * `sandbox`), each with its own addresses, an address naming no interface going to the last
 * one. Of a default network, the entry of the first interface with a gateway address (else
 * the first pod interface) is marked `default`.
 */
export function networkStatuses(result: ResultLike, name: string, isDefault: boolean, deviceInfo?: DeviceInfo): NetworkStatus[] {
  const ifaces = result.interfaces ?? [];
  const ips = result.ips ?? [];
  const dns = dnsOf(result);
  const gateway = gatewaysOf(result);
  const device = deviceInfo ? { 'device-info': deviceInfo } : {};
  if (ifaces.length === 1) {
    const pod = ifaces[0]!.sandbox ? ifaces[0]! : undefined;
    return [entry({ name, interface: pod?.name, mac: pod?.mac, mtu: pod?.mtu, ips: ips.map((ip) => ipText(ip.address)), default: isDefault, dns, ...device, gateway })];
  }
  const gwIndex = isDefault ? ips.find((ip) => ip.gateway && ip.interface !== undefined)?.interface ?? -1 : -1;
  const out: NetworkStatus[] = [];
  const byIndex = new Map<number, NetworkStatus>();
  let marked = false;
  ifaces.forEach((iface, i) => {
    if (!iface.sandbox) return;
    const mark = isDefault && !marked && (gwIndex === -1 || i === gwIndex);
    marked ||= mark;
    const s: NetworkStatus = { name, interface: iface.name, mac: iface.mac, mtu: iface.mtu, ips: [], default: mark, dns, ...device, gateway };
    byIndex.set(i, s);
    out.push(s);
  });
  for (const ip of ips) {
    const s = ip.interface === undefined ? out[out.length - 1] : byIndex.get(ip.interface);
    s?.ips!.push(ipText(ip.address));
  }
  return out.map(entry);
}

/** The annotation's text, byte for byte as Multus writes it. */
export function formatNetworkStatus(statuses: NetworkStatus[]): string {
  return `[${statuses.map((s) => goMarshalIndent(entry(s))).join(',')}]`;
}
