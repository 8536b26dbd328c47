// Denied packets as log lines, pure: a packet the table logged (its IP header onwards, as
// nfnetlink_log copies it) read into its flow, the flow told once per quiet spell, and the
// JSON line that names the pods at both ends and the chain and policies that denied it
// (docs/network-policy.md, "Denied flows in a log").
import { formatIp } from '../ipam/ip.js';
import type { PolicyRuleset } from './compile.js';

const PROTOCOL_NAMES: Record<number, string> = { 1: 'ICMP', 6: 'TCP', 17: 'UDP', 58: 'ICMPv6', 132: 'SCTP' };
/** IPv6 extension headers walked to reach the transport header (RFC 8200 section 4). */
const IPV6_EXTENSIONS = new Set([0, 43, 60]);
const IPV6_FRAGMENT = 44;

export interface DeniedPacket {
  family: 4 | 6;
  /** IANA protocol number. */
  proto: number;
  src: string;
  dst: string;
  sport?: number;
  dport?: number;
  /** ICMP and ICMPv6: the message type, and the echo identifier for echo requests. */
  icmpType?: number;
  icmpId?: number;
}

const bytesToBig = (b: Buffer) => BigInt(`0x${b.toString('hex')}`);

/** The flow of a packet from its IP header on; undefined when the bytes are no IP packet of
 * that family. Ports are read only from a first fragment that holds them. */
export function parseIpPacket(family: 4 | 6, b: Buffer): DeniedPacket | undefined {
  let proto: number;
  let l4: number;
  let first = true;
  let src: string;
  let dst: string;
  if (family === 4) {
    if (b.length < 20 || b[0]! >> 4 !== 4) return undefined;
    l4 = (b[0]! & 0x0f) * 4;
    proto = b[9]!;
    first = (b.readUInt16BE(6) & 0x1fff) === 0;
    src = formatIp({ family: 4, value: bytesToBig(b.subarray(12, 16)) });
    dst = formatIp({ family: 4, value: bytesToBig(b.subarray(16, 20)) });
  } else {
    if (b.length < 40 || b[0]! >> 4 !== 6) return undefined;
    proto = b[6]!;
    l4 = 40;
    src = formatIp({ family: 6, value: bytesToBig(b.subarray(8, 24)) });
    dst = formatIp({ family: 6, value: bytesToBig(b.subarray(24, 40)) });
    while ((IPV6_EXTENSIONS.has(proto) || proto === IPV6_FRAGMENT) && l4 + 8 <= b.length) {
      const next = b[l4]!;
      if (proto === IPV6_FRAGMENT) {
        first = (b.readUInt16BE(l4 + 2) & 0xfff8) === 0;
        l4 += 8;
      } else l4 += (b[l4 + 1]! + 1) * 8;
      proto = next;
    }
  }
  const pkt: DeniedPacket = { family, proto, src, dst };
  if (!first) return pkt;
  if ((proto === 6 || proto === 17 || proto === 132) && l4 + 4 <= b.length) {
    pkt.sport = b.readUInt16BE(l4);
    pkt.dport = b.readUInt16BE(l4 + 2);
  } else if ((proto === 1 || proto === 58) && l4 + 2 <= b.length) {
    pkt.icmpType = b[l4]!;
    const echo = proto === 1 ? pkt.icmpType === 8 : pkt.icmpType === 128;
    if (echo && l4 + 6 <= b.length) pkt.icmpId = b.readUInt16BE(l4 + 4);
  }
  return pkt;
}

/** One flow's key: its protocol, addresses and ports (or ICMP type and echo id). */
export function flowKey(p: DeniedPacket): string {
  return [p.proto, p.src, p.sport ?? p.icmpType ?? '', p.dst, p.dport ?? p.icmpId ?? ''].join(' ');
}

/** Flows told recently, so that a flow's retransmissions (a SYN sent again, a client that
 * retries) make one line, not one per packet: a flow is told again only after `quietMs`
 * without a packet of it. At most `max` flows are remembered (the oldest go first). */
export class RecentFlows {
  private readonly last = new Map<string, number>();

  constructor(private readonly quietMs = 60_000, private readonly max = 10_000) {}

  /** Whether this packet's flow is to be told now (and remembers that it was seen). */
  fresh(key: string, nowMs: number): boolean {
    const seen = this.last.get(key);
    this.last.delete(key);
    this.last.set(key, nowMs); // most recent last: the map's order is its age
    if (this.last.size > this.max) this.last.delete(this.last.keys().next().value!);
    return seen === undefined || nowMs - seen >= this.quietMs;
  }
}

export interface DeniedLine {
  time: string;
  /** ingress: the destination pod refused it; egress: the source pod may not send it. */
  direction?: 'ingress' | 'egress';
  protocol: string;
  src: string;
  sport?: number;
  dst: string;
  dport?: number;
  icmpType?: number;
  /** "namespace/name" of the pods at each end, where the view has one. */
  srcPod?: string;
  dstPod?: string;
  /** The chain that dropped it (the log rule's prefix) and the policies that select its pod. */
  chain: string;
  policies: string[];
}

/** The line for a denied packet; `rs` is the ruleset that holds `chain` (the last one
 * applied), `podAt` names the pod of an address. */
export function deniedLine(p: DeniedPacket, timeMs: number, chain: string, rs: PolicyRuleset | undefined, podAt: (ip: string) => string | undefined): DeniedLine {
  const c = rs?.chains.get(chain);
  // A chain gone since (a change between the drop and this line) still says its direction:
  // compile.ts names group chains g<i|e><family>_<hash>.
  const direction = c?.direction ?? (/^gi/.test(chain) ? 'ingress' : /^ge/.test(chain) ? 'egress' : undefined);
  const srcPod = podAt(p.src);
  const dstPod = podAt(p.dst);
  return {
    time: new Date(timeMs).toISOString(),
    ...(direction && { direction }),
    protocol: PROTOCOL_NAMES[p.proto] ?? String(p.proto),
    src: p.src,
    ...(p.sport !== undefined && { sport: p.sport }),
    dst: p.dst,
    ...(p.dport !== undefined && { dport: p.dport }),
    ...(p.icmpType !== undefined && { icmpType: p.icmpType }),
    ...(srcPod && { srcPod }),
    ...(dstPod && { dstPod }),
    chain,
    // Only group chains log (tier chains' drops are counted, not logged).
    policies: c && 'policies' in c ? c.policies : [],
  };
}
