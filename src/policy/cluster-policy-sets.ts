// The sets of the tiers' rules (pure): one per rule, family and (for an ingress named port) the
// numbers the subject gives the name, named after what it stands for and holding what the rule
// matches: its peers' addresses, or address . protocol . port (docs/network-policy.md,
// "ClusterNetworkPolicy"). Kept from pass to pass: each set remembers how it was made, so a
// change makes again only the sets it can reach (cluster-policy-incremental.ts).
import { tryParseIp, type IpFamily } from '../ipam/ip.js';
import { mergeIntervals, normalizeBoxes, intervalText, boxText, type Box } from './boxes.js';
import type { ClusterPeer, ClusterPolicy, ClusterRule } from './cluster-policy.js';
import { resolveClusterPort, type TierIndex } from './cluster-policy-evaluate.js';
import { addrsOf, fullRange, shortHash, type SetSpec } from './compile.js';
import { PROTOCOL_NUMBER, type Direction, type PolicyPod } from './types.js';

/** What a set holds depends on these alone. */
interface SetDef {
  policy: ClusterPolicy;
  rule: ClusterRule;
  direction: Direction;
  family: IpFamily;
  /** The subject whose numbers an ingress named port takes (any pod of the set's name). */
  subject: PolicyPod;
}

export class TierSets {
  readonly built = new Map<string, SetSpec>();
  private readonly defs = new Map<string, SetDef>();
  /** Made since the last reindex: from the view of this pass already. */
  private readonly fresh = new Set<string>();
  /** Each selector and network peer's pods in the view, kept as pods come and go. */
  private readonly peerPods = new Map<ClusterPeer, PolicyPod[]>();

  constructor(private tix: TierIndex) {}

  /** A new pass's view, the same but for the pods that `came` and went (`gone`: the old
   * versions of those that changed): what is built stays until forget, keepOnly or refresh
   * says otherwise. */
  reindex(tix: TierIndex, came: readonly PolicyPod[], gone: readonly PolicyPod[]): void {
    this.tix = tix;
    this.fresh.clear();
    const went = new Set(gone);
    for (const [peer, pods] of this.peerPods) {
      const kept = gone.some((q) => this.counts(peer, q)) ? pods.filter((q) => !went.has(q)) : pods;
      for (const q of came) if (this.counts(peer, q)) kept.push(q);
      this.peerPods.set(peer, kept);
    }
  }

  /** The sets of these policies (changed or gone) go: made anew when a chain looks them up. */
  forget(policies: ReadonlySet<string>): void {
    if (!policies.size) return;
    for (const [name, def] of this.defs) if (policies.has(def.policy.key)) this.drop(name);
  }

  /** Only the sets some chain looks up stay, and the pods of their peers. */
  keepOnly(used: ReadonlySet<string>): void {
    for (const name of this.defs.keys()) if (!used.has(name)) this.drop(name);
    const peers = new Set([...this.defs.values()].flatMap((d) => (d.rule.peers === 'all' ? [] : d.rule.peers)));
    for (const peer of this.peerPods.keys()) if (!peers.has(peer)) this.peerPods.delete(peer);
  }

  /** Makes again each set (but those made this pass) that one of `pods` (a pod that came or
   * went: old and new versions of one that changed) is among what it is made from, or that
   * names nodes when they changed. */
  refresh(pods: readonly PolicyPod[], nodesChanged: boolean): void {
    for (const [name, def] of this.defs) {
      if (this.fresh.has(name)) continue;
      if ((nodesChanged && namesNodes(def.rule)) || pods.some((pod) => this.reaches(def, pod))) this.built.set(name, this.build(def));
    }
  }

  private drop(name: string): void {
    this.defs.delete(name);
    this.built.delete(name);
  }

  /** Whether a pod counts for a set: among its peers' pods, or (an egress named port resolving
   * on the pods behind a network or every address) inside its ranges. */
  private reaches({ rule, direction, family }: SetDef, pod: PolicyPod): boolean {
    if (!addrsOf(pod, family).length) return false;
    const egressNamed = direction === 'egress' && rule.protocols !== 'all' && rule.protocols.some((m) => 'named' in m);
    if (rule.peers === 'all') return egressNamed;
    return rule.peers.some((peer) => (peer.kind === 'pods' || (egressNamed && peer.kind === 'block' && peer.family === family)) && this.counts(peer, pod));
  }

