// ClusterNetworkPolicy (policy.networking.k8s.io/v1beta1, sigs.k8s.io/network-policy-api v0.3.0
// apis/v1beta1/clusternetworkpolicy_types.go): the fields knit reads, checked and normalized.
// A policy sits in the Admin or the Baseline tier with a priority (0..1000, lower first); its
// subject is pods by namespace, or by namespace and pod; each rule has an action (Accept, Deny,
// Pass), peers (namespaces, pods, nodes and networks for egress) and optional protocols (TCP,
// UDP, SCTP with a port or a range, or a destination named port). docs/network-policy.md,
// "ClusterNetworkPolicy", says how knit reads what it cannot express.
import { tryParseCidr, cidrLast, type IpFamily } from '../ipam/ip.js';
import { compileSelector, everything, type Selector } from './selector.js';
import type { Direction, LabelSelector, Protocol } from './types.js';

export type Tier = 'Admin' | 'Baseline';
export type Action = 'Accept' | 'Deny' | 'Pass';
export const TIERS: readonly Tier[] = ['Admin', 'Baseline'];

interface NamespacedPod {
  namespaceSelector?: LabelSelector;
  podSelector?: LabelSelector;
}

export interface ClusterNetworkPolicyPort {
  number?: number;
  range?: { start: number; end: number };
}

export interface ClusterNetworkPolicyProtocol {
  tcp?: { destinationPort?: ClusterNetworkPolicyPort };
  udp?: { destinationPort?: ClusterNetworkPolicyPort };
  sctp?: { destinationPort?: ClusterNetworkPolicyPort };
  destinationNamedPort?: string;
}

export interface ClusterNetworkPolicyPeer {
  namespaces?: LabelSelector;
  pods?: NamespacedPod;
  /** Egress only. */
  nodes?: LabelSelector;
  /** Egress only: CIDRs. */
  networks?: string[];
  /** Egress only, Accept only; knit cannot match names (a peer that matches nothing). */
  domainNames?: string[];
}

export interface ClusterNetworkPolicyRule {
  name?: string;
  action: string;
  from?: ClusterNetworkPolicyPeer[];
  to?: ClusterNetworkPolicyPeer[];
  protocols?: ClusterNetworkPolicyProtocol[];
}

/** policy.networking.k8s.io/v1beta1 ClusterNetworkPolicy, the fields knit reads. */
export interface ClusterNetworkPolicy {
  metadata: { name: string; uid?: string; resourceVersion?: string; generation?: number };
  spec: {
    tier: string;
    priority: number;
    subject: { namespaces?: LabelSelector; pods?: NamespacedPod };
    ingress?: ClusterNetworkPolicyRule[];
    egress?: ClusterNetworkPolicyRule[];
  };
}

export type ClusterPeer =
  | { kind: 'pods'; namespaces: Selector; pods: Selector }
  | { kind: 'nodes'; nodes: Selector }
  | { kind: 'block'; family: IpFamily; cidr: string; ranges: [bigint, bigint][] };

/** A named port takes its protocol and number from the destination pod's container port. */
export type ClusterPort = { protocol: Protocol; from: number; to: number } | { named: string };

export interface ClusterRule {
  index: number;
  name?: string;
  action: Action;
  /** 'all': every peer (a Deny or Pass rule knit could not read, failed closed). */
  peers: 'all' | ClusterPeer[];
  /** 'all': no protocols, every protocol and port (ICMP included). */
  protocols: 'all' | ClusterPort[];
}

export interface ClusterPolicy {
  /** "cnp:<name>": never a NetworkPolicy's "namespace/name" (a namespace has no colon). */
  key: string;
  name: string;
  tier: Tier;
  priority: number;
  subject: { namespaces: Selector; pods: Selector };
  /** A policy without rules of a direction does not touch that direction. */
  ingress: ClusterRule[];
  egress: ClusterRule[];
  /** What knit could not read; each such rule, or every rule for a problem of the policy's
   * own fields, fails closed as the API defines it. */
  problems: string[];
}

/** A Node as a peer: its labels and the addresses of its status (every one that is an IP). */
export interface PolicyNode {
  name: string;
  labels: Record<string, string>;
  ips: string[];
}

/** What a source adds to its view with ClusterNetworkPolicy on (absent: off). */
export interface ClusterPolicyView {
  clusterNetworkPolicies?: ClusterNetworkPolicy[];
  /** Every node, for nodes peers. */
  policyNodes?: PolicyNode[];
}

