// Checks that look at more than one field: pools that fit their subnets, names and subnets
// unique across networks, a default network that exists. They run once the shape is valid,
// and each problem names the key it is about.

import { parseConflist } from '../cni-exec/conflist.js';
import {
  cidrContains, cidrLast, cidrsOverlap, formatCidr, formatIp, overlappingPairs, tryParseCidr, tryParseIp, type Cidr, type IpFamily,
} from '../ipam/ip.js';
import type { RawConfig, RawNetwork, RawPool } from './schema.js';
import { ifnameProblem, NODE_SUBNET } from './schema.js';

export interface ConfigIssue {
  path: (string | number)[];
  message: string;
}

type Path = (string | number)[];

/** Smallest pools we accept: room for the gateway and at least one pod. */
const MAX_PREFIX: Record<IpFamily, number> = { 4: 30, 6: 126 };

export function crossCheck(config: RawConfig): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const issue = (path: Path, message: string) => issues.push({ path, message });

  const firstByName = new Map<string, number>();
  const firstByBridge = new Map<string, number>();
  const subnets: { family: IpFamily; cidr: Cidr; at: number }[] = [];

  config.networks.forEach((net, i) => {
    const at: Path = ['networks', i];
    const dup = firstByName.get(net.name);
    if (dup !== undefined) issue([...at, 'name'], `duplicate network name ${JSON.stringify(net.name)} (also networks[${dup}])`);
    else firstByName.set(net.name, i);

    if (net.mode === 'bridge') {
      const bridge = net.bridge ?? net.name;
      if (net.bridge === undefined && ifnameProblem(bridge)) {
        issue([...at, 'bridge'], `is needed: the network name ${JSON.stringify(net.name)} is too long to be the bridge's name (15 bytes at most)`);
      }
      const other = firstByBridge.get(bridge);
      if (other !== undefined) issue([...at, net.bridge === undefined ? 'name' : 'bridge'], `bridge ${JSON.stringify(bridge)} is already used by networks[${other}]`);
      else firstByBridge.set(bridge, i);
    }

    if (net.bridgeNetfilter !== undefined && net.mode !== 'bridge') issue([...at, 'bridgeNetfilter'], `is only for a "bridge" network (knit makes no bridge for a "${net.mode}" one)`);

    if (net.mode === 'cni') {
      // The chain's own IPAM plugin hands out addresses: knit holds no pool for it.
      if (!net.cni) issue(at, `network ${JSON.stringify(net.name)} has mode "cni" and needs a "cni" section (conflist or conflistFile)`);
      if (typeof net.cni?.conflist === 'string' || (net.cni?.conflist && typeof net.cni.conflist === 'object')) {
        const text = typeof net.cni.conflist === 'string' ? net.cni.conflist : JSON.stringify(net.cni.conflist);
        try {
          parseConflist(text, 'conflist');
        } catch (err) {
          issue([...at, 'cni', 'conflist'], (err as Error).message);
        }
      }
      for (const key of ['ipv4', 'ipv6', 'bridge'] as const) if (net[key] !== undefined) issue([...at, key], `is not used by a "cni" network (its plugins choose it)`);
      return;
    }
    if (net.cni) issue([...at, 'cni'], `is only for mode "cni"`);
    if (!net.ipv4 && !net.ipv6) issue(at, `network ${JSON.stringify(net.name)} needs an ipv4 or an ipv6 pool`);
    checkCluster(config, net, at, issue);
    for (const [key, family] of [['ipv4', 4], ['ipv6', 6]] as const) {
      const pool = net[key];
      if (!pool) continue;
      if (pool.subnet === NODE_SUBNET) {
        // The node's podCIDR is learned at run time: nothing else of the pool can refer to it.
        for (const k of ['gateway', 'rangeStart', 'rangeEnd'] as const) {
          if (pool[k] !== undefined) issue([...at, key, k], `cannot be set when subnet is "${NODE_SUBNET}" (the gateway is the subnet's first address)`);
        }
        if (pool.reserved.length) issue([...at, key, 'reserved'], `cannot be set when subnet is "${NODE_SUBNET}"`);
        continue;
      }
      const cidr = checkPool(pool, family, [...at, key], issue);
      if (!cidr) continue;
      for (const prev of subnets) {
        if (prev.family === family && cidrsOverlap(prev.cidr, cidr)) {
          const name = config.networks[prev.at].name;
          issue([...at, key, 'subnet'], `${formatCidr(cidr)} overlaps ${formatCidr(prev.cidr)} of networks[${prev.at}] (${JSON.stringify(name)})`);
        }
      }
      subnets.push({ family, cidr, at: i });
    }
    checkRoutes(net, at, issue);
  });

  config.networkPolicy?.networks?.forEach((name, i) => {
    const at = firstByName.get(name);
    if (at === undefined) issue(['networkPolicy', 'networks', i], `${JSON.stringify(name)} is not one of the networks (${[...firstByName.keys()].join(', ')})`);
    else if (config.networks[at].mode === 'cni') issue(['networkPolicy', 'networks', i], `network ${JSON.stringify(name)} has mode "cni": its plugins give its addresses, and knit enforces policy on addresses it gave`);
  });
  if (config.networkPolicy?.literal?.clusterNetworkPolicies.length && !config.networkPolicy.clusterNetworkPolicies) {
    issue(['networkPolicy', 'literal', 'clusterNetworkPolicies'], 'needs networkPolicy.clusterNetworkPolicies: true');
  }
  if (config.defaultNetwork !== undefined && !firstByName.has(config.defaultNetwork)) {
    issue(['defaultNetwork'], `${JSON.stringify(config.defaultNetwork)} is not one of the networks (${[...firstByName.keys()].join(', ')})`);
  }
  checkClusterNodes(config, issue);
  if (config.handoffSocket === config.socket) issue(['handoffSocket'], `must differ from socket (${config.socket})`);
  if (config.cniSocket === config.socket || config.cniSocket === config.handoffSocket) {
    issue(['cniSocket'], `must differ from socket and handoffSocket (${config.cniSocket})`);
  }
  // knit DELs every attachment cached there that no record holds (after a reboot): the dir
  // must be knit's alone, never a runtime's /var/lib/cni.
  const cache = config.secondaryNetworks?.cacheDir;
  if (cache !== undefined && !(cache + '/').startsWith(config.stateDir.replace(/\/?$/, '/'))) {
    issue(['secondaryNetworks', 'cacheDir'], `${JSON.stringify(cache)} must be under stateDir (${config.stateDir}): knit gives back whatever is cached there and not in its records`);
  }
  return issues;
}

