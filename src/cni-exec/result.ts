// A CNI result (any spec version this machine's plugins print: 0.3.x, 0.4.0, 1.0.0, 1.1.0) as
// knit's answer: the chain chose the names, MACs, addresses and routes, so its result replaces
// the interface's placeholder from the plan.
import type { AttachResult, DnsConfig, ResultInterface, ResultIp, ResultRoute } from '../base/types.js';
import { mergeDns } from '../base/dns.js';
import type { InterfacePart } from '../base/strategy.js';
import { podIpsOn, type Handoff } from '../base/handoff.js';

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

/** An interface's part of the answer, as its chain made it: the chain's interfaces take the
 * placeholder's place (a VM runtime's tap and bridge stay beside them), and the hand-offs
 * built on the chain's veth get its MAC and, where the guest takes the pod's addresses (Kata
 * tcfilter, KubeVirt tap), its addresses and routes. The network's DNS from knit's config, if
 * any, stays; else the chain's, for the pod and for the guest. */
export function chainPart(part: InterfacePart, raw: Record<string, unknown>, placeholderMac = 'cni:mac'): InterfacePart {
  const chain = fromCniResult(raw);
  const at = Math.max(0, part.interfaces.findIndex((i) => i.kind === 'cni' && i.name === part.ifname));
  const podIf = chain.interfaces.find((i) => i.sandbox && i.name === part.ifname);
  const podIps = chain.ips.filter((ip) => chain.interfaces[ip.interface] === podIf);
  const others = [...part.interfaces.slice(0, at), ...part.interfaces.slice(at + 1)].map((i) =>
    i.handoff ? { ...i, handoff: completeHandoff(i.handoff, podIf?.mac, placeholderMac, podIps, chain.routes, part.dns ? undefined : chain.dns) } : i,
  );
  const interfaces = [...others.slice(0, at), ...chain.interfaces, ...others.slice(at)];
  const shift = chain.interfaces.length - 1;
  const ips = [
    ...part.ips.map((ip) => (ip.interface > at ? { ...ip, interface: ip.interface + shift } : ip)),
    ...chain.ips.map((ip) => ({ ...ip, interface: ip.interface + at })),
  ];
  const dns = part.dns ?? chain.dns;
  const chainRoutes = part.dropsChainDefaultRoutes ? chain.routes.filter((r) => !isDefaultRoute(r.dst)) : chain.routes;
  return { ...part, interfaces, ips, routes: [...part.routes, ...chainRoutes], ...(dns && { dns }) };
}

const isDefaultRoute = (dst: string) => dst === '0.0.0.0/0' || dst === '::/0';

function completeHandoff(handoff: Handoff, mac: string | undefined, placeholder: string, ips: ResultIp[], routes: ResultRoute[], chainDns: DnsConfig | undefined): Handoff {
  const text = JSON.stringify(handoff);
  const out = JSON.parse(mac ? text.split(placeholder).join(mac) : text) as Handoff;
  // The guest resolves as the pod does: the chain's DNS when knit's config gives the network none.
  if (chainDns && 'guest' in out) {
    const dns = mergeDns([out.guest.dns, chainDns]);
    if (dns) out.guest.dns = dns;
  }
  if (podIpsOn(out) === 'pod+guest' && 'guest' in out) {
    out.guest.ips = ips.map((ip) => ({ address: ip.address, family: ip.family, ...(ip.gateway && { gateway: ip.gateway }) }));
    // A CNI route without gw uses the gateway of its family's address (CNI spec, Routes).
    const gatewayOf = (dst: string) => ips.find((ip) => ip.family === (dst.includes(':') ? 6 : 4))?.gateway;
    out.guest.routes = routes.map((r) => {
      const gateway = r.gw ?? gatewayOf(r.dst);
      return { dst: r.dst, ...(gateway && { gateway }), ...(r.mtu && { mtu: r.mtu }) };
    });
  }
  return out;
}
