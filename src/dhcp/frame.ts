// Ethernet frames carrying UDP over IPv4 or IPv6, or ICMPv6: parsed strictly (every length
// checked against the bytes that arrived) and built with correct checksums. The DHCP and RA
// codecs sit on top; nothing here knows about them.
import { ipv4Text, ipv6Text, macText } from './addr.js';

export const ETH_HEADER = 14;
export const ETHERTYPE_IPV4 = 0x0800;
export const ETHERTYPE_IPV6 = 0x86dd;
export const PROTO_UDP = 17;
export const PROTO_ICMPV6 = 58;
const IPV4_HEADER = 20;
const IPV6_HEADER = 40;
const UDP_HEADER = 8;

/** Why a frame was not taken apart: the reason becomes a metric label. */
export class Malformed extends Error {
  constructor(readonly reason: 'truncated' | 'oversized' | 'bad-header' | 'bad-checksum' | 'bad-message') {
    super(reason);
  }
}

export interface ParsedFrame {
  srcMac: string;
  dstMac: string;
  family: 4 | 6;
  srcIp: string;
  dstIp: string;
  hopLimit: number;
  /** PROTO_UDP or PROTO_ICMPV6 */
  protocol: number;
  srcPort: number;
  dstPort: number;
  /** UDP payload, or the whole ICMPv6 message. */
  payload: Buffer;
}

/** Sum of 16-bit words, folded (RFC 1071). */
function onesSum(bufs: Buffer[], start = 0): number {
  let sum = start;
  for (const b of bufs) {
    for (let i = 0; i + 1 < b.length; i += 2) sum += b.readUInt16BE(i);
    if (b.length % 2) sum += b[b.length - 1]! << 8;
  }
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  return sum;
}
const checksum = (bufs: Buffer[]): number => ~onesSum(bufs) & 0xffff;

function pseudoHeader(family: 4 | 6, src: Buffer, dst: Buffer, protocol: number, length: number): Buffer {
  if (family === 4) {
    const p = Buffer.alloc(12);
    src.copy(p, 0);
    dst.copy(p, 4);
    p[9] = protocol;
    p.writeUInt16BE(length, 10);
    return p;
  }
  const p = Buffer.alloc(40);
  src.copy(p, 0);
  dst.copy(p, 16);
  p.writeUInt32BE(length, 32);
  p[39] = protocol;
  return p;
}

/** Takes a frame apart; throws Malformed. maxFrame: the largest frame the link carries.
 * partialChecksum: the sender left its UDP/ICMPv6 checksum to the NIC (the packet socket's
 * TP_STATUS_CSUMNOTREADY, packet(7)): the field then holds the pseudo-header's sum alone. */
export function parseFrame(frame: Buffer, maxFrame: number, partialChecksum = false): ParsedFrame {
  if (frame.length > maxFrame) throw new Malformed('oversized');
  if (frame.length < ETH_HEADER) throw new Malformed('truncated');
  const ethertype = frame.readUInt16BE(12);
  const head = { dstMac: macText(frame.subarray(0, 6)), srcMac: macText(frame.subarray(6, 12)) };
  if (ethertype === ETHERTYPE_IPV4) return { ...head, ...parseIpv4(frame.subarray(ETH_HEADER), partialChecksum) };
  if (ethertype === ETHERTYPE_IPV6) return { ...head, ...parseIpv6(frame.subarray(ETH_HEADER), partialChecksum) };
  throw new Malformed('bad-header');
}

function parseIpv4(ip: Buffer, partialChecksum: boolean): Omit<ParsedFrame, 'srcMac' | 'dstMac'> {
  if (ip.length < IPV4_HEADER) throw new Malformed('truncated');
  const ihl = (ip[0]! & 0x0f) * 4;
  if (ip[0]! >> 4 !== 4 || ihl < IPV4_HEADER) throw new Malformed('bad-header');
  const total = ip.readUInt16BE(2);
  if (total > ip.length || ihl > ip.length) throw new Malformed('truncated');
  if (total < ihl) throw new Malformed('bad-header');
  // A fragment (MF set or an offset) is never a whole DHCP message.
  if ((ip.readUInt16BE(6) & 0x3fff) !== 0) throw new Malformed('bad-header');
  if (checksum([ip.subarray(0, ihl)]) !== 0) throw new Malformed('bad-checksum');
  if (ip[9] !== PROTO_UDP) throw new Malformed('bad-header');
  const src = ip.subarray(12, 16);
  const dst = ip.subarray(16, 20);
  const udp = parseUdp(ip.subarray(ihl, total), 4, src, dst, partialChecksum);
  return { family: 4, srcIp: ipv4Text(src), dstIp: ipv4Text(dst), hopLimit: ip[8]!, protocol: PROTO_UDP, ...udp };
}

function parseIpv6(ip: Buffer, partialChecksum: boolean): Omit<ParsedFrame, 'srcMac' | 'dstMac'> {
  if (ip.length < IPV6_HEADER) throw new Malformed('truncated');
  if (ip[0]! >> 4 !== 6) throw new Malformed('bad-header');
  const payloadLength = ip.readUInt16BE(4);
  if (IPV6_HEADER + payloadLength > ip.length) throw new Malformed('truncated');
  const next = ip[6]!;
  const src = ip.subarray(8, 24);
  const dst = ip.subarray(24, 40);
  const body = ip.subarray(IPV6_HEADER, IPV6_HEADER + payloadLength);
  const base = { family: 6 as const, srcIp: ipv6Text(src), dstIp: ipv6Text(dst), hopLimit: ip[7]! };
  if (next === PROTO_UDP) return { ...base, protocol: PROTO_UDP, ...parseUdp(body, 6, src, dst, partialChecksum) };
  if (next === PROTO_ICMPV6) {
    if (body.length < 4) throw new Malformed('truncated');
    if (!transportChecksumOk(pseudoHeader(6, src, dst, PROTO_ICMPV6, body.length), body, 2, partialChecksum)) throw new Malformed('bad-checksum');
    return { ...base, protocol: PROTO_ICMPV6, srcPort: 0, dstPort: 0, payload: body };
  }
  // Extension headers: neither a Solicit nor an RS carries one.
  throw new Malformed('bad-header');
}

