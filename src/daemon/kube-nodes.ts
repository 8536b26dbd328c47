// The Node list from the Kubernetes API (src/kube's Informer). Imported lazily by
// src/daemon/cluster.ts, only when the config names no literal node list.
import type { Logger } from 'pino';
import type { ClusterSettings } from '../config/index.js';
import type { NodeSource } from '../cluster/types.js';

export const KubeNodes = {
  async open(_cluster: ClusterSettings, _log: Logger): Promise<NodeSource> {
    throw new Error('reading Nodes from the Kubernetes API needs src/kube, which this build does not have yet; set cluster.nodes');
  },
};
