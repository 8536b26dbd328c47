// What the kernel of this node should hold so its pods reach every other node's pods: pure,
// from the networks, the cluster view and the host's addresses. The reconciler
// (src/cluster/reconcile.ts) compares it with what the kernel holds.
//
//  - always: the node's own block as a blackhole behind the pods' routes (BLOCK_ROUTE_METRIC),
//    with knit's route protocol, for a BGP speaker to export;
//  - never: anything for a peer src/cluster/refusals.ts refuses (its block overlaps this node's
//    or an older Node's, or its address is this node's): reported with why, whatever the mode;
//  - routes: `<peer podCIDR> via <peer InternalIP>` when that address is on one of this node's
//    links (flannel host-gw, kindnet); a peer that is not is reported, not routed;
//  - vxlan: flannel's scheme: per peer `<podCIDR> via <podCIDR's first address> dev VTEP onlink`,
//    that address's permanent neighbour entry with the peer VTEP's MAC, and an FDB entry sending
//    that MAC to the peer's InternalIP.
import type { NetworkConfig } from '../config/index.js';
import type { AddrInfo } from '../base/ops.js';
import { BLOCK_ROUTE_METRIC, vtepMac } from '../base/names.js';
import { cidrContains, familyOfText, formatIp, parseCidr, tryParseCidr, tryParseIp, type IpFamily } from '../ipam/ip.js';
import { podCidrOf, underlayIp } from './node-networks.js';
import type { PeerRefusal } from './refusals.js';
import type { ClusterNode, PeerStatus } from './types.js';

export interface WantRoute {
  dst: string;
  family: IpFamily;
  type?: 'blackhole';
  gateway?: string;
  link?: string;
  onlink?: boolean;
  metric?: number;
}
export interface WantNeigh { link: string; address: string; lladdr: string }
export interface WantFdb { link: string; mac: string; dst: string }
export interface WantVtep { network: string; name: string; vni: number; port: number; local: string; dev: string; mac: string; mtu: number; address?: string }

export interface NetworkPlan {
  network: string;
  routes: WantRoute[];
  neighs: WantNeigh[];
  fdb: WantFdb[];
  vtep?: WantVtep;
  /** Devices that must forward: the bridge, the uplinks, the VTEP. */
  forwarding: string[];
  /** Per peer, with the routes that make it reachable (for inPlace). */
  peers: (PeerStatus & { routes: WantRoute[] })[];
  /** Why the network as a whole cannot reach its peers (its node address is on no link). */
  problem?: string;
}

/** Where an address is on-link: the host link holding an address whose prefix contains it.
 * The host's prefixes are parsed once per plan, not once per peer (a plan covers every node
 * of the cluster, and the parse is bigint arithmetic). */
function onLinkResolver(addrs: AddrInfo[], names: Map<number, string>): (ip: string) => string | undefined {
  const prefixes = addrs.flatMap((a) => {
    if (a.scope !== 'global') return [];
    const subnet = tryParseCidr(`${a.address}/${a.prefixLen}`);
    return subnet ? [{ subnet, link: names.get(a.index) }] : [];
  });
  return (ip) => {
    const target = tryParseIp(ip);
    return target && prefixes.find((p) => cidrContains(p.subnet, target))?.link;
  };
}

export interface PlanInput {
  net: NetworkConfig;
  self: ClusterNode | undefined;
  nodes: ClusterNode[];
  addrs: AddrInfo[];
  /** ifindex → name of the host's links. */
  linkNames: Map<number, string>;
  /** The links the host's default routes leave by: replies to masqueraded traffic come back on them. */
  defaultLinks?: string[];
  /** Peers not to route, by name, and why (refusedPeers). */
  refused?: ReadonlyMap<string, PeerRefusal>;
}

/** The plan of one network; its peers in name order. */
export function planNetwork(o: PlanInput): NetworkPlan {
  const plan = planOf(o);
  plan.peers.sort((a, b) => a.node.localeCompare(b.node));
  return plan;
}

