// From the validated file to the config the daemon uses: defaults that depend on other fields
// filled in (gateway, bridge name, default network), addresses in canonical text, so two
// spellings of one config compare equal.

import { formatCidr, formatIp, normalizeIp, parseCidr, type IpFamily } from '../ipam/ip.js';
import { NODE_SUBNET, type RawCni, type RawCluster, type RawConfig, type RawDra, type RawNetworkPolicy, type RawNetwork, type RawPool, type RawSecondaryNetworks, type LOG_LEVELS } from './schema.js';
import type { CniSettings } from '../base/strategy.js';

export interface PoolSettings {
  subnet: string;
  gateway: string;
  rangeStart?: string;
  rangeEnd?: string;
  reserved: string[];
}

export interface RouteSettings {
  dst: string;
  gw?: string;
}

export interface DnsSettings {
  nameservers: string[];
  search: string[];
  options: string[];
  domain?: string;
}

export interface NetworkConfig {
  name: string;
  mode: 'bridge' | 'routed' | 'cni';
  cni?: CniSettings;
  /** Bridge mode only: the Linux bridge knit creates. */
  bridge?: string;
  /** Bridge mode only: the bridge's bridged IPv4/IPv6 pass the netfilter hooks (schema.ts). */
  bridgeNetfilter?: boolean;
  mtu: number;
  hairpin: boolean;
  ipv4?: PoolSettings;
  ipv6?: PoolSettings;
  routes: RouteSettings[];
  dns?: DnsSettings;
  /** Families whose subnet is the node's podCIDR (subnet "node"): their pool is filled in at
   * run time from the cluster view (src/cluster/node-networks.ts), and absent here. */
  nodeSubnet?: (4 | 6)[];
  /** How pods on other nodes are reached; absent: not at all (a one-node network). */
  crossNode?: 'routes' | 'vxlan' | 'none';
  vxlan?: { vni: number; port: number; device: string };
  /** With crossNode: masquerade what leaves the cluster, except to these. */
  masquerade?: boolean;
  nonMasqueradeCIDRs?: string[];
}

export interface ClusterSettings {
  /** From the file, else $NODE_NAME, else the host name (resolved at start-up). */
  nodeName?: string;
  kubeconfig?: string;
  nodes?: Record<string, { podCIDRs: string[]; internalIPs: string[] }>;
  clusterCIDRs: string[];
  serviceCIDRs: string[];
}

export interface KnitConfig {
  socket: string;
  runDir: string;
  stateDir: string;
  netnsDir: string;
  allowedUids: number[];
  metricsAddress?: string;
  logLevel: (typeof LOG_LEVELS)[number];
  requiredExtensions: string[];
  handoffSocket: string;
  /** knit-cni's socket and its durable DEL queue (schema.ts). */
  cniSocket: string;
  cniDeleteQueue: string;
  cniDeleteRetry: { maxAttempts: number; backoffMs: number };
  /** Prefix of alias tags and seed of the reap group: see schema.ts. */
  instance: string;
  /** sysfs for device attachments (schema.ts). */
  sysfsRoot: string;
  /** Kata: the directory DAN files are confined to (schema.ts). */
  kata: { danDir: string };
  /** Seconds between sweeps for sandboxes whose netns is gone; 0 is off (schema.ts). */
  goneNetnsSweepSeconds: number;
  /** CNI chains that may run at once (schema.ts). */
  cniParallelChains: number;
  /** Set when a network spans the cluster. */
  cluster?: ClusterSettings;
  defaultNetwork: string;
  networks: NetworkConfig[];
  /** The DRA driver (schema.ts); absent: off. */
  dra?: DraSettings;
  /** NetworkPolicy (schema.ts); absent: off. `networks` filled in (default: the default network). */
  networkPolicy?: NetworkPolicySettings;
  /** knit in Multus's place (schema.ts); absent: off. */
  secondaryNetworks?: SecondaryNetworksSettings;
}

export type NetworkPolicySettings = Omit<RawNetworkPolicy, 'networks'> & { networks: string[] };

export type DraSettings = RawDra;
/** schema.ts's block, the literal definitions' configs as text. */
export type SecondaryNetworksSettings = Omit<RawSecondaryNetworks, 'definitions' | 'cacheDir'> & { definitions?: Record<string, string>; cacheDir: string };

