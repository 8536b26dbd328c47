// Addresses for one interface: static ones from the request are reserved, the rest come from
// the network's pools, one per family the network has.
import type { InterfaceRequest } from '../base/types.js';
import type { NetworkSpec, Allocation } from '../base/strategy.js';
import type { IpamPort } from './ports.js';
import { ipamOwner, type InterfaceAllocation } from './record.js';
import { KnitError } from '../base/errors.js';

/** A device (SR-IOV VF, NIC) is not on a knit network: it takes pool addresses only when the
 * request names a network; otherwise its addresses are the request's own (runtimes/with-devices).
 * A CNI network's addresses come from its chain's IPAM plugin (static ones as the "ips"
 * capability), never from knit's pools. */
const takesNoPoolAddresses = (iface: InterfaceRequest, net: NetworkSpec) => (iface.device !== undefined && !iface.network) || net.mode === 'cni';

export function allocateInterface(ipam: IpamPort, sandboxId: string, iface: InterfaceRequest, i: number, net: NetworkSpec): InterfaceAllocation {
  const owner = ipamOwner(sandboxId, iface.name);
  if (takesNoPoolAddresses(iface, net)) return { ifname: iface.name, network: net.name, addresses: [], static: true };
  const addresses: Allocation[] = [];
  try {
    if (iface.ips?.length) {
      iface.ips.forEach((cidr, j) => {
        const [address, len] = cidr.split('/');
        const family = address.includes(':') ? 6 : 4;
        const pool = family === 4 ? net.ipv4 : net.ipv6;
        let held;
        try {
          held = ipam.reserve(net.name, address, owner);
        } catch (err) {
          if (err instanceof KnitError && err.code === 'INVALID_ARGUMENT') throw KnitError.invalid(`interfaces[${i}].ips[${j}]`, err.message);
          throw err;
        }
        addresses.push({ family, address: held.address, prefixLen: Number(len), gateway: pool?.gateway });
      });
      return { ifname: iface.name, network: net.name, addresses, static: true };
    }
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

/** The addresses allocateInterface would take now, taking none. */
export function previewInterface(ipam: IpamPort, sandboxId: string, iface: InterfaceRequest, net: NetworkSpec): InterfaceAllocation {
  const owner = ipamOwner(sandboxId, iface.name);
  if (takesNoPoolAddresses(iface, net)) return { ifname: iface.name, network: net.name, addresses: [], static: true };
  const addresses: Allocation[] = iface.ips?.length
    ? iface.ips.map((cidr) => {
        const [address, len] = cidr.split('/');
        const family = address.includes(':') ? 6 : 4;
        return { family, address, prefixLen: Number(len), gateway: (family === 4 ? net.ipv4 : net.ipv6)?.gateway };
      })
    : ([4, 6] as const).filter((f) => (f === 4 ? net.ipv4 : net.ipv6)).map((f) => {
        const a = ipam.preview(net.name, f, owner);
        return { family: f, address: a.address, prefixLen: a.prefixLen, gateway: a.gateway };
      });
  return { ifname: iface.name, network: net.name, addresses, static: !!iface.ips?.length };
}

export function releaseInterfaces(ipam: IpamPort, sandboxId: string, allocations: InterfaceAllocation[]): void {
  for (const a of allocations) ipam.release(ipamOwner(sandboxId, a.ifname));
}

/** At start-up: the records are the truth, IPAM is rebuilt from them. */
export function reserveFromRecord(ipam: IpamPort, sandboxId: string, allocations: InterfaceAllocation[]): void {
  for (const a of allocations) for (const addr of a.addresses) ipam.reserve(a.network, addr.address, ipamOwner(sandboxId, a.ifname));
}
