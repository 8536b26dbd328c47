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
