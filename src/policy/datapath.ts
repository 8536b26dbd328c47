// The compiled ruleset read as the kernel runs it (ruleset.ts's base chains, the verdict maps,
// each group chain's lookups, ClusterNetworkPolicy's tier chains): which of the flows
// conntrack holds a change now denies, so their entries go (src/daemon/policy.ts), and what
// the unit tests compare with the oracle.
// Replies are not judged here: the base chain accepts them before any of this.
import { formatIp, tryParseIp, type IpFamily } from '../ipam/ip.js';
import type { PolicyRuleset, SetSpec } from './compile.js';
import type { Box } from './boxes.js';
import { isTierChain } from './cluster-policy-nft.js';

function interval(text: string): [bigint, bigint] {
  if (text.includes('/')) {
    const [a, len] = text.split('/');
    const ip = tryParseIp(a!)!;
    const host = BigInt((ip.family === 4 ? 32 : 128) - Number(len));
    return [ip.value, ip.value + (1n << host) - 1n];
  }
  const dash = text.lastIndexOf('-');
  if (dash > 0 && tryParseIp(text.slice(0, dash))) return [tryParseIp(text.slice(0, dash))!.value, tryParseIp(text.slice(dash + 1))!.value];
  const v = tryParseIp(text)!.value;
  return [v, v];
}
const nums = (text: string): [number, number] => {
  const [a, b] = text.split('-');
  return [Number(a), Number(b ?? a)];
};

/** A set's elements as numbers, parsed once per set (a conntrack sweep asks many times). */
const parsedSets = new WeakMap<SetSpec, Box[]>();
function boxesOf(set: SetSpec): Box[] {
  let boxes = parsedSets.get(set);
  if (!boxes) {
    boxes = set.elements.map((e) => {
      const parts = e.split(' . ');
      const [lo, hi] = interval(parts[0]!);
      const [plo, phi] = set.kind === 'addr' ? [0, 255] : nums(parts[1]!);
      const [tlo, thi] = set.kind === 'addr' ? [0, 65535] : nums(parts[2]!);
      return { lo, hi, plo, phi, tlo, thi };
    });
    parsedSets.set(set, boxes);
  }
  return boxes;
}

export interface Packet {
  src: string;
  dst: string;
  proto: number;
  dport?: number;
}

/** What this node's forward hook does with an original-direction packet. */
export function forwardVerdict(rs: PolicyRuleset, pkt: Packet): 'accept' | 'drop' {
  const s = tryParseIp(pkt.src)!;
  const d = tryParseIp(pkt.dst)!;
  const family = s.family as IpFamily;
  if (s.value === d.value && rs.self[family].includes(formatIp(s))) return 'accept';
  for (const [dir, addr] of [['in', d], ['out', s]] as const) {
    const target = rs.maps[`${dir}${family}` as const].get(formatIp(addr));
    if (target && !chainAllows(rs, target, dir === 'in' ? s.value : d.value, pkt)) return 'drop';
  }
  return 'accept';
}

/** What this node's input hook does with a pod's original-direction packet to the node itself. */
export function localVerdict(rs: PolicyRuleset, pkt: Packet): 'accept' | 'drop' {
  const s = tryParseIp(pkt.src)!;
  const target = rs.maps[`local${s.family}` as const].get(formatIp(s));
  return !target || chainAllows(rs, target, tryParseIp(pkt.dst)!.value, pkt) ? 'accept' : 'drop';
}

/** Whether the chain a map sent the packet to lets it through: a NetworkPolicy group chain
 * when one of its rules allows it; a ClusterNetworkPolicy tier chain by its first matching
 * rule's action, going on to the chain after the tier on a Pass or no match. */
function chainAllows(rs: PolicyRuleset, name: string, peer: bigint, pkt: Packet): boolean {
  for (let chain = rs.chains.get(name)!; ;) {
    if (!isTierChain(chain)) return chain.rules.some((r) => !r.set || setHas(rs.sets.get(r.set)!, peer, pkt));
    const hit = chain.rules.find((r) => !r.set || setHas(rs.sets.get(r.set)!, peer, pkt));
    if (hit?.action === 'Accept') return true;
    if (hit?.action === 'Deny') return false;
    if (!chain.next) return true;
    chain = rs.chains.get(chain.next)!;
  }
}

function setHas(set: SetSpec, peer: bigint, pkt: Packet): boolean {
  return boxesOf(set).some((b) => {
    if (peer < b.lo || peer > b.hi) return false;
    if (set.kind === 'addr') return true;
    return pkt.proto >= b.plo && pkt.proto <= b.phi && pkt.dport !== undefined && pkt.dport >= b.tlo && pkt.dport <= b.thi;
  });
}
