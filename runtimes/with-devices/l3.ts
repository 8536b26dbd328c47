// A device's addresses and routes. A device is not on a knit network (it is on whatever fabric
// its port is cabled to), so they come from the request: the DRA parameters' addresses and
// routes, the interface's static ips, and pool addresses only when the request names a network
// (src/core/addresses.ts). No default route is invented from a pool's gateway: that gateway
// lives on knit's bridge, which the device is not attached to.
import type { Step } from '../../src/base/plan.js';
import type { ResultRoute } from '../../src/base/types.js';
import type { RouteOp } from '../../src/base/ops.js';
import type { InterfaceInput, PlannedIp } from '../../src/base/strategy.js';
import type { PreparedDevice } from './prepared-device.js';
import { KnitError } from '../../src/base/errors.js';
import { interfaceIndex } from '../common/binding-options.js';
import { familyOfText } from '../../src/ipam/ip.js';

export interface DeviceL3 {
  /** Sandbox-side steps on `link` in the sandbox netns (addresses, then routes). */
  addressSteps: Step[];
  routeSteps: Step[];
  ips: PlannedIp[];
  routes: ResultRoute[];
}

/** Every address the device gets, as CIDRs, in request order without repeats. */
export function deviceAddresses(input: InterfaceInput, d: PreparedDevice): string[] {
  const all = [
    ...input.addresses.map((a) => `${a.address}/${a.prefixLen}`),
    ...d.ref.parameters.addresses,
    // With a network named, core reserved these already (they are in input.addresses).
    ...(input.iface.network ? [] : (input.iface.ips ?? [])),
  ];
  return [...new Set(all)];
}

export function deviceL3(input: InterfaceInput, d: PreparedDevice, link: string): DeviceL3 {
  const ns = input.netnsPath;
  const out: DeviceL3 = { addressSteps: [], routeSteps: [], ips: [], routes: [] };
  for (const cidr of deviceAddresses(input, d)) {
    const family = familyOfText(cidr);
    out.addressSteps.push({
      description: `address ${cidr} on ${link}`,
      netns: ns,
      do: { op: 'addr.add', link, address: cidr, noDad: family === 6 },
    });
    out.ips.push({ address: cidr, family, interface: 0 });
  }
  d.ref.parameters.routes.forEach((r, j) => {
    if (r.dst === 'default' && input.defaultRoute === false) {
      throw KnitError.invalid(
        `interfaces[${interfaceIndex(input)}].device.parameters.routes[${j}].dst`,
        "a default route comes from the sandbox's default interface only; mark this interface default_route instead",
      );
    }
    const family = r.dst === 'default' ? familyOfText(r.gw!) : familyOfText(r.dst);
    const op: RouteOp = { op: 'route.add', dst: r.dst, family, link };
    if (r.gw) op.gateway = r.gw;
    if (r.mtu) op.mtu = r.mtu;
    out.routeSteps.push({ description: `route ${r.dst}${r.gw ? ` via ${r.gw}` : ''} on ${link}`, netns: ns, do: op });
    const dst = r.dst === 'default' ? (family === 6 ? '::/0' : '0.0.0.0/0') : r.dst;
    out.routes.push({ dst, ...(r.gw ? { gw: r.gw } : {}), ...(r.mtu ? { mtu: r.mtu } : {}) });
  });
  return out;
}
