// Compares the plans with what the kernel holds and answers the changes: only differences, so
// a restarted knit adopts what its predecessor made (nothing is flushed and re-added, no
// route flaps) and `ip monitor route` shows nothing for a route that did not change.
// knit's routes are known by their protocol (ROUTE_PROTOCOL); of those, a routed pod's host
// route (no gateway, not a blackhole) belongs to its sandbox's plan and is never touched here.
import type { FdbInfo, LinkInfo, NeighInfo, Op, RouteInfo } from '../base/ops.js';
import { ROUTE_PROTOCOL } from '../base/names.js';
import type { NetworkPlan, WantRoute } from './plan.js';

export interface KernelView {
  routes: RouteInfo[];
  links: LinkInfo[];
  /** Per VTEP name: its neighbour and FDB entries. */
  neighs: Map<string, NeighInfo[]>;
  fdb: Map<string, FdbInfo[]>;
}

/** A cluster route of knit's: its protocol, and a blackhole or a gateway. */
export function isClusterRoute(r: RouteInfo): boolean {
  return r.protocol === String(ROUTE_PROTOCOL) && (r.type === 'blackhole' || r.gateway !== undefined);
}

const routeKey = (r: { dst: string; type?: string }) => `${r.dst} ${r.type === 'blackhole' ? 'blackhole' : 'unicast'}`;

function sameRoute(want: WantRoute, have: RouteInfo, index: (name: string) => number | undefined): boolean {
  if (want.type === 'blackhole') return have.type === 'blackhole' && (have.metric ?? 0) === want.metric;
  return have.type === 'unicast' && have.gateway === want.gateway && have.index === index(want.link!) && !!have.onlink === !!want.onlink;
}

function routeOp(r: WantRoute): Op {
  return {
    op: 'route.replace', dst: r.dst, family: r.family, protocol: ROUTE_PROTOCOL,
    ...(r.type && { type: r.type }), ...(r.gateway && { gateway: r.gateway }), ...(r.link && { link: r.link }),
    ...(r.onlink && { onlink: true }), ...(r.metric !== undefined && { metric: r.metric }),
  };
}

export interface Reconciliation {
  /** In order: devices' entries (FDB, neighbours) before the routes through them, removals last. */
  ops: Op[];
  /** Human-readable differences, as `knit check --node` shows them. */
  differences: string[];
}

