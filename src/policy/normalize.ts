// A NetworkPolicy as the API serves it, checked and put in the form the evaluator and the
// compiler share: selectors compiled, policyTypes inferred as the API's defaulting does
// (k8s.io/kubernetes pkg/apis/networking/v1/defaults.go: Ingress always, Egress when the policy
// has egress rules), ipBlock turned into address ranges (cidr less every except), ports into
// ranges per protocol or a name to resolve. A policy knit cannot read whole is kept with its
// problems and none of its rules: its pods are isolated for its directions and nothing it
// would allow is allowed (docs/network-policy.md, "Policies knit cannot express").
import { tryParseCidr, cidrLast, type IpFamily } from '../ipam/ip.js';
import { compileSelector, everything, type Selector } from './selector.js';
import { PROTOCOLS, type Direction, type NetworkPolicy, type NetworkPolicyPeer, type NetworkPolicyPort, type Protocol } from './types.js';

export type PortMatch =
  | { protocol: Protocol; from: number; to: number }
  | { protocol: Protocol; named: string };

export type Peer =
  | { kind: 'pods'; /** own namespace, or a namespace selector */ namespaces: 'own' | Selector; pods: Selector }
  | { kind: 'block'; family: IpFamily; cidr: string; ranges: [bigint, bigint][] };

export interface Rule {
  index: number;
  /** 'all': no from/to, every source or destination. */
  peers: 'all' | Peer[];
  /** 'all': no ports, every protocol and port (ICMP included). */
  ports: 'all' | PortMatch[];
}

export interface Policy {
  /** "namespace/name" */
  key: string;
  namespace: string;
  name: string;
  selector: Selector;
  /** Absent: the policy does not cover that direction. */
  ingress?: Rule[];
  egress?: Rule[];
  /** Why knit could not read it whole; its rules are then left out (fail closed). */
  problems: string[];
}

export function normalizePolicy(np: NetworkPolicy): Policy {
  const namespace = np.metadata.namespace ?? 'default';
  const name = np.metadata.name;
  const problems: string[] = [];
  const spec = np.spec ?? {};
  let selector: Selector = everything;
  const sel = compileSelector(spec.podSelector ?? {}, 'spec.podSelector');
  if ('problem' in sel) problems.push(sel.problem);
  else selector = sel;

  const types = new Set<Direction>();
  if (spec.policyTypes?.length) {
    spec.policyTypes.forEach((t, i) => {
      if (t === 'Ingress') types.add('ingress');
      else if (t === 'Egress') types.add('egress');
      else problems.push(`spec.policyTypes[${i}]: ${JSON.stringify(String(t).slice(0, 20))} is not Ingress or Egress`);
    });
  } else {
    types.add('ingress');
    if (spec.egress?.length) types.add('egress');
  }
  const rules = (d: Direction): Rule[] => {
    const list = d === 'ingress' ? spec.ingress ?? [] : spec.egress ?? [];
    return list.map((r, i) => {
      const field = `spec.${d}[${i}]`;
      const peersIn = d === 'ingress' ? (r as { from?: NetworkPolicyPeer[] }).from : (r as { to?: NetworkPolicyPeer[] }).to;
      const peers: Rule['peers'] = peersIn?.length ? peersIn.flatMap((p, j) => peer(p, `${field}.${d === 'ingress' ? 'from' : 'to'}[${j}]`, problems)) : 'all';
      const ports: Rule['ports'] = r.ports?.length ? r.ports.flatMap((p, j) => port(p, `${field}.ports[${j}]`, problems)) : 'all';
      return { index: i, peers, ports };
    });
  };
  const ingress = types.has('ingress') ? rules('ingress') : undefined;
  const egress = types.has('egress') ? rules('egress') : undefined;
  const failed = problems.length > 0;
  return {
    key: `${namespace}/${name}`, namespace, name, selector, problems,
    ...(ingress && { ingress: failed ? [] : ingress }),
    ...(egress && { egress: failed ? [] : egress }),
  };
}