export const clusterPolicyKey = (name: string) => `cnp:${name}`;

const ACTIONS = new Set<string>(['Accept', 'Deny', 'Pass']);

/** The API's "fail closed" for a rule knit cannot read (ClusterNetworkPolicyIngressPeer's
 * doc): an Accept rule matches no traffic, a Deny or Pass rule denies all. */
function failedClosed(index: number, name: string | undefined, action: string): ClusterRule {
  return action === 'Accept'
    ? { index, ...(name && { name }), action: 'Accept', peers: [], protocols: 'all' }
    : { index, ...(name && { name }), action: 'Deny', peers: 'all', protocols: 'all' };
}

export function normalizeClusterPolicy(cnp: ClusterNetworkPolicy): ClusterPolicy {
  const name = cnp.metadata.name;
  const spec = cnp.spec ?? ({} as ClusterNetworkPolicy['spec']);
  const problems: string[] = [];

  let tier: Tier = 'Admin';
  if (spec.tier === 'Admin' || spec.tier === 'Baseline') tier = spec.tier;
  else problems.push(`spec.tier: ${JSON.stringify(String(spec.tier).slice(0, 20))} is not Admin or Baseline`);

  let priority = 0;
  if (Number.isInteger(spec.priority) && spec.priority >= 0 && spec.priority <= 1000) priority = spec.priority;
  else problems.push(`spec.priority: ${JSON.stringify(String(spec.priority).slice(0, 20))} is not an integer from 0 to 1000`);

  const subject = readSubject(spec.subject, problems);
  const ownProblems = problems.length > 0;

  const rules = (d: Direction): ClusterRule[] => ((d === 'ingress' ? spec.ingress : spec.egress) ?? []).map((r, i) => {
    const field = `spec.${d}[${i}]`;
    const ruleProblems: string[] = [];
    const name = typeof r.name === 'string' && r.name ? r.name : undefined;
    if (!ACTIONS.has(r.action)) ruleProblems.push(`${field}.action: ${JSON.stringify(String(r.action).slice(0, 20))} is not Accept, Deny or Pass`);
    const peersIn = d === 'ingress' ? r.from : r.to;
    const peerField = `${field}.${d === 'ingress' ? 'from' : 'to'}`;
    if (!peersIn?.length) ruleProblems.push(`${peerField}: a rule needs at least one peer`);
    const peers = (peersIn ?? []).flatMap((p, j) => peer(p, d, `${peerField}[${j}]`, ruleProblems));
    const protocols: ClusterRule['protocols'] = r.protocols?.length ? r.protocols.flatMap((p, j) => protocol(p, `${field}.protocols[${j}]`, ruleProblems)) : 'all';
    problems.push(...ruleProblems);
    if (ruleProblems.length || ownProblems) return failedClosed(i, name, r.action);
    return { index: i, ...(name && { name }), action: r.action as Action, peers, protocols };
  });

  return { key: clusterPolicyKey(name), name, tier, priority, subject, ingress: rules('ingress'), egress: rules('egress'), problems };
}

/** Exactly one of namespaces and pods; one knit cannot read selects every pod (fail closed). */
function readSubject(s: ClusterNetworkPolicy['spec']['subject'] | undefined, problems: string[]): ClusterPolicy['subject'] {
  const all = { namespaces: everything, pods: everything };
  const given = s ? (['namespaces', 'pods'] as const).filter((k) => s[k] !== undefined) : [];
  if (given.length !== 1) {
    problems.push(`spec.subject: needs exactly one of namespaces and pods${given.length ? ` (has ${given.join(' and ')})` : ''}`);
    return all;
  }
  const sel = s!.namespaces !== undefined
    ? selectors(s!.namespaces, undefined, 'spec.subject.namespaces', undefined)
    : selectors(s!.pods!.namespaceSelector ?? {}, s!.pods!.podSelector ?? {}, 'spec.subject.pods.namespaceSelector', 'spec.subject.pods.podSelector');
  if ('problem' in sel) {
    problems.push(sel.problem);
    return all;
  }
  return sel;
}

function selectors(ns: LabelSelector, pods: LabelSelector | undefined, nsField: string, podField: string | undefined): { namespaces: Selector; pods: Selector } | { problem: string } {
  const n = compileSelector(ns, nsField);
  if ('problem' in n) return n;
  if (!pods) return { namespaces: n, pods: everything };
  const p = compileSelector(pods, podField!);
  if ('problem' in p) return p;
  return { namespaces: n, pods: p };
}