/** Whether a UDP or ICMPv6 segment's checksum (at `field`) is right. One the sender left to the
 * NIC is first completed as the NIC would complete it (the sum over the segment, the seed in the
 * field included: RFC 1071's sum is linear), then checked as the receiver checks it: a seed that
 * is not the sum of this pseudo-header (another address, length or protocol) still fails. */
function transportChecksumOk(pseudo: Buffer, segment: Buffer, field: number, partial: boolean): boolean {
  if (!partial) return checksum([pseudo, segment]) === 0;
  const completed = Buffer.from(segment);
  completed.writeUInt16BE(checksum([segment]), field);
  return checksum([pseudo, completed]) === 0;
}

function parseUdp(udp: Buffer, family: 4 | 6, src: Buffer, dst: Buffer, partialChecksum: boolean): { srcPort: number; dstPort: number; payload: Buffer } {
  if (udp.length < UDP_HEADER) throw new Malformed('truncated');
  const length = udp.readUInt16BE(4);
  if (length < UDP_HEADER) throw new Malformed('bad-header');
  if (length > udp.length) throw new Malformed('truncated');
  const sum = udp.readUInt16BE(6);
  // IPv4 may leave the checksum out (0); IPv6 may not (RFC 8200 8.1).
  const checked = sum !== 0 || family === 6 || partialChecksum;
  if (checked && !transportChecksumOk(pseudoHeader(family, src, dst, PROTO_UDP, length), udp.subarray(0, length), 6, partialChecksum)) {
    throw new Malformed('bad-checksum');
  }
  return { srcPort: udp.readUInt16BE(0), dstPort: udp.readUInt16BE(2), payload: udp.subarray(UDP_HEADER, length) };
}

function ethernet(dstMac: Buffer, srcMac: Buffer, ethertype: number): Buffer {
  const h = Buffer.alloc(ETH_HEADER);
  dstMac.copy(h, 0);
  srcMac.copy(h, 6);
  h.writeUInt16BE(ethertype, 12);
  return h;
}

export interface UdpFrame {
  dstMac: Buffer;
  srcMac: Buffer;
  srcIp: Buffer;
  dstIp: Buffer;
  srcPort: number;
  dstPort: number;
  payload: Buffer;
}

/** An Ethernet frame with UDP over IPv4 (TTL 64, DF clear) or IPv6 (hop limit 64), by srcIp's length. */
export function buildUdpFrame(f: UdpFrame): Buffer {
  const family = f.srcIp.length === 4 ? 4 : 6;
  const udp = Buffer.alloc(UDP_HEADER);
  udp.writeUInt16BE(f.srcPort, 0);
  udp.writeUInt16BE(f.dstPort, 2);
  udp.writeUInt16BE(UDP_HEADER + f.payload.length, 4);
  const sum = checksum([pseudoHeader(family, f.srcIp, f.dstIp, PROTO_UDP, UDP_HEADER + f.payload.length), udp, f.payload]);
  udp.writeUInt16BE(sum === 0 ? 0xffff : sum, 6);
  return family === 4
    ? Buffer.concat([ethernet(f.dstMac, f.srcMac, ETHERTYPE_IPV4), ipv4Header(f.srcIp, f.dstIp, UDP_HEADER + f.payload.length), udp, f.payload])
    : Buffer.concat([ethernet(f.dstMac, f.srcMac, ETHERTYPE_IPV6), ipv6Header(f.srcIp, f.dstIp, PROTO_UDP, 64, UDP_HEADER + f.payload.length), udp, f.payload]);
}

/** An Ethernet frame with an ICMPv6 message (its checksum filled in) at hop limit 255, as ND requires. */
export function buildIcmpv6Frame(dstMac: Buffer, srcMac: Buffer, srcIp: Buffer, dstIp: Buffer, message: Buffer): Buffer {
  const msg = Buffer.from(message);
  msg.writeUInt16BE(0, 2);
  msg.writeUInt16BE(checksum([pseudoHeader(6, srcIp, dstIp, PROTO_ICMPV6, msg.length), msg]), 2);
  return Buffer.concat([ethernet(dstMac, srcMac, ETHERTYPE_IPV6), ipv6Header(srcIp, dstIp, PROTO_ICMPV6, 255, msg.length), msg]);
}

function ipv4Header(src: Buffer, dst: Buffer, payloadLength: number): Buffer {
  const h = Buffer.alloc(IPV4_HEADER);
  h[0] = 0x45;
  h.writeUInt16BE(IPV4_HEADER + payloadLength, 2);
  h[8] = 64;
  h[9] = PROTO_UDP;
  src.copy(h, 12);
  dst.copy(h, 16);
  h.writeUInt16BE(checksum([h]), 10);
  return h;
}

function ipv6Header(src: Buffer, dst: Buffer, next: number, hopLimit: number, payloadLength: number): Buffer {
  const h = Buffer.alloc(IPV6_HEADER);
  h.writeUInt32BE(0x60000000, 0);
  h.writeUInt16BE(payloadLength, 4);
  h[6] = next;
  h[7] = hopLimit;
  src.copy(h, 8);
  dst.copy(h, 24);
  return h;
}
