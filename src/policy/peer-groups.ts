// The pods that count as peers on this node, and for each selector that a compiled set looks
// up (a peer's namespace and pod selectors, or a block whose pods resolve an egress named
// port) the pods it holds now. A pod that comes, changes or goes is matched against the groups
// that could hold it, not the other way round, so a change costs the number of groups in use,
// not the number of pods; and only the sets of a group whose pods changed are told
// (docs/network-policy.md, "Changes").
import type { IpFamily } from '../ipam/ip.js';
import { addrsOf, type PodsPeer } from './compile.js';
import type { Policy } from './normalize.js';
import type { Selector } from './selector.js';
import type { PolicyPod } from './types.js';

/** What a group selects: pods of a namespace selector's namespaces (or of one namespace, for
 * a peer without one) that its pod selector matches; or pods with an address in a block. */
type Match =
  | { kind: 'pods'; namespace?: string; namespaces?: Selector; pods: Selector }
  | { kind: 'block'; family: IpFamily; ranges: [bigint, bigint][] };

interface Group {
  key: string;
  match: Match;
  /** Peer id → pod. */
  members: Map<string, PolicyPod>;
  /** The sets that look this group up: it lives while there is one. */
  sets: Set<string>;
}

export const groupKeyOfPeer = (p: Policy, peer: PodsPeer) => `${peer.namespaces === 'own' ? `own:${p.namespace}` : `ns:${peer.namespaces.key}`}|${peer.pods.key}`;
export const groupKeyOfBlock = (family: IpFamily, ranges: [bigint, bigint][]) => `block:${family}:${ranges.map(([lo, hi]) => `${lo}-${hi}`).join(',')}`;

export class PeerGroups {
  private readonly peers = new Map<string, PolicyPod>();
  private readonly byNamespace = new Map<string, Set<string>>();
  private readonly groups = new Map<string, Group>();
  /** Groups confined to one namespace (peers without a namespace selector), by namespace. */
  private readonly ofNamespace = new Map<string, Set<Group>>();
  /** Groups any pod may be in. */
  private readonly anywhere = new Set<Group>();

  constructor(private readonly namespaceLabels: (ns: string) => Record<string, string>) {}

  pods(): IterableIterator<PolicyPod> {
    return this.peers.values();
  }

  get(id: string): PolicyPod | undefined {
    return this.peers.get(id);
  }

  /** A peer came (or changed) or, with no pod, went. `touch` hears each set whose group's
   * pods changed: membership, or a member's addresses or named ports. */
  set(id: string, pod: PolicyPod | undefined, touch: (set: string) => void): void {
    const old = this.peers.get(id);
    if (old === pod) return;
    if (old) {
      this.peers.delete(id);
      this.byNamespace.get(old.namespace)?.delete(id);
    }
    if (pod) {
      this.peers.set(id, pod);
      let ids = this.byNamespace.get(pod.namespace);
      if (!ids) this.byNamespace.set(pod.namespace, (ids = new Set()));
      ids.add(id);
    }
    const candidates = new Set(this.anywhere);
    for (const ns of [old?.namespace, pod?.namespace]) if (ns !== undefined) for (const g of this.ofNamespace.get(ns) ?? []) candidates.add(g);
    for (const g of candidates) {
      const was = g.members.has(id);
      const is = !!pod && this.matches(g.match, pod);
      if (!was && !is) continue;
      if (is) g.members.set(id, pod!);
      else g.members.delete(id);
      if (was !== is || !samePeerFacts(old!, pod!)) for (const s of g.sets) touch(s);
    }
  }

  /** A namespace's labels changed: its pods move in and out of namespace selectors' groups. */
  namespaceChanged(ns: string, before: Record<string, string>, after: Record<string, string>, touch: (set: string) => void): void {
    for (const g of this.anywhere) {
      if (g.match.kind !== 'pods' || !g.match.namespaces) continue;
      if (g.match.namespaces.matches(before) === g.match.namespaces.matches(after)) continue;
      let changed = false;
      for (const id of this.byNamespace.get(ns) ?? []) {
        const pod = this.peers.get(id)!;
        const is = this.matches(g.match, pod);
        if (is === g.members.has(id)) continue;
        changed = true;
        if (is) g.members.set(id, pod);
        else g.members.delete(id);
      }
      if (changed) for (const s of g.sets) touch(s);
    }
  }

  /** The pods of a selector peer, for a set that looks it up; made (every peer matched once)
   * when the first set needs it. */
  acquirePeer(p: Policy, peer: PodsPeer, set: string): void {
    const own = peer.namespaces === 'own';
    this.acquire(groupKeyOfPeer(p, peer), { kind: 'pods', ...(own ? { namespace: p.namespace } : { namespaces: peer.namespaces as Selector }), pods: peer.pods }, set);
  }

  acquireBlock(family: IpFamily, ranges: [bigint, bigint][], set: string): void {
    this.acquire(groupKeyOfBlock(family, ranges), { kind: 'block', family, ranges }, set);
  }

  /** A set no longer looks the group up; the last one's going drops it. */
  release(key: string, set: string): void {
    const g = this.groups.get(key);
    if (!g) return;
    g.sets.delete(set);
    if (g.sets.size) return;
    this.groups.delete(key);
    if (g.match.kind === 'pods' && g.match.namespace !== undefined) this.ofNamespace.get(g.match.namespace)?.delete(g);
    else this.anywhere.delete(g);
  }

  members(key: string): IterableIterator<PolicyPod> {
    const g = this.groups.get(key);
    if (!g) throw new Error(`policy compiler: no peer group ${key}`);
    return g.members.values();
  }

  private acquire(key: string, match: Match, set: string): void {
    let g = this.groups.get(key);
    if (!g) {
      g = { key, match, members: new Map(), sets: new Set() };
      const ids = match.kind === 'pods' && match.namespace !== undefined ? this.byNamespace.get(match.namespace) ?? [] : this.peers.keys();
      for (const id of ids) {
        const pod = this.peers.get(id)!;
        if (this.matches(match, pod)) g.members.set(id, pod);
      }
      this.groups.set(key, g);
      if (match.kind === 'pods' && match.namespace !== undefined) {
        let gs = this.ofNamespace.get(match.namespace);
        if (!gs) this.ofNamespace.set(match.namespace, (gs = new Set()));
        gs.add(g);
      } else this.anywhere.add(g);
    }
    g.sets.add(set);
  }

  private matches(m: Match, pod: PolicyPod): boolean {
    if (m.kind === 'block') return addrsOf(pod, m.family).some((v) => m.ranges.some(([lo, hi]) => v >= lo && v <= hi));
    const nsOk = m.namespace !== undefined ? pod.namespace === m.namespace : m.namespaces!.matches(this.namespaceLabels(pod.namespace));
    return nsOk && m.pods.matches(pod.labels);
  }
}

/** Whether what a set reads of a pod (its addresses, its named ports) is the same. */
function samePeerFacts(a: PolicyPod, b: PolicyPod): boolean {
  return a.ips.length === b.ips.length && a.ips.every((ip, i) => ip === b.ips[i]) && JSON.stringify(a.ports ?? []) === JSON.stringify(b.ports ?? []);
}
