// A sandbox's result cut down to some of its interfaces: what one CNI ADD answers (that
// interface's part), or what the ADD of a pod's primary interface answers when knit attached
// the pod's other networks with it (the primary's part and the DRA devices that came with it).
import type { AttachRequest, AttachResult } from '../base/types.js';
import { draInterfaceNames } from '../dra/labels.js';
import { guestName } from '../base/handoff.js';
import { cidrContains, tryParseCidr, tryParseIp } from '../ipam/ip.js';

/** Whether a result interface is the one a CNI_IFNAME names: the pod-side device of that
 * name, or the tap whose guest NIC has it. */
const names = (i: AttachResult['interfaces'][number], ifname: string) => (i.sandbox && i.name === ifname) || guestName(i.handoff) === ifname;

/** A route through a gateway belongs to the interfaces whose addresses name it as their
 * gateway (a routed pod's link-local one) or whose subnet holds it; one without a gateway to
 * every interface (CNI: it goes through its family's gateway). */
function routeOf(route: AttachResult['routes'][number], ips: AttachResult['ips']): boolean {
  if (!route.gw) return true;
  const gw = tryParseIp(route.gw);
  return ips.some((ip) => {
    if (ip.gateway === route.gw) return true;
    const cidr = tryParseCidr(ip.address);
    return !!cidr && !!gw && cidrContains(cidr, gw);
  });
}

/**
 * The part of a sandbox's result that is about the interfaces `ifnames` name: each one's
 * pod-side interface and the host device just before it (veth host end), their addresses
 * re-indexed, the routes through their gateways. A result with at most one pod-side interface
 * is answered whole.
 */
export function pick(r: AttachResult, ifnames: Iterable<string>): AttachResult {
  if (r.interfaces.filter((i) => i.sandbox || guestName(i.handoff)).length <= 1) return r;
  const keep: number[] = [];
  for (const ifname of ifnames) {
    const pod = r.interfaces.findIndex((i) => names(i, ifname));
    if (pod < 0) continue;
    if (pod > 0 && !r.interfaces[pod - 1]!.sandbox && !guestName(r.interfaces[pod - 1]!.handoff)) keep.push(pod - 1);
    keep.push(pod);
  }
  if (!keep.length) return r;
  keep.sort((a, b) => a - b);
  const index = new Map(keep.map((k, n) => [k, n]));
  const ips = r.ips.filter((ip) => index.has(ip.interface));
  return {
    ...r,
    interfaces: keep.map((k) => r.interfaces[k]!),
    ips: ips.map((ip) => ({ ...ip, interface: index.get(ip.interface)! })),
    routes: r.routes.filter((route) => routeOf(route, ips)),
  };
}

/** The part of a sandbox's result that is about one CNI_IFNAME. */
export const only = (r: AttachResult, ifname: string): AttachResult => pick(r, [ifname]);

/** What the ADD of a sandbox's first interface answers: its own part, and the pod's DRA devices,
 * which came with it. The networks of the pod's annotation are not in it, as Multus answers the
 * cluster network's result alone. */
export function primaryAnswer(result: AttachResult, req: AttachRequest): AttachResult {
  return pick(result, [req.interfaces[0]!.name, ...draInterfaceNames(req.labels)]);
}
