// The other nodes knit will not route, and why (docs/cluster.md, "Nodes knit does not route").
// A route for a peer's podCIDR sends that block's traffic to the peer: a block that overlaps one
// of this node's own would take this node's pods away from it (the more specific route wins,
// and so do the replies to what its pods masqueraded), and a gateway that is this node's own
// address routes to itself. Of peers whose blocks overlap, the Node created first keeps its
// routes: kube-controller-manager's range allocator never hands out a block an existing Node
// holds (pkg/controller/nodeipam/ipam/range_allocator.go, occupyCIDRs), so where one of two
// claims is the allocator's it is the older one, and a Node that appears later can never take a
// working route away. When the API cannot tell which came first, neither is routed.
import { cidrsOverlap, overlappingPairs, tryParseCidr, tryParseIp, type Cidr, type IpAddress } from '../ipam/ip.js';
import type { ClusterNode } from './types.js';

export const REFUSAL_REASONS = ['overlaps_this_node', 'overlaps_peer', 'this_node_address'] as const;
export type RefusalReason = (typeof REFUSAL_REASONS)[number];

export interface PeerRefusal {
  reasons: RefusalReason[];
  /** What NodeStatus, `knit check --node` and the log say. */
  problem: string;
}

/** One of this node's blocks, and how a message names it ("this node's podCIDR 10.1.1.0/24"). */
export interface OwnBlock {
  cidr: string;
  what: string;
}

/** When a Node was created, for ordering: Node.metadata.creationTimestamp has a resolution of
 * one second, so two Nodes can tie; one without it (the literal map has none, and refuses
 * overlaps itself) counts as the youngest. */
function creationTime(n: ClusterNode): number {
  const t = Date.parse(n.createdAt ?? '');
  return Number.isNaN(t) ? Infinity : t;
}

/** A node's podCIDRs and InternalIPs parsed, once per version of it: the sources hand out the
 * same object until the Node changes, and a pass looks at every node of the cluster. */
const parsedOf = new WeakMap<ClusterNode, { cidrs: { text: string; cidr: Cidr }[]; ips: { text: string; ip: IpAddress }[] }>();
function parsed(n: ClusterNode) {
  let p = parsedOf.get(n);
  if (!p) {
    p = {
      cidrs: n.podCIDRs.flatMap((text) => {
        const cidr = tryParseCidr(text);
        return cidr ? [{ text, cidr }] : [];
      }),
      ips: n.internalIPs.flatMap((text) => {
        const ip = tryParseIp(text);
        return ip ? [{ text, ip }] : [];
      }),
    };
    parsedOf.set(n, p);
  }
  return p;
}

/** At most this many clashes are named per peer (a Node claiming 10.0.0.0/8 overlaps them all). */
const NAMED_CLASHES = 3;

/** The peers (every node but `self`) knit refuses to route, by name. */
export function refusedPeers(o: { self: string; nodes: ClusterNode[]; ownBlocks: OwnBlock[]; ownAddresses: string[] }): Map<string, PeerRefusal> {
  const found = new Map<string, { reasons: Set<RefusalReason>; problems: string[] }>();
  const refuse = (node: string, reason: RefusalReason, problem: string) => {
    let entry = found.get(node);
    if (!entry) found.set(node, (entry = { reasons: new Set(), problems: [] }));
    entry.reasons.add(reason);
    entry.problems.push(problem);
  };
  const own = o.ownBlocks.flatMap((b) => {
    const cidr = tryParseCidr(b.cidr);
    return cidr ? [{ cidr, what: b.what }] : [];
  });
  // By value, per family: "fd6b:0::1" is "fd6b::1".
  const mine = { 4: new Set<bigint>(), 6: new Set<bigint>() };
  for (const text of o.ownAddresses) {
    const ip = tryParseIp(text);
    if (ip) mine[ip.family].add(ip.value);
  }
  const peers = o.nodes.filter((n) => n.name !== o.self);
  const claims: { peer: number; text: string; cidr: Cidr }[] = [];
  peers.forEach((peer, p) => {
    const { cidrs, ips } = parsed(peer);
    for (const { text, cidr } of cidrs) {
      claims.push({ peer: p, text, cidr });
      const hit = own.find((b) => cidrsOverlap(b.cidr, cidr));
      if (hit) refuse(peer.name, 'overlaps_this_node', `podCIDR ${text} overlaps ${hit.what}`);
    }
    for (const { text, ip } of ips) {
      if (mine[ip.family].has(ip.value)) refuse(peer.name, 'this_node_address', `InternalIP ${text} is an address of this node`);
    }
  });

  // Peers whose blocks overlap, oldest first: one is routed unless a block of its overlaps one
  // of an older peer that is routed, or of a peer of the same age that could be. A peer refused
  // above takes no part (every node refuses a Node claiming 10.0.0.0/8 for overlapping its own
  // block; it must not take the other nodes' routes with it).
  const clashes = peers.map(() => [] as { other: number; block: string; theirs: string }[]);
  for (const [i, j] of overlappingPairs(claims.map((c) => c.cidr))) {
    const a = claims[i]!;
    const b = claims[j]!;
    if (a.peer === b.peer || found.has(peers[a.peer]!.name) || found.has(peers[b.peer]!.name)) continue;
    clashes[a.peer]!.push({ other: b.peer, block: a.text, theirs: b.text });
    clashes[b.peer]!.push({ other: a.peer, block: b.text, theirs: a.text });
  }
  const age = peers.map(creationTime);
  const contested = peers.map((_, p) => p).filter((p) => clashes[p]!.length).sort((x, y) => (age[x]! < age[y]! ? -1 : age[x]! > age[y]! ? 1 : 0));
  const routed = new Set<number>();
  for (let from = 0; from < contested.length;) {
    let to = from;
    while (to < contested.length && age[contested[to]!] === age[contested[from]!]) to++;
    const group = contested.slice(from, to);
    const eligible = new Set(group.filter((p) => !clashes[p]!.some((c) => routed.has(c.other))));
    for (const p of group) {
      const older = clashes[p]!.filter((c) => routed.has(c.other));
      const tied = clashes[p]!.filter((c) => c.other !== p && eligible.has(c.other) && eligible.has(p));
      if (!older.length && !tied.length) continue;
      const named = [
        ...older.map((c) => `podCIDR ${c.block} overlaps node ${peers[c.other]!.name}'s podCIDR ${c.theirs}, whose Node was created first`),
        ...tied.map((c) => `podCIDR ${c.block} overlaps node ${peers[c.other]!.name}'s podCIDR ${c.theirs}, and neither Node was created before the other`),
      ];
      const more = named.length - NAMED_CLASHES;
      refuse(peers[p]!.name, 'overlaps_peer', named.slice(0, NAMED_CLASHES).join('; ') + (more > 0 ? ` (and ${more} more)` : ''));
    }
    for (const p of group) if (!found.has(peers[p]!.name)) routed.add(p);
    from = to;
  }
  return new Map([...found].map(([node, f]) => [node, { reasons: [...f.reasons], problem: `refused: ${f.problems.join('; ')}` }]));
}