/** The changes that turn the kernel into the plans (VTEP links themselves are made apart). */
export function reconcile(plans: NetworkPlan[], kernel: KernelView): Reconciliation {
  const ops: Op[] = [];
  const differences: string[] = [];
  const byName = new Map(kernel.links.map((l) => [l.name, l.index]));
  const index = (name: string) => byName.get(name);
  const nameOf = new Map(kernel.links.map((l) => [l.index, l.name]));

  for (const plan of plans) {
    const vtep = plan.vtep?.name;
    if (!vtep) continue;
    const fdb = kernel.fdb.get(vtep) ?? [];
    const fdbByMac = new Map(fdb.map((e) => [e.mac, e]));
    const wantedMacs = new Set(plan.fdb.map((w) => w.mac));
    for (const want of plan.fdb) {
      const have = fdbByMac.get(want.mac);
      if (have?.dst === want.dst && have.state.includes('permanent')) continue;
      differences.push(have ? `fdb ${want.mac} on ${vtep} goes to ${have.dst ?? 'nowhere'}, should go to ${want.dst}` : `fdb ${want.mac} dst ${want.dst} on ${vtep} is missing`);
      ops.push({ op: 'fdb.replace', link: vtep, mac: want.mac, dst: want.dst });
    }
    for (const have of fdb) {
      if (!have.dst || !have.self || wantedMacs.has(have.mac)) continue;
      differences.push(`fdb ${have.mac} dst ${have.dst} on ${vtep} belongs to no node`);
      ops.push({ op: 'fdb.del', link: vtep, mac: have.mac, dst: have.dst, ignoreMissing: true });
    }
    const neighs = (kernel.neighs.get(vtep) ?? []).filter((n) => !n.proxy && n.state.includes('permanent'));
    const neighByAddress = new Map(neighs.map((n) => [n.address, n]));
    const wantedNeighs = new Set(plan.neighs.map((w) => w.address));
    for (const want of plan.neighs) {
      const have = neighByAddress.get(want.address);
      if (have?.lladdr === want.lladdr) continue;
      differences.push(have ? `neighbour ${want.address} on ${vtep} is ${have.lladdr}, should be ${want.lladdr}` : `neighbour ${want.address} on ${vtep} is missing`);
      ops.push({ op: 'neigh.replace', link: vtep, address: want.address, lladdr: want.lladdr });
    }
    for (const have of neighs) {
      if (wantedNeighs.has(have.address)) continue;
      differences.push(`neighbour ${have.address} on ${vtep} belongs to no node`);
      ops.push({ op: 'neigh.del', link: vtep, address: have.address, ignoreMissing: true });
    }
  }

  const wanted = new Map<string, WantRoute>();
  for (const plan of plans) for (const r of plan.routes) wanted.set(routeKey(r), r);
  const owned = kernel.routes.filter(isClusterRoute);
  const ownedByKey = new Map(owned.map((r) => [routeKey(r), r]));
  // Routes of other owners by destination, for the slot check below (one pass, not one per want).
  const othersByDst = new Map<string, RouteInfo[]>();
  for (const r of kernel.routes) {
    if (r.protocol === String(ROUTE_PROTOCOL)) continue;
    const list = othersByDst.get(r.dst);
    if (list) list.push(r);
    else othersByDst.set(r.dst, [r]);
  }
  for (const [key, want] of wanted) {
    const have = ownedByKey.get(key);
    if (have && sameRoute(want, have, index)) continue;
    const what = want.type === 'blackhole' ? `blackhole ${want.dst}` : `route ${want.dst} via ${want.gateway} dev ${want.link}`;
    // A replace would take over another owner's route in the same slot (dst, metric): leave it.
    const slotMetric = want.metric ?? (want.family === 6 ? 1024 : 0);
    const foreign = !have && othersByDst.get(want.dst)?.find((r) => (r.metric ?? 0) === slotMetric);
    if (foreign) {
      differences.push(`${what}: a route of another owner (protocol ${foreign.protocol}) holds that destination; knit leaves it`);
      continue;
    }
    differences.push(have ? `${what}: the kernel has ${have.type} ${have.dst}${have.gateway ? ` via ${have.gateway}` : ''}${have.index ? ` dev ${nameOf.get(have.index) ?? have.index}` : ''}` : `${what} is missing`);
    ops.push(routeOp(want));
  }
  for (const have of owned) {
    if (wanted.has(routeKey(have))) continue;
    differences.push(`route ${have.type === 'blackhole' ? 'blackhole ' : ''}${have.dst}${have.gateway ? ` via ${have.gateway}` : ''} (protocol ${ROUTE_PROTOCOL}) belongs to no node`);
    ops.push({
      op: 'route.del', dst: have.dst, family: have.family, protocol: ROUTE_PROTOCOL, ignoreMissing: true,
      ...(have.type === 'blackhole' ? { type: 'blackhole' as const } : { gateway: have.gateway }),
      ...(have.metric !== undefined && { metric: have.metric }),
    });
  }
  return { ops, differences };
}

/** Marks each peer whose routes the kernel now holds as planned. */
export function peersInPlace(plan: NetworkPlan, kernel: KernelView): NetworkPlan['peers'] {
  const byName = new Map(kernel.links.map((l) => [l.name, l.index]));
  const index = (n: string) => byName.get(n);
  const ownedByKey = new Map(kernel.routes.filter(isClusterRoute).map((r) => [routeKey(r), r]));
  const unicastDsts = new Set(kernel.routes.filter((r) => r.type === 'unicast').map((r) => r.dst));
  return plan.peers.map((p) => {
    if (!p.routes.length) {
      // crossNode none: a route to the peer's block from anyone (a BGP speaker) counts.
      const any = p.subnets.length > 0 && !p.problem && p.subnets.every((s) => unicastDsts.has(s));
      return { ...p, inPlace: any };
    }
    const inPlace = !p.problem && p.routes.every((w) => {
      const have = ownedByKey.get(routeKey(w));
      return !!have && sameRoute(w, have, index);
    });
    return { ...p, inPlace };
  });
}
