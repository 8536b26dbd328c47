// Which networks a pod gets and what their interfaces are called, as Multus decides it
// (multus-cni pkg/k8sclient/k8sclient.go GetDefaultNetworks, TryLoadPodDelegates,
// GetNetworkDelegates; pkg/multus/multus.go getIfname): the cluster network first (knit's
// network, or the pod's default-network annotation), then the configured default networks
// unless the pod is in a system namespace, then the annotation's networks in order. An
// interface is named as its selection asks, else `net<position>`, the cluster network being
// position 0.
import { KnitError } from '../base/errors.js';
import { DEFAULT_NETWORK_ANNOTATION, NETWORKS_ANNOTATION, parseDefaultNetwork, parseNetworkSelections, type NetworkSelection } from './selection.js';

/** The config keys Multus users know, under `secondaryNetworks` (README "Secondary networks"). */
export interface SelectionSettings {
  /** Multus's multusNamespace: where default networks and the default-network annotation are found. */
  namespace: string;
  defaultNetworks: string[];
  systemNamespaces: string[];
  namespaceIsolation: boolean;
  /** With namespaceIsolation, the namespaces any pod may name (Multus's globalNamespaces). */
  globalNamespaces: string[];
}

export interface PodNetwork {
  selection: NetworkSelection;
  /** The interface name in the pod. */
  ifname: string;
  /** Where it came from, for errors: `annotations["…"][i]` or `secondaryNetworks.defaultNetworks[i]`. */
  source: string;
  /** A configured default network: found as a definition in `namespace`, else as knit's network or a file by its name. */
  isDefault: boolean;
}

export interface PodNetworks {
  /** The pod's default-network annotation: its primary interface's network instead of knit's. */
  primary?: NetworkSelection;
  networks: PodNetwork[];
}

/** "ns/name" or "name" of a configured default network. */
function configured(entry: string, namespace: string): NetworkSelection {
  const slash = entry.indexOf('/');
  return slash < 0 ? { name: entry, namespace } : { name: entry.slice(slash + 1), namespace: entry.slice(0, slash) };
}

export function podNetworks(annotations: Record<string, string>, podNamespace: string, primaryIfname: string, s: SelectionSettings): PodNetworks {
  const defaultText = annotations[DEFAULT_NETWORK_ANNOTATION];
  const primary = defaultText !== undefined ? parseDefaultNetwork(defaultText, s.namespace) : undefined;
  const networks: PodNetwork[] = [];
  let position = 1;
  const add = (selection: NetworkSelection, source: string, isDefault: boolean) => {
    networks.push({ selection, ifname: selection.interface ?? `net${position}`, source, isDefault });
    position++;
  };
  if (!s.systemNamespaces.includes(podNamespace)) {
    s.defaultNetworks.forEach((entry, i) => add(configured(entry, s.namespace), `secondaryNetworks.defaultNetworks[${i}]`, true));
  }
  parseNetworkSelections(annotations[NETWORKS_ANNOTATION] ?? '', podNamespace).forEach((sel, i) => {
    const source = `annotations["${NETWORKS_ANNOTATION}"][${i}]`;
    if (s.namespaceIsolation && sel.namespace !== podNamespace && !s.globalNamespaces.includes(sel.namespace)) {
      throw new KnitError('PERMISSION_DENIED', `${source}: namespace isolation: pod in namespace ${podNamespace} may not use network ${sel.namespace}/${sel.name} (only its own namespace and ${s.globalNamespaces.join(', ') || 'none other'})`, { field: source });
    }
    add(sel, source, false);
  });
  const seen = new Map<string, string>([[primaryIfname, 'the pod\'s primary interface']]);
  for (const n of networks) {
    const other = seen.get(n.ifname);
    if (other) throw KnitError.invalid(n.source, `interface ${n.ifname} is also ${other}'s; name one of them with "interface" (or @name)`);
    seen.set(n.ifname, n.source);
  }
  return { ...(primary && { primary }), networks };
}
