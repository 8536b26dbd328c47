// A network whose subnet is "node" gets its pool from this node's entry in the cluster view
// (Node.spec.podCIDRs). Until that entry exists the network is left out of IPAM and reported
// not ready, naming what it waits for; a subnet that changes while pods hold addresses in the
// old one is kept, and reported, never silently re-addressed.
import type { NetworkConfig } from '../config/index.js';
import { familyOfText, formatIp, parseCidr, tryParseIp, type IpFamily } from '../ipam/ip.js';
import type { ClusterNode } from './types.js';

/** VXLAN's outer headers: Ethernet 14 + IPv4 20 + UDP 8 + VXLAN 8 (IPv6 underlay: 40 + 30). */
export const VXLAN_OVERHEAD: Record<IpFamily, number> = { 4: 50, 6: 70 };

export interface NodeNetworks {
  /** The networks as IPAM and the strategies use them: node subnets filled in. */
  networks: NetworkConfig[];
  /** Networks left out, and why: "waiting for ...", or a subnet that changed under pods. */
  notReady: Map<string, string>;
}

/** The node's podCIDR of one family, or undefined. */
export function podCidrOf(node: ClusterNode | undefined, family: IpFamily): string | undefined {
  return node?.podCIDRs.find((c) => familyOfText(c) === family);
}

/** The node address VXLAN and routes use: the first IPv4 InternalIP, else the first IPv6. */
export function underlayIp(node: ClusterNode): string | undefined {
  return node.internalIPs.find((ip) => familyOfText(ip) === 4) ?? node.internalIPs[0];
}

export function nodeNetworks(o: {
  networks: NetworkConfig[];
  nodeName: string;
  node: ClusterNode | undefined;
  source: string;
  /** The networks in use now, for a subnet that changed. */
  previous?: NetworkConfig[];
  /** Does a pod hold an address in this network and family now? */
  held(network: string, family: IpFamily): boolean;
}): NodeNetworks {
  const notReady = new Map<string, string>();
  const networks: NetworkConfig[] = [];
  for (const net of o.networks) {
    if (!net.nodeSubnet?.length) {
      networks.push(net);
      continue;
    }
    const filled: NetworkConfig = { ...net };
    const waiting: string[] = [];
    for (const family of net.nodeSubnet) {
      const key = family === 4 ? 'ipv4' : 'ipv6';
      const cidr = podCidrOf(o.node, family);
      const before = o.previous?.find((p) => p.name === net.name)?.[key];
      if (!cidr) {
        waiting.push(o.node
          ? `Node "${o.nodeName}" has no IPv${family} entry in spec.podCIDRs (it has ${JSON.stringify(o.node.podCIDRs)})`
          : `Node "${o.nodeName}" is not in ${o.source}`);
        continue;
      }
      if (before && before.subnet !== cidr && o.held(net.name, family)) {
        notReady.set(net.name, `Node "${o.nodeName}" spec.podCIDRs changed its IPv${family} entry from ${before.subnet} to ${cidr} while pods hold addresses in ${before.subnet}; knit keeps ${before.subnet} until they are gone or knit restarts`);
        filled[key] = before;
        continue;
      }
      const subnet = parseCidr(cidr);
      filled[key] = { subnet: cidr, gateway: formatIp({ family, value: subnet.network + 1n }), reserved: [] };
    }
    if (waiting.length) {
      // Pods still hold addresses of a subnet the node lost: keep it, and say so.
      const prev = o.previous?.find((p) => p.name === net.name);
      if (prev && net.nodeSubnet.some((f) => o.held(net.name, f))) {
        networks.push(prev);
        notReady.set(net.name, `${waiting.join('; ')}; pods still hold addresses in its old subnet`);
      } else {
        // Known by name, without pools: an attach is told to wait (UNAVAILABLE), not that the
        // network does not exist.
        networks.push({ ...net, nodeSubnet: net.nodeSubnet });
        notReady.set(net.name, `waiting for its subnet: ${waiting.join('; ')}`);
      }
      continue;
    }
    if (net.crossNode === 'vxlan' && o.node) {
      const family = tryParseIp(underlayIp(o.node) ?? '')?.family ?? 4;
      filled.mtu = net.mtu - VXLAN_OVERHEAD[family];
    }
    networks.push(filled);
  }
  return { networks, notReady };
}
