// What a VM guest must configure on its NIC: the same addresses, routes and neighbours a runc
// pod would get on its veth. It is read off the pod-veth plan, so the guest and the pod can
// never disagree about the network; VM strategies that give the guest the pod's addresses
// drop those sandbox-side L3 steps (splitPodL3) and hand the config over instead.
import type { NeighAddOp, RouteOp } from '../../src/base/ops.js';
import type { Step } from '../../src/base/plan.js';
import type { DnsConfig } from '../../src/base/types.js';
import type { GuestConfig, GuestNeighbor, GuestRoute } from '../../src/base/handoff.js';
import type { InterfaceInput, PlannedIp } from '../../src/base/strategy.js';
import { mergeDns } from '../../src/base/dns.js';

const L3_OPS = new Set(['addr.add', 'route.add', 'neigh.add']);

/** Splits a pod-veth plan's steps into the sandbox-side L3 of `podName` and everything else. */
export function splitPodL3(steps: Step[], netns: string, podName: string): { kept: Step[]; l3: Step[] } {
  const kept: Step[] = [];
  const l3: Step[] = [];
  for (const s of steps) {
    const onPod = s.netns === netns && L3_OPS.has(s.do.op) && (s.do as { link?: unknown }).link === podName;
    (onPod ? l3 : kept).push(s);
  }
  return { kept, l3 };
}

/** The guest's resolvers: the request's (the pod's cluster DNS) first, then its network's, as
 * the pod's own result merges them (src/core/interface-plans.ts). Whatever path the attach took
 * (gRPC, CNI ADD, a binding on another CNI's interface, hot-plug), the network's config counts. */
export const guestDns = (input: InterfaceInput): DnsConfig | undefined => mergeDns([input.request.dns, input.network.dns]);

const defaultDst = (family: 4 | 6) => (family === 6 ? '::/0' : '0.0.0.0/0');

/** The guest's L3 from the sandbox-side L3 steps of a pod-veth plan. */
export function guestConfigFrom(
  l3: Step[],
  ips: PlannedIp[],
  nic: { name: string; mac: string; mtu: number; dns?: DnsConfig; delivery: GuestConfig['delivery'] },
): GuestConfig {
  const routes: GuestRoute[] = [];
  const neighbors: GuestNeighbor[] = [];
  for (const s of l3) {
    if (s.do.op === 'route.add') {
      const r = s.do as RouteOp;
      const family = r.dst === 'default' ? (r.family ?? 4) : r.dst.includes(':') ? 6 : 4;
      routes.push({
        dst: r.dst === 'default' ? defaultDst(family) : r.dst,
        ...(r.gateway ? { gateway: r.gateway } : {}),
        ...(r.onlink ? { onlink: true } : {}),
        ...(r.scope === 'link' ? { scope: 'link' as const } : {}),
        ...(r.mtu ? { mtu: r.mtu } : {}),
        ...(r.metric ? { metric: r.metric } : {}),
      });
    } else if (s.do.op === 'neigh.add') {
      const n = s.do as NeighAddOp;
      if (n.lladdr && !n.proxy) neighbors.push({ address: n.address, mac: n.lladdr, state: 'permanent' });
    }
  }
  return {
    name: nic.name,
    mac: nic.mac,
    mtu: nic.mtu,
    ips: ips.map((ip) => ({ address: ip.address, family: ip.family, ...(ip.gateway ? { gateway: ip.gateway } : {}) })),
    routes,
    neighbors,
    ...(nic.dns ? { dns: nic.dns } : {}),
    delivery: nic.delivery,
  };
}