/** A network that spans the cluster needs the cluster section; the literal node map must be
 * usable as it stands (a malformed entry is an error at start, not a surprise later). */
function checkCluster(config: RawConfig, net: RawNetwork, at: Path, issue: (p: Path, m: string) => void): void {
  const fromNode = net.ipv4?.subnet === NODE_SUBNET || net.ipv6?.subnet === NODE_SUBNET;
  if ((fromNode || net.crossNode) && !config.cluster) {
    issue([...at, fromNode ? 'ipv4' : 'crossNode'], `needs the "cluster" section (where knit learns the nodes: cluster.nodes, or the Kubernetes API)`);
  }
  if (net.crossNode && net.mode === 'cni') issue([...at, 'crossNode'], 'is not for a "cni" network (its plugins decide how pods are reached)');
  if (net.crossNode && !fromNode) issue([...at, 'crossNode'], `needs a subnet that is the node's ("${NODE_SUBNET}"): every node must have its own block`);
  if (net.vxlan && net.crossNode !== 'vxlan') issue([...at, 'vxlan'], 'is only for crossNode "vxlan"');
  for (const key of ['masquerade', 'nonMasqueradeCIDRs'] as const) {
    if (net[key] !== undefined && !net.crossNode) issue([...at, key], 'is only for a network that spans the cluster (crossNode)');
  }
  // knit switches forwarding on these by sysctl key (net.ipv4.conf.<dev>.forwarding), where a dot separates.
  if (net.crossNode && net.vxlan?.device?.includes('.')) issue([...at, 'vxlan', 'device'], 'must not contain "." on a network that spans the cluster (knit sets its forwarding sysctl)');
  if (net.crossNode && net.bridge?.includes('.')) issue([...at, 'bridge'], 'must not contain "." on a network that spans the cluster (knit sets its forwarding sysctl)');
  if (net.mode === 'routed' && net.crossNode === 'vxlan') issue([...at, 'crossNode'], '"vxlan" needs a bridge network (routed networks reach other nodes by routes or BGP)');
}

/** The literal node list as it stands: one podCIDR per family, and no two nodes claiming the
 * same addresses. Where Nodes from the API do that, knit refuses the later one at run time and
 * reports it (src/cluster/refusals.ts); a list in the config is refused whole, as overlapping
 * network subnets are, so a reload that brings it in changes nothing. */
