// A CNI result (any spec version this machine's plugins print: 0.3.x, 0.4.0, 1.0.0, 1.1.0) as
// knit's answer: the chain chose the names, MACs, addresses and routes, so its result replaces
// the interface's placeholder from the plan.
import type { AttachResult, ResultInterface, ResultIp, ResultRoute } from '../core/types.js';

interface CniIp { address: string; gateway?: string; interface?: number; version?: string }
interface CniInterface { name: string; mac?: string; mtu?: number; sandbox?: string; socketPath?: string; pciID?: string }
interface CniRoute { dst: string; gw?: string; mtu?: number; priority?: number; table?: number; scope?: number }
interface CniDns { nameservers?: string[]; domain?: string; search?: string[]; options?: string[] }

export function fromCniResult(raw: Record<string, unknown>): Pick<AttachResult, 'interfaces' | 'ips' | 'routes' | 'dns'> {
  const ifaces = (raw.interfaces as CniInterface[] | undefined) ?? [];
  const interfaces: ResultInterface[] = ifaces.map((c) => ({
    name: c.name,
    kind: 'cni',
    ...(c.mac && { mac: c.mac }),
    ...(c.mtu && { mtu: c.mtu }),
    ...(c.sandbox && { sandbox: c.sandbox }),
    ...(c.socketPath && { socketPath: c.socketPath }),
    ...(c.pciID && { pciId: c.pciID }),
  }));
  const firstInSandbox = Math.max(0, ifaces.findIndex((c) => c.sandbox));
  const ips: ResultIp[] = ((raw.ips as CniIp[] | undefined) ?? []).map((ip) => ({
    address: ip.address,
    ...(ip.gateway && { gateway: ip.gateway }),
    family: ip.address.includes(':') ? 6 : 4,
    interface: ip.interface ?? firstInSandbox,
  }));
  const routes: ResultRoute[] = ((raw.routes as CniRoute[] | undefined) ?? []).map((r) => ({ ...r, dst: r.dst }));
  const d = raw.dns as CniDns | undefined;
  const dns = d?.nameservers?.length ? { nameservers: d.nameservers, search: d.search ?? [], options: d.options ?? [], ...(d.domain && { domain: d.domain }) } : undefined;
  return { interfaces, ips, routes, dns };
}

/** The attach result with the placeholder of `ifName` (kind "cni") replaced by the chain's
 * interfaces, addresses and routes; indices of the other interfaces' addresses move along. */
export function mergeChainResult(result: AttachResult, ifName: string, raw: Record<string, unknown>): AttachResult {
  const at = result.interfaces.findIndex((i) => i.kind === 'cni' && i.name === ifName && !i.hostName);
  if (at < 0) return result;
  const chain = fromCniResult(raw);
  const shift = chain.interfaces.length - 1;
  return {
    ...result,
    interfaces: [...result.interfaces.slice(0, at), ...chain.interfaces, ...result.interfaces.slice(at + 1)],
    ips: [
      ...result.ips.map((ip) => (ip.interface > at ? { ...ip, interface: ip.interface + shift } : ip)),
      ...chain.ips.map((ip) => ({ ...ip, interface: ip.interface + at })),
    ],
    routes: [...result.routes, ...chain.routes],
    dns: result.dns ?? chain.dns,
  };
}
