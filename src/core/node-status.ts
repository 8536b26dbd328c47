// NodeStatus: is this node ready for pods (kubelet's NetworkReady, CNI STATUS through the shim),
// which networks and pools it has, and whether any pool is exhausted.
import type { NetworkStatus, NodeStatus } from '../base/types.js';
import { chainStatus } from '../cni-exec/network.js';
import type { ManagerDeps, RecordStorePort } from './ports.js';
import type { SandboxRecord } from './record.js';

/** Sandboxes attached: from the store's tally when it keeps one (no record is parsed). */
export function attachedCount(records: RecordStorePort<SandboxRecord>): number {
  return records.tally ? (records.tally().get('attached') ?? 0) : [...records.values()].filter((r) => r.state === 'attached').length;
}

export async function nodeStatus(deps: Pick<ManagerDeps, 'unreadyNetworks' | 'networks' | 'ipam' | 'extensions' | 'records' | 'conditions' | 'cluster' | 'policy'>, opts: { checkNode?: boolean } = {}): Promise<NodeStatus> {
  const cluster = await deps.cluster?.status();
  const unready = new Map(deps.unreadyNetworks());
  const networks: NetworkStatus[] = [];
  for (const n of deps.networks().values()) {
    const pools = n.mode === 'cni' ? [] : deps.ipam.usage(n.name);
    let cniStatus: string | undefined;
    if (n.mode === 'cni' && !unready.has(n.name)) {
      const s = await chainStatus(n);
      cniStatus = s.status;
      if (s.problem) unready.set(n.name, `CNI STATUS: ${s.problem}`);
    }
    const spans = cluster?.networks.find((c) => c.network === n.name);
    networks.push({
      name: n.name, mode: n.mode, ready: !unready.has(n.name), pools, ...(cniStatus && { cniStatus }),
      ...(spans && { crossNode: spans.crossNode, nodeSubnets: spans.subnets, peers: spans.peers }),
    });
  }
  const missing = deps.extensions.missingRequired();
  const reasons = [
    ...[...unready].map(([n, why]) => `network ${n}: ${why}`),
    ...missing.map((m) => `required extension ${m} is not registered`),
  ];
  const exhausted = networks.flatMap((n) => n.pools.filter((p) => p.free === 0).map((p) => `${n.name} ${p.subnet}`));
  const conditions = (await deps.conditions?.()) ?? [];
  return {
    ready: reasons.length === 0,
    reason: reasons.length ? 'NetworkPluginNotReady' : '',
    message: [...reasons, ...exhausted.map((p) => `pool ${p} is exhausted`), ...conditions].join('; '),
    schedulable: exhausted.length === 0,
    networks,
    sandboxes: attachedCount(deps.records),
    ...(cluster && { cluster: { node: cluster.node, source: cluster.source, state: cluster.state, detail: cluster.detail } }),
    ...(deps.policy && { networkPolicy: deps.policy.status() }),
    ...(opts.checkNode && { clusterDifferences: deps.cluster ? await deps.cluster.check() : ['this node has no cluster network (no "cluster" section in the config)'] }),
  };
}
