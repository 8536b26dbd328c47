// A sandbox's plan and result, built one interface at a time. Each interface's steps carry its
// name and its share of the result is kept apart (a "part"), so an interface can be added to a
// running sandbox, or taken out of it, without rebuilding the others. With several networks,
// only one interface carries the default route: the one the request marks, else the first
// (what Multus does with its cluster-default network).
import type { InterfaceInput, NetworkSpec, PrepareContext, Strategy, InterfacePart } from '../base/strategy.js';
import type { Step } from '../base/plan.js';
import type { InterfaceAllocation } from './record.js';
import type { AttachRequest, AttachResult, InterfaceRequest } from '../base/types.js';
import { mergeDns } from '../base/dns.js';
import { KnitError } from '../base/errors.js';

/** Index of the interface that gives the sandbox its default route. */
export function defaultRouteIndex(interfaces: InterfaceRequest[], field = 'interfaces'): number {
  const marked = interfaces.flatMap((ifc, i) => (ifc.defaultRoute ? [i] : []));
  if (marked.length > 1) {
    throw KnitError.invalid(`${field}[${marked[1]}].default_route`, `only one interface carries the default route, and ${field}[${marked[0]}] already does`);
  }
  return marked[0] ?? 0;
}

/** Plans the interfaces at `indices` of `req`: their steps (tagged with the interface name)
 * and their parts. `allocations`, `networks` and `slots` run parallel to `indices`; without
 * slots, an interface's slot is its index. */
export async function planInterfaces(
  strategy: Strategy,
  req: AttachRequest,
  indices: number[],
  networks: NetworkSpec[],
  allocations: InterfaceAllocation[],
  ctx: PrepareContext,
  defaultIndex: number,
  slots: number[] = indices,
): Promise<{ steps: Step[]; parts: InterfacePart[] }> {
  const steps: Step[] = [];
  const parts: InterfacePart[] = [];
  for (const [k, i] of indices.entries()) {
    const iface = req.interfaces[i];
    const input: InterfaceInput = {
      sandboxId: req.sandboxId, netnsPath: req.netnsPath, request: req, iface, network: networks[k], addresses: allocations[k].addresses,
      defaultRoute: i === defaultIndex,
      slot: slots[k],
      ...(ctx.danDir !== undefined && { danDir: ctx.danDir }),
    };
    if (strategy.prepare) input.prepared = await strategy.prepare(input, ctx);
    const plan = strategy.planInterface(input);
    steps.push(...plan.steps.map((s) => ({ ...s, iface: iface.name })));
    parts.push({
      ifname: iface.name, interfaces: plan.interfaces, ips: plan.ips, routes: plan.routes, slot: slots[k],
      ...(networks[k].dns ? { dns: networks[k].dns } : {}), ...(plan.dropsChainDefaultRoutes && { dropsChainDefaultRoutes: true }),
    });
  }
  return { steps, parts };
}

/** The sandbox's result: every part's interfaces, addresses and routes in request order, and
 * one DNS config merged from the request's and the networks'. */
export function composeResult(req: AttachRequest, parts: InterfacePart[], defaultIfname?: string): AttachResult {
  const result: AttachResult = { sandboxId: req.sandboxId, netnsPath: req.netnsPath, runtime: req.runtime, interfaces: [], ips: [], routes: [] };
  for (const part of parts) {
    const offset = result.interfaces.length;
    result.interfaces.push(...part.interfaces);
    result.ips.push(...part.ips.map((ip) => ({ ...ip, interface: ip.interface + offset })));
    result.routes.push(...part.routes);
  }
  // The default network's resolvers answer first: its DNS is the pod's cluster DNS.
  const byDefault = [...parts].sort((a, b) => Number(b.ifname === defaultIfname) - Number(a.ifname === defaultIfname));
  const dns = mergeDns([req.dns, ...byDefault.map((p) => p.dns)]);
  if (dns) result.dns = dns;
  return result;
}

/** The lowest device slot no part holds (a part without one holds its position). */
export function freeSlot(parts: InterfacePart[]): number {
  const used = new Set(parts.map((p, k) => p.slot ?? k));
  let n = 0;
  while (used.has(n)) n++;
  return n;
}