const PEER_KINDS = ['namespaces', 'pods', 'nodes', 'networks', 'domainNames'] as const;

function peer(p: ClusterNetworkPolicyPeer, d: Direction, field: string, problems: string[]): ClusterPeer[] {
  const given = PEER_KINDS.filter((k) => p[k] !== undefined);
  if (given.length !== 1) {
    problems.push(`${field}: a peer needs exactly one of ${d === 'ingress' ? 'namespaces and pods' : 'namespaces, pods, nodes, networks and domainNames'}${given.length ? ` (has ${given.join(' and ')})` : ''}`);
    return [];
  }
  const kind = given[0]!;
  if (d === 'ingress' && kind !== 'namespaces' && kind !== 'pods') {
    problems.push(`${field}.${kind}: not an ingress peer`);
    return [];
  }
  switch (kind) {
    case 'namespaces':
    case 'pods': {
      const sel = kind === 'namespaces'
        ? selectors(p.namespaces!, undefined, `${field}.namespaces`, undefined)
        : selectors(p.pods!.namespaceSelector ?? {}, p.pods!.podSelector ?? {}, `${field}.pods.namespaceSelector`, `${field}.pods.podSelector`);
      if ('problem' in sel) {
        problems.push(sel.problem);
        return [];
      }
      return [{ kind: 'pods', ...sel }];
    }
    case 'nodes': {
      const nodes = compileSelector(p.nodes!, `${field}.nodes`);
      if ('problem' in nodes) {
        problems.push(nodes.problem);
        return [];
      }
      return [{ kind: 'nodes', nodes }];
    }
    case 'networks':
      return p.networks!.flatMap((text, k) => {
        const c = tryParseCidr(String(text));
        if (!c) {
          problems.push(`${field}.networks[${k}]: ${JSON.stringify(String(text).slice(0, 45))} is not a CIDR`);
          return [];
        }
        return [{ kind: 'block' as const, family: c.family, cidr: String(text), ranges: [[c.network, cidrLast(c)]] as [bigint, bigint][] }];
      });
    case 'domainNames':
      // knit has no DNS view to match names with: the API allows domainNames only in Accept
      // rules, and a rule knit cannot read fails closed (matches nothing).
      problems.push(`${field}.domainNames: knit cannot match domain names`);
      return [];
  }
}

const PROTOCOL_KEYS = ['tcp', 'udp', 'sctp', 'destinationNamedPort'] as const;
const PROTOCOL_OF: Record<'tcp' | 'udp' | 'sctp', Protocol> = { tcp: 'TCP', udp: 'UDP', sctp: 'SCTP' };

function protocol(p: ClusterNetworkPolicyProtocol, field: string, problems: string[]): ClusterPort[] {
  const given = PROTOCOL_KEYS.filter((k) => p[k] !== undefined);
  if (given.length !== 1) {
    problems.push(`${field}: needs exactly one of tcp, udp, sctp and destinationNamedPort${given.length ? ` (has ${given.join(' and ')})` : ''}`);
    return [];
  }
  const key = given[0]!;
  if (key === 'destinationNamedPort') {
    const name = String(p.destinationNamedPort);
    if (!/^[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$/.test(name) || !/[a-z]/.test(name)) {
      problems.push(`${field}.destinationNamedPort: ${JSON.stringify(name.slice(0, 20))} is not a port name`);
      return [];
    }
    return [{ named: name }];
  }
  const proto = PROTOCOL_OF[key];
  const port = p[key]!.destinationPort;
  if (port === undefined) return [{ protocol: proto, from: 0, to: 65535 }];
  const f = `${field}.${key}.destinationPort`;
  const ok = (n: unknown): n is number => Number.isInteger(n) && (n as number) >= 1 && (n as number) <= 65535;
  if ((port.number !== undefined) === (port.range !== undefined)) {
    problems.push(`${f}: needs exactly one of number and range`);
    return [];
  }
  if (port.number !== undefined) {
    if (!ok(port.number)) {
      problems.push(`${f}.number: ${JSON.stringify(String(port.number).slice(0, 10))} is not a port`);
      return [];
    }
    return [{ protocol: proto, from: port.number, to: port.number }];
  }
  const { start, end } = port.range!;
  if (!ok(start) || !ok(end) || start >= end) {
    problems.push(`${f}.range: ${start}-${end} is not a range of ports (start < end)`);
    return [];
  }
  return [{ protocol: proto, from: start, to: end }];
}