  /** Whether a pod is one of a peer's pods: selected by it, or with an address inside it. */
  private counts(peer: ClusterPeer, pod: PolicyPod): boolean {
    if (peer.kind === 'pods') return this.tix.podPeerHas(peer, pod);
    return peer.kind === 'block' && addrsOf(pod, peer.family).some((v) => peer.ranges.some(([lo, hi]) => v >= lo && v <= hi));
  }

  private podsOf(peer: ClusterPeer): PolicyPod[] {
    let pods = this.peerPods.get(peer);
    if (!pods) this.peerPods.set(peer, (pods = this.tix.ix.pods.filter((q) => this.counts(peer, q))));
    return pods;
  }

  /** The set rule r of p looks up in `subject`'s chain of one direction and family, made
   * when no chain looked it up yet. */
  nameFor(policy: ClusterPolicy, rule: ClusterRule, direction: Direction, family: IpFamily, subject: PolicyPod): { name: string; kind: SetSpec['kind'] } {
    const kind = rule.protocols === 'all' ? 'addr' : 'concat';
    // An ingress rule's named ports take the subject's own numbers: pods that number a name
    // differently need sets of their own.
    const variant = direction === 'ingress' && rule.protocols !== 'all' && rule.protocols.some((m) => 'named' in m) ? JSON.stringify(rule.protocols.flatMap((m) => resolveClusterPort(m, subject))) : '';
    const name = `c${direction[0]}${family}${kind[0]}_${shortHash(`${policy.key}\n${direction}\n${rule.index}\n${variant}`)}`;
    if (!this.built.has(name)) {
      const def = { policy, rule, direction, family, subject };
      this.defs.set(name, def);
      this.built.set(name, this.build(def));
      this.fresh.add(name);
    }
    return { name, kind };
  }

  /** A peer's address intervals in one family, and the pods behind them (where a named port
   * of an egress rule resolves; only then are a network's pods looked for). */
  private peer(peer: ClusterPeer, family: IpFamily): { ranges: [bigint, bigint][]; pods: () => PolicyPod[] } {
    switch (peer.kind) {
      case 'block':
        return peer.family === family ? { ranges: peer.ranges, pods: () => this.podsOf(peer) } : { ranges: [], pods: () => [] };
      case 'pods': {
        const pods = this.podsOf(peer);
        return { ranges: pods.flatMap((q) => addrsOf(q, family).map((v): [bigint, bigint] => [v, v])), pods: () => pods };
      }
      case 'nodes': {
        const ranges = this.tix.nodesOf(peer).flatMap((n) => n.ips.flatMap((ip) => {
          const a = tryParseIp(ip);
          return a?.family === family ? [[a.value, a.value] as [bigint, bigint]] : [];
        }));
        return { ranges, pods: () => [] };
      }
    }
  }

  private build({ rule: r, direction: d, family, subject }: SetDef): SetSpec {
    const peers = r.peers === 'all' ? [{ ranges: [fullRange(family)], pods: () => this.tix.ix.pods }] : r.peers.map((p) => this.peer(p, family));
    if (r.protocols === 'all') {
      const ranges = mergeIntervals(peers.flatMap((x) => x.ranges));
      return { family, kind: 'addr', elements: ranges.map(([lo, hi]) => intervalText(family, lo, hi)).sort() };
    }
    const boxes: Box[] = [];
    for (const peer of peers) {
      for (const m of r.protocols) {
        if (!('named' in m)) {
          for (const [lo, hi] of peer.ranges) boxes.push(box(lo, hi, PROTOCOL_NUMBER[m.protocol], m.from, m.to));
        } else if (d === 'ingress') {
          for (const x of resolveClusterPort(m, subject)) for (const [lo, hi] of peer.ranges) boxes.push(box(lo, hi, PROTOCOL_NUMBER[x.protocol], x.from, x.to));
        } else {
          // The destination pod's own number for the name: each of the peer's pods.
          for (const q of peer.pods()) for (const x of resolveClusterPort(m, q)) for (const v of addrsOf(q, family)) boxes.push(box(v, v, PROTOCOL_NUMBER[x.protocol], x.from, x.to));
        }
      }
    }
    return { family, kind: 'concat', elements: normalizeBoxes(boxes).map((b) => boxText(family, b)).sort() };
  }
}

const namesNodes = (r: ClusterRule) => r.peers !== 'all' && r.peers.some((p) => p.kind === 'nodes');

const box = (lo: bigint, hi: bigint, proto: number, tlo: number, thi: number): Box => ({ lo, hi, plo: proto, phi: proto, tlo, thi });
