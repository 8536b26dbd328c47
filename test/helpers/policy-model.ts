// The upstream NetworkPolicy e2e suite's model (k8s test/e2e/network/netpol/model.go): three
// namespaces x, y, z, each with pods a, b, c labelled pod=<name>, each serving ports 80 and 81
// over TCP and UDP with container ports named serve-<port>-<tcp|udp>. Addresses 10.0.<ns>.<pod>
// (IPv4) and fd00::<ns>:<pod> (IPv6); pods spread over nodes n1 and n2 unless a test says.
import type { NetworkPolicy, PolicyPod, PolicyView, Protocol } from '../../src/policy/types.js';

export const NAMESPACES = ['x', 'y', 'z'] as const;
export const PODS = ['a', 'b', 'c'] as const;
export const NODE_ADDRS: Record<string, string[]> = { n1: ['192.168.0.1', 'fd6b::1'], n2: ['192.168.0.2', 'fd6b::2'] };

const nsIndex = (ns: string) => NAMESPACES.indexOf(ns as never) + 1;
const podIndex = (pod: string) => PODS.indexOf(pod as never) + 1;

export function ip4(id: string): string {
  const [ns, pod] = id.split('/');
  return `10.0.${nsIndex(ns!)}.${podIndex(pod!)}`;
}
export function ip6(id: string): string {
  const [ns, pod] = id.split('/');
  return `fd00::${nsIndex(ns!)}:${podIndex(pod!)}`;
}

export function modelPods(nodeOf: (id: string) => string = (id) => (podIndex(id.split('/')[1]!) === 2 ? 'n2' : 'n1')): PolicyPod[] {
  return NAMESPACES.flatMap((ns) => PODS.map((pod) => {
    const id = `${ns}/${pod}`;
    return {
      namespace: ns, name: pod, labels: { pod }, ips: [ip4(id), ip6(id)], node: nodeOf(id),
      ports: [80, 81].flatMap((port) => (['TCP', 'UDP'] as Protocol[]).map((protocol) => ({ name: `serve-${port}-${protocol.toLowerCase()}`, port, protocol }))),
    };
  }));
}

export function modelView(policies: NetworkPolicy[], over: Partial<PolicyView> = {}): PolicyView {
  return {
    policies,
    namespaces: NAMESPACES.map((name) => ({ name, labels: { ns: name } })),
    pods: modelPods(),
    nodes: NODE_ADDRS,
    ...over,
  };
}

export const ALL_IDS = NAMESPACES.flatMap((ns) => PODS.map((pod) => `${ns}/${pod}`));

/** A NetworkPolicy with a namespace, a name and a spec. */
export const np = (namespace: string, name: string, spec: NetworkPolicy['spec']): NetworkPolicy => ({ metadata: { namespace, name }, spec });
