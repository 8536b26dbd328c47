// Addresses for one interface: static ones from the request are reserved, the rest come from
// the network's pools, one per family the network has.
import type { InterfaceRequest } from '../base/types.js';
import type { NetworkSpec, Allocation } from '../base/strategy.js';
import type { IpamPort } from './ports.js';
import { ipamOwner, type InterfaceAllocation } from './record.js';
import { KnitError } from '../base/errors.js';
import { cidrContains, formatIp, tryParseCidr, tryParseIp } from '../ipam/index.js';

/** A device (SR-IOV VF, NIC) is not on a knit network: it takes pool addresses only when the
 * request names a network; otherwise its addresses are the request's own (runtimes/with-devices).
 * A CNI network's addresses come from its chain's IPAM plugin (static ones as the "ips"
 * capability), never from knit's pools. */
const takesNoPoolAddresses = (iface: InterfaceRequest, net: NetworkSpec) =>
  (iface.device !== undefined && !iface.network) || net.mode === 'cni' || builtOnForeignPodInterface(iface);
/** KubeVirt's binding CNI after the network's own (runtimes/with-pod-interface-bindings): the
 * pod interface and its addresses are that network's, whoever made it (another CNI, or knit). */
const builtOnForeignPodInterface = (iface: InterfaceRequest) => iface.binding?.logicNetwork !== undefined;

export function allocateInterface(ipam: IpamPort, sandboxId: string, iface: InterfaceRequest, i: number, net: NetworkSpec): InterfaceAllocation {
  const owner = ipamOwner(sandboxId, iface.name);
  if (takesNoPoolAddresses(iface, net)) return { ifname: iface.name, network: net.name, addresses: [], static: true };
  if (iface.ips?.length) {
    const addresses = staticAddresses(ipam, owner, iface, i, net);
    try {
      for (const a of addresses) ipam.reserve(net.name, a.address, owner);
    } catch (err) {
      ipam.release(owner);
      throw err;
    }
    return { ifname: iface.name, network: net.name, addresses, static: true };
  }
  const addresses: Allocation[] = [];
  try {
    for (const family of [4, 6] as const) {
      if (!(family === 4 ? net.ipv4 : net.ipv6)) continue;
      const a = ipam.allocate(net.name, family, owner);
      addresses.push({ family, address: a.address, prefixLen: a.prefixLen, gateway: a.gateway });
    }
  } catch (err) {
    ipam.release(owner);
    throw err;
  }
  return { ifname: iface.name, network: net.name, addresses, static: false };
}

/** The addresses allocateInterface would take now, taking none; static ones are refused
 * exactly as allocateInterface refuses them, so a plan answers OK only for what attach takes. */
export function previewInterface(ipam: IpamPort, sandboxId: string, iface: InterfaceRequest, i: number, net: NetworkSpec): InterfaceAllocation {
  const owner = ipamOwner(sandboxId, iface.name);
  if (takesNoPoolAddresses(iface, net)) return { ifname: iface.name, network: net.name, addresses: [], static: true };
  if (iface.ips?.length) return { ifname: iface.name, network: net.name, addresses: staticAddresses(ipam, owner, iface, i, net), static: true };
  const addresses = ([4, 6] as const).filter((f) => (f === 4 ? net.ipv4 : net.ipv6)).map((f) => {
    const a = ipam.preview(net.name, f, owner);
    return { family: f, address: a.address, prefixLen: a.prefixLen, gateway: a.gateway };
  });
  return { ifname: iface.name, network: net.name, addresses, static: false };
}

/**
 * The request's static addresses on the network, each checked as the pool would reserve it
 * (inside the subnet, not the gateway, free) and, on a bridge network, with the gateway on-link:
 * the sandbox's routes go through it, and from 10.0.0.5/32 the kernel refuses them (ENETUNREACH).
 * Holds nothing. Errors name interfaces[i].ips[j].
 */
function staticAddresses(ipam: IpamPort, owner: string, iface: InterfaceRequest, i: number, net: NetworkSpec): Allocation[] {
  return (iface.ips ?? []).map((cidr, j) => {
    const field = `interfaces[${i}].ips[${j}]`;
    const [address, len] = cidr.split('/');
    const family = address.includes(':') ? 6 : 4;
    const gateway = (family === 4 ? net.ipv4 : net.ipv6)?.gateway;
    try {
      ipam.checkReserve(net.name, address, owner);
    } catch (err) {
      if (err instanceof KnitError && (err.code === 'INVALID_ARGUMENT' || err.code === 'ALREADY_EXISTS')) {
        const why = err.details.field && err.message.startsWith(`${err.details.field}: `) ? err.message.slice(err.details.field.length + 2) : err.message;
        throw new KnitError(err.code, `${field}: ${why}`, { ...err.details, field });
      }
      throw err;
    }
    const on = tryParseCidr(cidr);
    const gw = gateway ? tryParseIp(gateway) : undefined;
    if (net.mode === 'bridge' && on && gw && !cidrContains(on, gw)) {
      const subnetLen = (family === 4 ? net.ipv4 : net.ipv6)?.subnet.split('/')[1];
      throw KnitError.invalid(field, `${cidr} does not reach the gateway ${gateway} of network "${net.name}" on its link, so no route through it can be added; give the subnet's prefix (/${subnetLen})`);
    }
    return { family, address: tryParseIp(address) ? formatIp(tryParseIp(address)!) : address, prefixLen: Number(len), gateway };
  });
}

export function releaseInterfaces(ipam: IpamPort, sandboxId: string, allocations: InterfaceAllocation[]): void {
  for (const a of allocations) ipam.release(ipamOwner(sandboxId, a.ifname));
}

/** At start-up: the records are the truth, IPAM is rebuilt from them. */
export function reserveFromRecord(ipam: IpamPort, sandboxId: string, allocations: InterfaceAllocation[]): void {
  for (const a of allocations) for (const addr of a.addresses) ipam.reserve(a.network, addr.address, ipamOwner(sandboxId, a.ifname));
}
