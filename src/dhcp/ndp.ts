// Router Solicitation in, Router Advertisement out (RFC 4861 sections 4.1, 4.2 and 4.6, RDNSS
// and DNSSL from RFC 8106).
import { Malformed } from './frame.js';
import { encodeDomainList } from './dhcpv4.js';

export const ICMP6_RS = 133;
export const ICMP6_RA = 134;
const RA_MANAGED = 0x80;
const RA_OTHER = 0x40;
const PIO_ON_LINK = 0x80;

/** Validity checks of RFC 4861 6.1.1 that apply on a point-to-point tap. */
export function checkRouterSolicitation(icmp: Buffer, hopLimit: number): void {
  if (icmp.length < 8) throw new Malformed('truncated');
  if (icmp[0] !== ICMP6_RS || icmp[1] !== 0 || hopLimit !== 255) throw new Malformed('bad-message');
  for (let i = 8; i < icmp.length; ) {
    const len = (icmp[i + 1] ?? 0) * 8;
    if (len === 0 || i + len > icmp.length) throw new Malformed('bad-message');
    i += len;
  }
}

export interface RaSpec {
  routerMac: Buffer;
  /** Seconds the guest keeps the default route; 0 = not a default router. */
  routerLifetime: number;
  mtu: number;
  /** On-link prefixes (L=1, A=0: addresses come from DHCPv6, flag M). */
  onLink: { prefix: Buffer; length: number }[];
  dns: Buffer[];
  search: string[];
}

const INFINITE = 0xffffffff;

/** The RA's ICMPv6 message; its checksum is filled in by the frame builder. */
export function buildRouterAdvertisement(s: RaSpec): Buffer {
  const head = Buffer.alloc(16);
  head[0] = ICMP6_RA;
  head[4] = 64; // cur hop limit
  head[5] = RA_MANAGED | RA_OTHER;
  head.writeUInt16BE(s.routerLifetime, 6);
  const opts: Buffer[] = [Buffer.concat([Buffer.from([1, 1]), s.routerMac])];
  const mtu = Buffer.alloc(8);
  mtu[0] = 5;
  mtu[1] = 1;
  mtu.writeUInt32BE(s.mtu, 4);
  opts.push(mtu);
  for (const p of s.onLink) {
    const pio = Buffer.alloc(32);
    pio[0] = 3;
    pio[1] = 4;
    pio[2] = p.length;
    pio[3] = PIO_ON_LINK;
    pio.writeUInt32BE(INFINITE, 4);
    pio.writeUInt32BE(INFINITE, 8);
    p.prefix.copy(pio, 16);
    opts.push(pio);
  }
  if (s.dns.length) {
    const rdnss = Buffer.alloc(8);
    rdnss[0] = 25;
    rdnss[1] = 1 + 2 * s.dns.length;
    rdnss.writeUInt32BE(INFINITE, 4);
    opts.push(rdnss, ...s.dns);
  }
  if (s.search.length) {
    const names = encodeDomainList(s.search);
    const padded = Buffer.concat([names, Buffer.alloc((8 - ((8 + names.length) % 8)) % 8)]);
    const dnssl = Buffer.alloc(8);
    dnssl[0] = 31;
    dnssl[1] = (8 + padded.length) / 8;
    dnssl.writeUInt32BE(INFINITE, 4);
    opts.push(dnssl, padded);
  }
  return Buffer.concat([head, ...opts]);
}