export function resolveConfig(raw: RawConfig): KnitConfig {
  const { defaultNetwork, metricsAddress, networks, cluster, dra, networkPolicy, secondaryNetworks, ...rest } = raw;
  const dflt = defaultNetwork ?? networks[0].name;
  return {
    ...rest,
    ...(networkPolicy && { networkPolicy: { ...networkPolicy, networks: networkPolicy.networks ?? [dflt] } }),
    ...(metricsAddress !== undefined && { metricsAddress }),
    ...(cluster && { cluster: resolveCluster(cluster) }),
    ...(dra !== undefined && { dra }),
    ...(secondaryNetworks && { secondaryNetworks: resolveSecondary(secondaryNetworks, rest.stateDir) }),
    defaultNetwork: dflt,
    networks: networks.map(resolveNetwork),
  };
}

function resolveNetwork(net: RawNetwork): NetworkConfig {
  const nodeSubnet = ([[4, net.ipv4], [6, net.ipv6]] as const).filter(([, p]) => p?.subnet === NODE_SUBNET).map(([f]) => f);
  return {
    name: net.name,
    mode: net.mode,
    ...(net.mode === 'cni' && net.cni && { cni: resolveCni(net.cni) }),
    ...(net.mode === 'bridge' && { bridge: net.bridge ?? net.name, bridgeNetfilter: net.bridgeNetfilter ?? true }),
    mtu: net.mtu,
    hairpin: net.hairpin,
    ...(net.ipv4 && net.ipv4.subnet !== NODE_SUBNET && { ipv4: resolvePool(net.ipv4, 4) }),
    ...(net.ipv6 && net.ipv6.subnet !== NODE_SUBNET && { ipv6: resolvePool(net.ipv6, 6) }),
    routes: net.routes.map((r) => ({ dst: formatCidr(parseCidr(r.dst)), ...(r.gw !== undefined && { gw: normalizeIp(r.gw) }) })),
    ...(net.dns && { dns: { ...net.dns, nameservers: net.dns.nameservers.map(normalizeIp) } }),
    ...(nodeSubnet.length && { nodeSubnet }),
    ...(net.crossNode && { crossNode: net.crossNode }),
    ...(net.crossNode === 'vxlan' && { vxlan: { vni: net.vxlan?.vni ?? 1, port: net.vxlan?.port ?? 8472, device: net.vxlan?.device ?? `knit-vx${net.vxlan?.vni ?? 1}` } }),
    ...(net.crossNode && { masquerade: net.masquerade ?? true, nonMasqueradeCIDRs: (net.nonMasqueradeCIDRs ?? []).map((c) => formatCidr(parseCidr(c))) }),
  };
}

function resolveCluster(c: RawCluster): ClusterSettings {
  const cidrs = (list: string[]) => list.map((x) => formatCidr(parseCidr(x)));
  return {
    ...(c.nodeName !== undefined && { nodeName: c.nodeName }),
    ...(c.kubeconfig !== undefined && { kubeconfig: c.kubeconfig }),
    ...(c.nodes && {
      nodes: Object.fromEntries(Object.entries(c.nodes).map(([name, n]) => [name, { podCIDRs: cidrs(n.podCIDRs), internalIPs: n.internalIPs.map(normalizeIp) }])),
    }),
    clusterCIDRs: cidrs(c.clusterCIDRs),
    serviceCIDRs: cidrs(c.serviceCIDRs),
  };
}

function resolveSecondary(s: RawSecondaryNetworks, stateDir: string): SecondaryNetworksSettings {
  const { definitions, cacheDir, ...rest } = s;
  const out = { ...rest, cacheDir: cacheDir ?? `${stateDir.replace(/\/$/, '')}/cni-cache` };
  if (!definitions) return out;
  return { ...out, definitions: Object.fromEntries(Object.entries(definitions).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)])) };
}

function resolveCni(c: RawCni): CniSettings {
  const { conflist, ...rest } = c;
  return { ...rest, ...(conflist !== undefined && { conflist: typeof conflist === 'string' ? conflist : JSON.stringify(conflist) }) };
}

function resolvePool(pool: RawPool, family: IpFamily): PoolSettings {
  const subnet = parseCidr(pool.subnet);
  return {
    subnet: formatCidr(subnet),
    // The first address after the network address, the usual gateway convention.
    gateway: pool.gateway !== undefined ? normalizeIp(pool.gateway) : formatIp({ family, value: subnet.network + 1n }),
    ...(pool.rangeStart !== undefined && { rangeStart: normalizeIp(pool.rangeStart) }),
    ...(pool.rangeEnd !== undefined && { rangeEnd: normalizeIp(pool.rangeEnd) }),
    reserved: pool.reserved.map((r) => (r.includes('/') ? formatCidr(parseCidr(r)) : normalizeIp(r))),
  };
}
