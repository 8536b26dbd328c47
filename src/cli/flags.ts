// Parsers for the compound flags of `knit attach` / `knit plan`. They check syntax only and
// build knit.v1 request fields; the daemon validates values (and names the field if wrong).
import { invalidArgument, usageError } from './exit.js';
import { RUNTIME_CHOICES, isRuntimeKind, runtimeWireName } from '../base/runtime-kinds.js';

export interface WireInterfaceFlag {
  name: string;
  network?: string;
  mac?: string;
  mtu?: number;
  ips: string[];
  binding: Record<string, string>;
  device?: { bdf?: string; netdev?: string; pool?: string; device?: string };
  bandwidth?: Record<string, string>;
  default_route?: boolean;
}

/** `--if` keys for InterfaceRequest.bandwidth (bits per second, bits). */
const BANDWIDTH_KEYS: Record<string, string> = {
  'ingress-rate': 'ingress_rate',
  'ingress-burst': 'ingress_burst',
  'egress-rate': 'egress_rate',
  'egress-burst': 'egress_burst',
};

const DEVICE_KEYS = new Set(['bdf', 'netdev', 'pool', 'device']);

/** `--if name[,network=..,mac=..,mtu=..,ip=..,ip=..,binding.K=V,bdf=..,netdev=..,pool=..,device=..,ingress-rate=..,egress-rate=..(+ -burst),default]` */
export function parseInterface(spec: string): WireInterfaceFlag {
  const parts = spec.split(',');
  const out: WireInterfaceFlag = { name: '', ips: [], binding: {} };
  parts.forEach((part, i) => {
    const eq = part.indexOf('=');
    if (eq < 0) {
      if (i === 0) {
        out.name = part;
        return;
      }
      if (part === 'default') {
        out.default_route = true;
        return;
      }
      throw usageError(`--if ${spec}: "${part}" is not key=value`);
    }
    const key = part.slice(0, eq);
    const value = part.slice(eq + 1);
    if (key === 'network') out.network = value;
    else if (key === 'mac') out.mac = value;
    else if (key === 'ip') out.ips.push(value);
    else if (key === 'mtu') {
      if (!/^\d+$/.test(value)) throw invalidArgument(`--if ${spec}: mtu=${value} is not a number`);
      out.mtu = Number(value);
    } else if (key.startsWith('binding.') && key.length > 'binding.'.length) out.binding[key.slice('binding.'.length)] = value;
    else if (DEVICE_KEYS.has(key)) out.device = { ...out.device, [key]: value };
    else if (key in BANDWIDTH_KEYS) {
      if (!/^\d+$/.test(value)) throw invalidArgument(`--if ${spec}: ${key}=${value} is not a number of bits`);
      out.bandwidth = { ...out.bandwidth, [BANDWIDTH_KEYS[key]!]: value };
    }
    else {
      throw usageError(
        `--if ${spec}: unknown key "${key}" (known: network, mac, mtu, ip, binding.<key>, bdf, netdev, pool, device, ingress-rate, ingress-burst, egress-rate, egress-burst, and the flag default)`,
      );
    }
  });
  return out;
}

/** `--pod namespace/name` or `--pod name`. */
export function parsePod(spec: string): { pod_namespace: string; pod_name: string } {
  const parts = spec.split('/');
  if (parts.length === 1 && parts[0]) return { pod_namespace: '', pod_name: parts[0] };
  if (parts.length === 2 && parts[0] && parts[1]) return { pod_namespace: parts[0], pod_name: parts[1] };
  throw usageError(`--pod ${spec}: expected namespace/name`);
}

/** `--port [hostIP:]hostPort:containerPort[/tcp|udp|sctp]` or `containerPort[/proto]`; IPv6 host as [::1]. */
export function parsePort(spec: string): { protocol: string; container_port: number; host_port: number; host_ip: string } {
  const bad = () => usageError(`--port ${spec}: expected [hostIP:]hostPort:containerPort[/tcp|udp|sctp] or containerPort[/proto]`);
  const slash = spec.lastIndexOf('/');
  const protocol = slash < 0 ? 'tcp' : spec.slice(slash + 1).toLowerCase();
  if (!['tcp', 'udp', 'sctp'].includes(protocol)) throw invalidArgument(`--port ${spec}: protocol must be tcp, udp or sctp`);
  let rest = slash < 0 ? spec : spec.slice(0, slash);
  let hostIp = '';
  const v6 = /^\[([^\]]+)\]:(.*)$/.exec(rest);
  if (v6) {
    hostIp = v6[1]!;
    rest = v6[2]!;
  }
  const parts = rest.split(':');
  if (!v6 && parts.length === 3) hostIp = parts.shift()!;
  if (parts.length > 2 || (v6 && parts.length !== 2) || parts.some((p) => !/^\d+$/.test(p))) throw bad();
  const [hostPort, containerPort] = parts.length === 2 ? parts : ['0', parts[0]!];
  return { protocol: protocol.toUpperCase(), container_port: Number(containerPort), host_port: Number(hostPort), host_ip: hostIp };
}

/** Repeated `--label k=v` into a map. */
export function parseKeyValues(flag: string, specs: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const spec of specs) {
    const eq = spec.indexOf('=');
    if (eq <= 0) throw usageError(`--${flag} ${spec}: expected key=value`);
    out[spec.slice(0, eq)] = spec.slice(eq + 1);
  }
  return out;
}

export function parseRuntime(v: string | undefined): string {
  if (v === undefined) return 'RUNTIME_UNSPECIFIED';
  if (!isRuntimeKind(v)) throw invalidArgument(`--runtime ${v}: must be one of ${RUNTIME_CHOICES}`);
  return runtimeWireName(v);
}
