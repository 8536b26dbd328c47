// A CNI result (any spec version this machine's plugins print: 0.3.x, 0.4.0, 1.0.0, 1.1.0) as
// knit's answer: the chain chose the names, MACs, addresses and routes, so its result replaces
// the interface's placeholder from the plan.
import type { AttachResult, ResultInterface, ResultIp, ResultRoute } from '../core/types.js';
import type { InterfacePart } from '../core/interface-plans.js';

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

/** An interface's part of the answer, as its chain made it (the plan only had a placeholder).
 * The network's DNS from knit's config, if any, stays; else the chain's. */
export function chainPart(part: InterfacePart, raw: Record<string, unknown>): InterfacePart {
  const chain = fromCniResult(raw);
  const dns = part.dns ?? chain.dns;
  return { ifname: part.ifname, interfaces: chain.interfaces, ips: chain.ips, routes: chain.routes, ...(dns && { dns }) };
}
