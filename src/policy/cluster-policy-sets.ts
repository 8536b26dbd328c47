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

  constructor(private tix: TierIndex) {}

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
    }
    return { name, kind };
  }

  /** A peer's address intervals in one family, and the pods behind them (where a named port
   * of an egress rule resolves). */
  private peer(peer: ClusterPeer, family: IpFamily): { ranges: [bigint, bigint][]; pods: PolicyPod[] } {
    const { ix } = this.tix;
    switch (peer.kind) {
      case 'block': {
        if (peer.family !== family) return { ranges: [], pods: [] };
        return { ranges: peer.ranges, pods: ix.pods.filter((q) => addrsOf(q, family).some((v) => peer.ranges.some(([lo, hi]) => v >= lo && v <= hi))) };
      }
      case 'pods': {
        const pods = ix.pods.filter((q) => this.tix.podPeerHas(peer, q));
        return { ranges: pods.flatMap((q) => addrsOf(q, family).map((v): [bigint, bigint] => [v, v])), pods };
      }
      case 'nodes': {
        const ranges = this.tix.nodesOf(peer).flatMap((n) => n.ips.flatMap((ip) => {
          const a = tryParseIp(ip);
          return a?.family === family ? [[a.value, a.value] as [bigint, bigint]] : [];
        }));
        return { ranges, pods: [] };
      }
    }
  }

  private build({ rule: r, direction: d, family, subject }: SetDef): SetSpec {
    const peers = r.peers === 'all' ? [{ ranges: [fullRange(family)], pods: this.tix.ix.pods }] : r.peers.map((p) => this.peer(p, family));
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
          for (const q of peer.pods) for (const x of resolveClusterPort(m, q)) for (const v of addrsOf(q, family)) boxes.push(box(v, v, PROTOCOL_NUMBER[x.protocol], x.from, x.to));
        }
      }
    }
    return { family, kind: 'concat', elements: normalizeBoxes(boxes).map((b) => boxText(family, b)).sort() };
  }
}

const box = (lo: bigint, hi: bigint, proto: number, tlo: number, thi: number): Box => ({ lo, hi, plo: proto, phi: proto, tlo, thi });
