// From the validated file to the config the daemon uses: defaults that depend on other fields
// filled in (gateway, bridge name, default network), addresses in canonical text, so two
// spellings of one config compare equal.

import { formatCidr, formatIp, normalizeIp, parseCidr, type IpFamily } from '../ipam/ip.js';
import type { RawCni, RawConfig, RawDra, RawNetwork, RawPool, LOG_LEVELS } from './schema.js';
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
  mtu: number;
  hairpin: boolean;
  ipv4?: PoolSettings;
  ipv6?: PoolSettings;
  routes: RouteSettings[];
  dns?: DnsSettings;
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
  defaultNetwork: string;
  networks: NetworkConfig[];
  /** The DRA driver (schema.ts); absent: off. */
  dra?: DraSettings;
}

export type DraSettings = RawDra;

export function resolveConfig(raw: RawConfig): KnitConfig {
  const { defaultNetwork, metricsAddress, networks, dra, ...rest } = raw;
  return {
    ...rest,
    ...(metricsAddress !== undefined && { metricsAddress }),
    ...(dra !== undefined && { dra }),
    defaultNetwork: defaultNetwork ?? networks[0].name,
    networks: networks.map(resolveNetwork),
  };
}

function resolveNetwork(net: RawNetwork): NetworkConfig {
  return {
    name: net.name,
    mode: net.mode,
    ...(net.mode === 'cni' && net.cni && { cni: resolveCni(net.cni) }),
    ...(net.mode === 'bridge' && { bridge: net.bridge ?? net.name }),
    mtu: net.mtu,
    hairpin: net.hairpin,
    ...(net.ipv4 && { ipv4: resolvePool(net.ipv4, 4) }),
    ...(net.ipv6 && { ipv6: resolvePool(net.ipv6, 6) }),
    routes: net.routes.map((r) => ({ dst: formatCidr(parseCidr(r.dst)), ...(r.gw !== undefined && { gw: normalizeIp(r.gw) }) })),
    ...(net.dns && { dns: { ...net.dns, nameservers: net.dns.nameservers.map(normalizeIp) } }),
  };
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