function peer(p: NetworkPolicyPeer, field: string, problems: string[]): Peer[] {
  const selectors = p.podSelector !== undefined || p.namespaceSelector !== undefined;
  if (p.ipBlock) {
    if (selectors) {
      problems.push(`${field}: ipBlock cannot be given with podSelector or namespaceSelector`);
      return [];
    }
    return block(p.ipBlock, `${field}.ipBlock`, problems);
  }
  if (!selectors) {
    problems.push(`${field}: a peer needs podSelector, namespaceSelector or ipBlock`);
    return [];
  }
  const pods = compileSelector(p.podSelector ?? {}, `${field}.podSelector`);
  if ('problem' in pods) {
    problems.push(pods.problem);
    return [];
  }
  if (p.namespaceSelector === undefined) return [{ kind: 'pods', namespaces: 'own', pods }];
  const ns = compileSelector(p.namespaceSelector, `${field}.namespaceSelector`);
  if ('problem' in ns) {
    problems.push(ns.problem);
    return [];
  }
  return [{ kind: 'pods', namespaces: ns, pods }];
}

function block(b: { cidr: string; except?: string[] }, field: string, problems: string[]): Peer[] {
  const cidr = tryParseCidr(String(b.cidr));
  if (!cidr) {
    problems.push(`${field}.cidr: ${JSON.stringify(String(b.cidr).slice(0, 45))} is not a CIDR`);
    return [];
  }
  let ranges: [bigint, bigint][] = [[cidr.network, cidrLast(cidr)]];
  for (const [i, text] of (b.except ?? []).entries()) {
    const ex = tryParseCidr(String(text));
    if (!ex || ex.family !== cidr.family) {
      problems.push(`${field}.except[${i}]: ${JSON.stringify(String(text).slice(0, 45))} is not a CIDR of the cidr's family`);
      return [];
    }
    ranges = subtract(ranges, [ex.network, cidrLast(ex)]);
  }
  return [{ kind: 'block', family: cidr.family, cidr: `${b.cidr}${b.except?.length ? ` except ${b.except.join(', ')}` : ''}`, ranges }];
}

/** Ranges less one range (all inclusive). */
function subtract(ranges: [bigint, bigint][], [lo, hi]: [bigint, bigint]): [bigint, bigint][] {
  const out: [bigint, bigint][] = [];
  for (const [a, b] of ranges) {
    if (hi < a || lo > b) {
      out.push([a, b]);
      continue;
    }
    if (a < lo) out.push([a, lo - 1n]);
    if (b > hi) out.push([hi + 1n, b]);
  }
  return out;
}

function port(p: NetworkPolicyPort, field: string, problems: string[]): PortMatch[] {
  const protocol = (p.protocol ?? 'TCP') as Protocol;
  if (!PROTOCOLS.includes(protocol)) {
    problems.push(`${field}.protocol: ${JSON.stringify(String(p.protocol).slice(0, 20))} is not TCP, UDP or SCTP`);
    return [];
  }
  if (p.port === undefined) {
    if (p.endPort !== undefined) {
      problems.push(`${field}.endPort: needs a numeric port`);
      return [];
    }
    return [{ protocol, from: 0, to: 65535 }];
  }
  if (typeof p.port === 'string') {
    if (p.endPort !== undefined) {
      problems.push(`${field}.endPort: cannot go with a named port (${JSON.stringify(p.port.slice(0, 20))})`);
      return [];
    }
    if (!/^[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$/.test(p.port) || !/[a-z]/.test(p.port)) {
      problems.push(`${field}.port: ${JSON.stringify(p.port.slice(0, 20))} is not a port name`);
      return [];
    }
    return [{ protocol, named: p.port }];
  }
  const from = p.port;
  const to = p.endPort ?? p.port;
  if (!Number.isInteger(from) || from < 1 || from > 65535 || !Number.isInteger(to) || to < from || to > 65535) {
    problems.push(`${field}: port ${from}${p.endPort !== undefined ? `, endPort ${p.endPort}` : ''} is not a port or a range of ports`);
    return [];
  }
  return [{ protocol, from, to }];
}

