// Pod traffic leaving the cluster takes the node's address: one nftables table of knit's
// (clusterNatTable), rebuilt whole and atomically when its content changes. What is never
// masqueraded: every node's pod subnets, the cluster and service CIDRs the config names, and
// the network's nonMasqueradeCIDRs. Nothing here touches a table knit did not make.
import type { NetworkConfig, ClusterSettings } from '../config/index.js';
import { parseCidr } from '../ipam/ip.js';
import { podCidrOf } from './node-networks.js';
import type { ClusterNode } from './types.js';

export function masqueradeRuleset(o: { table: string; networks: NetworkConfig[]; nodes: ClusterNode[]; cluster: ClusterSettings }): string | undefined {
  const rules: string[] = [];
  for (const net of o.networks) {
    if (!net.crossNode || !net.masquerade) continue;
    for (const family of [4, 6] as const) {
      const own = family === 4 ? net.ipv4?.subnet : net.ipv6?.subnet;
      if (!own) continue;
      const keep = new Set<string>([own]);
      for (const n of o.nodes) {
        const c = podCidrOf(n, family);
        if (c) keep.add(c);
      }
      for (const c of [...o.cluster.clusterCIDRs, ...o.cluster.serviceCIDRs, ...(net.nonMasqueradeCIDRs ?? [])]) if (parseCidr(c).family === family) keep.add(c);
      const ip = family === 4 ? 'ip' : 'ip6';
      rules.push(`    ${ip} saddr ${own} ${ip} daddr != { ${[...keep].sort().join(', ')} } masquerade comment "network ${net.name}"`);
    }
  }
  if (!rules.length) return undefined;
  return [
    `table inet ${o.table} {`,
    '  chain postrouting {',
    '    type nat hook postrouting priority srcnat + 10; policy accept;',
    ...rules,
    '  }',
    '}',
  ].join('\n');
}
