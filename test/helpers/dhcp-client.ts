// A DHCP client's frames, built field by field from RFC 2131 figure 1 / RFC 8415 / RFC 4861,
// for tests that play the guest: what a guest at `mac` broadcasts, and the answer read back.
import { ipv4Bytes, ipv6Bytes, linkLocalOf, macBytes } from '../../src/dhcp/addr.js';
import { buildIcmpv6Frame, buildUdpFrame, parseFrame } from '../../src/dhcp/frame.js';
import { encodeOptions, parseOptions } from '../../src/dhcp/dhcpv4.js';

export const DISCOVER = 1;
export const REQUEST = 3;
export const RELEASE = 7;

export function dhcpFrame(type: number, mac: string, o: { chaddr?: string; flags?: number; ciaddr?: string; options?: [number, Buffer][] } = {}): Buffer {
  const msg = Buffer.alloc(240);
  msg[0] = 1; // BOOTREQUEST
  msg[1] = 1; // Ethernet
  msg[2] = 6;
  msg.writeUInt32BE(0xdeadbeef, 4);
  msg.writeUInt16BE(o.flags ?? 0, 10);
  ipv4Bytes(o.ciaddr ?? '0.0.0.0').copy(msg, 12);
  macBytes(o.chaddr ?? mac).copy(msg, 28);
  msg.writeUInt32BE(0x63825363, 236);
  const payload = Buffer.concat([msg, encodeOptions([[53, Buffer.from([type])], ...(o.options ?? [])])]);
  return buildUdpFrame({
    dstMac: macBytes('ff:ff:ff:ff:ff:ff'), srcMac: macBytes(mac), srcIp: ipv4Bytes('0.0.0.0'), dstIp: ipv4Bytes('255.255.255.255'),
    srcPort: 68, dstPort: 67, payload,
  });
}

/** The DHCPv4 answers among frames: yiaddr, message type and options of each. */
export function dhcpAnswers(frames: Buffer[]) {
  return frames.flatMap((frame) => {
    try {
      const f = parseFrame(frame, 65535);
      if (f.family !== 4 || f.srcPort !== 67) return [];
      const options = parseOptions(f.payload.subarray(240));
      return [{ f, yiaddr: [...f.payload.subarray(16, 20)].join('.'), type: options.get(53)?.[0], options }];
    } catch {
      return [];
    }
  });
}

export function routerSolicitation(mac: string): Buffer {
  return buildIcmpv6Frame(macBytes('33:33:00:00:00:02'), macBytes(mac), linkLocalOf(mac), ipv6Bytes('ff02::2'), Buffer.concat([Buffer.from([133, 0, 0, 0, 0, 0, 0, 0]), Buffer.from([1, 1]), macBytes(mac)]));
}

export function solicit6(mac: string): Buffer {
  const opt = (code: number, v: Buffer) => Buffer.concat([Buffer.from([code >> 8, code & 0xff, v.length >> 8, v.length & 0xff]), v]);
  return buildUdpFrame({
    dstMac: macBytes('33:33:00:01:00:02'), srcMac: macBytes(mac), srcIp: linkLocalOf(mac), dstIp: ipv6Bytes('ff02::1:2'), srcPort: 546, dstPort: 547,
    payload: Buffer.concat([Buffer.from([1, 1, 2, 3]), opt(1, Buffer.concat([Buffer.from([0, 3, 0, 1]), macBytes(mac)])), opt(3, Buffer.alloc(12))]),
  });
}

/** The frame as a guest's kernel hands it to a NIC that completes checksums (virtio-net's
 * VIRTIO_NET_HDR_F_NEEDS_CSUM; Linux udp_set_csum): the UDP (or ICMPv6) checksum field holds the
 * folded sum of the pseudo-header alone. start/offset: where the NIC starts summing and where
 * the result goes (virtio's csum_start, csum_offset), counted from the Ethernet header. */
export function partialChecksum(frame: Buffer): { frame: Buffer; start: number; offset: number } {
  const out = Buffer.from(frame);
  const ip = out.subarray(14);
  let pseudo: Buffer;
  let start: number;
  let protocol: number;
  if (ip[0]! >> 4 === 4) {
    const ihl = (ip[0]! & 0x0f) * 4;
    protocol = ip[9]!;
    start = 14 + ihl;
    const len = ip.readUInt16BE(2) - ihl;
    pseudo = Buffer.concat([ip.subarray(12, 20), Buffer.from([0, protocol, len >> 8, len & 0xff])]);
  } else {
    protocol = ip[6]!;
    start = 14 + 40;
    const len = ip.readUInt16BE(4);
    pseudo = Buffer.concat([ip.subarray(8, 40), Buffer.from([0, 0, len >> 8, len & 0xff, 0, 0, 0, protocol])]);
  }
  let sum = 0;
  for (let i = 0; i < pseudo.length; i += 2) sum += pseudo.readUInt16BE(i);
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  const offset = protocol === 58 ? 2 : 6;
  out.writeUInt16BE(sum, start + offset);
  return { frame: out, start, offset };
}

/** A DHCPv4 message from the guest's kernel UDP socket, unicast from its address to the
 * server's (a RENEW or a RELEASE): what udhcpc, dhclient and dhcpcd send once bound. */
export function unicastDhcpFrame(type: number, mac: string, serverMac: string, from: string, to: string, options: [number, Buffer][] = []): Buffer {
  const broadcast = parseFrame(dhcpFrame(type, mac, { ciaddr: from, options }), 65535);
  return buildUdpFrame({ dstMac: macBytes(serverMac), srcMac: macBytes(mac), srcIp: ipv4Bytes(from), dstIp: ipv4Bytes(to), srcPort: 68, dstPort: 67, payload: broadcast.payload });
}

/** A DISCOVER whose options go on in `file` (128 bytes at 108) and `sname` (64 at 44), as option
 * 52 in `options` says (RFC 2131 4.1): the fields' bytes as given. */
export function overloadedDiscover(mac: string, options: [number, Buffer][], file?: Buffer, sname?: Buffer): Buffer {
  const msg = Buffer.from(parseFrame(dhcpFrame(DISCOVER, mac, { options }), 65535).payload);
  sname?.copy(msg, 44, 0, 64);
  file?.copy(msg, 108, 0, 128);
  return buildUdpFrame({
    dstMac: macBytes('ff:ff:ff:ff:ff:ff'), srcMac: macBytes(mac), srcIp: ipv4Bytes('0.0.0.0'), dstIp: ipv4Bytes('255.255.255.255'), srcPort: 68, dstPort: 67, payload: msg,
  });
}
