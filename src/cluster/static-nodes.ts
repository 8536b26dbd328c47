// The nodes written into the config (cluster.nodes): for clusters without a pod CIDR allocator
// and for tests. Always synced; a config reload replaces the list (and the routes follow).
import type { ClusterNode, NodeSource } from './types.js';

type NodeMap = Record<string, { podCIDRs: string[]; internalIPs: string[] }>;

export class StaticNodes implements NodeSource {
  readonly description = 'config cluster.nodes';
  private list: ClusterNode[] = [];
  private readonly listeners: (() => void)[] = [];

  constructor(nodes: NodeMap) {
    this.replace(nodes);
  }

  replace(nodes: NodeMap): void {
    this.list = Object.entries(nodes).map(([name, n]) => ({ name, podCIDRs: n.podCIDRs, internalIPs: n.internalIPs }));
    for (const fn of this.listeners) fn();
  }

  start(): void {}
  async stop(): Promise<void> {}
  nodes(): ClusterNode[] {
    return this.list;
  }
  onChange(fn: () => void): void {
    this.listeners.push(fn);
  }
  state() {
    return { state: 'synced' as const, detail: `${this.list.length} nodes in the config` };
  }
}