function checkClusterNodes(config: RawConfig, issue: (p: Path, m: string) => void): void {
  const claims: { name: string; j: number; cidr: Cidr }[] = [];
  const addressOwner = new Map<string, string>();
  for (const [name, node] of Object.entries(config.cluster?.nodes ?? {})) {
    const at: Path = ['cluster', 'nodes', name];
    const seen = new Set<number>();
    node.podCIDRs.forEach((text, j) => {
      const cidr = tryParseCidr(text);
      if (!cidr) return;
      if (cidr.address !== cidr.network) issue([...at, 'podCIDRs', j], `${JSON.stringify(text)} has host bits set (did you mean "${formatCidr(cidr)}"?)`);
      if (seen.has(cidr.family)) issue([...at, 'podCIDRs', j], `is a second IPv${cidr.family} podCIDR (a node has one per family)`);
      seen.add(cidr.family);
      claims.push({ name, j, cidr });
    });
    node.internalIPs.forEach((text, j) => {
      const ip = tryParseIp(text);
      if (!ip) return;
      const other = addressOwner.get(formatIp(ip));
      if (other !== undefined && other !== name) issue([...at, 'internalIPs', j], `${JSON.stringify(text)} is also cluster.nodes.${other}'s InternalIP (a route to one node would go to the other)`);
      else addressOwner.set(formatIp(ip), name);
    });
  }
  for (const [i, k] of overlappingPairs(claims.map((c) => c.cidr)).sort(([a, b], [c, d]) => Math.max(a, b) - Math.max(c, d))) {
    const [first, later] = i < k ? [claims[i]!, claims[k]!] : [claims[k]!, claims[i]!];
    if (first.name === later.name) continue;
    issue(['cluster', 'nodes', later.name, 'podCIDRs', later.j], `${formatCidr(later.cidr)} overlaps ${formatCidr(first.cidr)} of cluster.nodes.${first.name} (each node needs a block of its own: routing it would take pods away from that node)`);
  }
}

/** Check one pool; returns its subnet when the subnet itself is usable. */
function checkPool(pool: RawPool, family: IpFamily, at: Path, issue: (p: Path, m: string) => void): Cidr | undefined {
  const cidr = tryParseCidr(pool.subnet);
  if (!cidr) return undefined; // already reported by the schema
  const q = JSON.stringify(pool.subnet);
  if (cidr.family !== family) {
    issue([...at, 'subnet'], `${q} is an IPv${cidr.family} subnet, but this is the ipv${family} pool`);
    return undefined;
  }
  if (cidr.address !== cidr.network) {
    issue([...at, 'subnet'], `${q} has host bits set (did you mean "${formatCidr(cidr)}"?)`);
    return undefined;
  }
  if (cidr.prefixLen > MAX_PREFIX[family]) {
    issue([...at, 'subnet'], `${q} is too small: a pool needs a /${MAX_PREFIX[family]} or larger (a gateway and at least one pod)`);
    return undefined;
  }
  const inside = (key: string, text: string | undefined): bigint | undefined => {
    if (text === undefined) return undefined;
    const ip = tryParseIp(text);
    if (!ip) return undefined; // reported by the schema
    if (!cidrContains(cidr, ip)) {
      issue([...at, key], `${JSON.stringify(text)} is not inside the subnet ${formatCidr(cidr)}`);
      return undefined;
    }
    if (ip.value === cidr.network || (family === 4 && ip.value === cidrLast(cidr))) {
      issue([...at, key], `${JSON.stringify(text)} is the ${ip.value === cidr.network ? 'network' : 'broadcast'} address of ${formatCidr(cidr)}`);
      return undefined;
    }
    return ip.value;
  };
  inside('gateway', pool.gateway);
  const start = inside('rangeStart', pool.rangeStart);
  const end = inside('rangeEnd', pool.rangeEnd);
  if (start !== undefined && end !== undefined && start > end) {
    issue([...at, 'rangeEnd'], `${JSON.stringify(pool.rangeEnd)} comes before rangeStart ${JSON.stringify(pool.rangeStart)}`);
  }
  pool.reserved.forEach((text, j) => {
    const block = text.includes('/') ? tryParseCidr(text) : undefined;
    if (!block) {
      const ip = tryParseIp(text);
      if (ip && !cidrContains(cidr, ip)) issue([...at, 'reserved', j], `${JSON.stringify(text)} is not inside the subnet ${formatCidr(cidr)}`);
      return;
    }
    if (block.family !== family || block.network < cidr.network || cidrLast(block) > cidrLast(cidr)) {
      issue([...at, 'reserved', j], `${JSON.stringify(text)} is not inside the subnet ${formatCidr(cidr)}`);
    } else if (block.address !== block.network) {
      issue([...at, 'reserved', j], `${JSON.stringify(text)} has host bits set (did you mean "${formatCidr(block)}"?)`);
    }
  });
  return cidr;
}

function checkRoutes(net: RawNetwork, at: Path, issue: (p: Path, m: string) => void): void {
  net.routes.forEach((route, j) => {
    const dst = tryParseCidr(route.dst);
    if (!dst) return;
    if (dst.address !== dst.network) {
      issue([...at, 'routes', j, 'dst'], `${JSON.stringify(route.dst)} has host bits set (did you mean "${formatCidr(dst)}"?)`);
    }
    const gw = route.gw === undefined ? undefined : tryParseIp(route.gw);
    if (gw && gw.family !== dst.family) {
      issue([...at, 'routes', j, 'gw'], `${JSON.stringify(route.gw)} is IPv${gw.family} but dst ${JSON.stringify(route.dst)} is IPv${dst.family}`);
    }
    if (!(dst.family === 4 ? net.ipv4 : net.ipv6)) {
      issue([...at, 'routes', j, 'dst'], `is IPv${dst.family}, but network ${JSON.stringify(net.name)} has no ipv${dst.family} pool`);
    }
  });
}