function planOf(o: PlanInput): NetworkPlan {
  const { net, self } = o;
  const plan: NetworkPlan = { network: net.name, routes: [], neighs: [], fdb: [], forwarding: [], peers: [] };
  const own = [net.ipv4?.subnet, net.ipv6?.subnet].filter((s): s is string => !!s);
  for (const dst of own) plan.routes.push({ dst, family: familyOfText(dst), type: 'blackhole', metric: BLOCK_ROUTE_METRIC });
  if (net.mode === 'bridge' && net.bridge) plan.forwarding.push(net.bridge);
  const families = (net.nodeSubnet ?? []) as IpFamily[];
  const subnetsOf = (n: ClusterNode) => families.map((f) => podCidrOf(n, f)).filter((c): c is string => !!c);
  // A refused peer gets nothing in any mode: only its status, saying why.
  const peers: ClusterNode[] = [];
  for (const n of o.nodes) {
    if (n.name === self?.name) continue;
    const refusal = o.refused?.get(n.name);
    if (refusal) plan.peers.push({ node: n.name, subnets: subnetsOf(n), inPlace: false, problem: refusal.problem, routes: [] });
    else peers.push(n);
  }
  peers.sort((a, b) => a.name.localeCompare(b.name));
  const linkFor = onLinkResolver(o.addrs, o.linkNames);

  // The links this node's own addresses sit on carry the cluster's traffic, and the replies to
  // what leaves the cluster come back by the default routes' links: these forward.
  for (const link of [...(self?.internalIPs ?? []).map(linkFor), ...(net.masquerade ? o.defaultLinks ?? [] : [])]) {
    if (link && !plan.forwarding.includes(link)) plan.forwarding.push(link);
  }
  if (net.crossNode === 'none' || !net.crossNode) {
    for (const peer of peers) plan.peers.push({ node: peer.name, subnets: subnetsOf(peer), inPlace: false, routes: [] });
    return plan;
  }

  if (net.crossNode === 'routes') {
    for (const peer of peers) {
      const subnets = subnetsOf(peer);
      const status: NetworkPlan['peers'][number] = { node: peer.name, subnets, inPlace: false, routes: [] };
      const problems: string[] = [];
      for (const dst of subnets) {
        const family = familyOfText(dst);
        const via = peer.internalIPs.find((ip) => familyOfText(ip) === family);
        if (!via) {
          problems.push(`no IPv${family} InternalIP for ${dst}`);
          continue;
        }
        status.via = status.via ?? via;
        const link = linkFor(via);
        if (!link) {
          problems.push(`${via} is not on a link of this node (crossNode "routes" needs the nodes on one segment; "vxlan" or BGP reach it)`);
          continue;
        }
        status.routes.push({ dst, family, gateway: via, link });
      }
      if (!subnets.length) problems.push('no podCIDR');
      if (problems.length) status.problem = problems.join('; ');
      plan.routes.push(...status.routes);
      plan.peers.push(status);
    }
    return plan;
  }

  // vxlan
  const local = self && underlayIp(self);
  const dev = local && linkFor(local);
  const vx = net.vxlan!;
  if (!self || !local || !dev) {
    plan.problem = !self ? 'this node is not in the cluster view' : !local ? 'this node has no InternalIP' : `this node's InternalIP ${local} is on no link here`;
    for (const peer of peers) plan.peers.push({ node: peer.name, subnets: subnetsOf(peer), inPlace: false, problem: plan.problem, routes: [] });
    return plan;
  }
  const v4 = net.ipv4 && parseCidr(net.ipv4.subnet);
  plan.vtep = {
    network: net.name, name: vx.device, vni: vx.vni, port: vx.port, local, dev, mac: vtepMac(self.name, net.name), mtu: net.mtu,
    // flannel's choice: the block's network address on the VTEP, the source of what the node
    // itself sends to other nodes' pods.
    ...(v4 && { address: `${formatIp({ family: 4, value: v4.network })}/32` }),
  };
  plan.forwarding.push(vx.device);
  const underlay = familyOfText(local);
  for (const peer of peers) {
    const subnets = subnetsOf(peer);
    const remote = peer.internalIPs.find((ip) => familyOfText(ip) === underlay);
    const status: NetworkPlan['peers'][number] = { node: peer.name, subnets, inPlace: false, routes: [], ...(remote && { via: remote }) };
    if (!remote || !subnets.length) {
      status.problem = !remote ? `no IPv${underlay} InternalIP (this node's VXLAN runs over IPv${underlay})` : 'no podCIDR';
      plan.peers.push(status);
      continue;
    }
    const mac = vtepMac(peer.name, net.name);
    plan.fdb.push({ link: vx.device, mac, dst: remote });
    for (const dst of subnets) {
      const cidr = parseCidr(dst);
      const gateway = formatIp({ family: cidr.family, value: cidr.network });
      plan.neighs.push({ link: vx.device, address: gateway, lladdr: mac });
      status.routes.push({ dst, family: cidr.family, gateway, link: vx.device, onlink: true });
    }
    plan.routes.push(...status.routes);
    plan.peers.push(status);
  }
  return plan;
}
