// Address text <-> bytes for the packet codecs (MAC, IPv4, IPv6), strict: a malformed string
// throws, since every address here comes from knit's own records.

export function macBytes(mac: string): Buffer {
  const parts = mac.split(':');
  if (parts.length !== 6 || parts.some((p) => !/^[0-9a-f]{2}$/i.test(p))) throw new Error(`not a MAC address: ${mac}`);
  return Buffer.from(parts.map((p) => parseInt(p, 16)));
}

export const macText = (b: Buffer): string => [...b.subarray(0, 6)].map((x) => x.toString(16).padStart(2, '0')).join(':');

export function ipv4Bytes(ip: string): Buffer {
  const parts = ip.split('.');
  if (parts.length !== 4 || parts.some((p) => !/^\d{1,3}$/.test(p) || Number(p) > 255)) throw new Error(`not an IPv4 address: ${ip}`);
  return Buffer.from(parts.map(Number));
}

export const ipv4Text = (b: Buffer): string => [...b.subarray(0, 4)].join('.');

export function ipv6Bytes(ip: string): Buffer {
  const [head, tail, extra] = ip.split('::');
  if (extra !== undefined) throw new Error(`not an IPv6 address: ${ip}`);
  const groups = (s: string | undefined) => (s ? s.split(':') : []);
  const h = groups(head);
  const t = groups(tail);
  const fill = tail === undefined ? 0 : 8 - h.length - t.length;
  const all = [...h, ...Array(fill).fill('0'), ...t];
  if (all.length !== 8 || fill < 0 || all.some((g) => !/^[0-9a-f]{1,4}$/i.test(g))) throw new Error(`not an IPv6 address: ${ip}`);
  const out = Buffer.alloc(16);
  all.forEach((g, i) => out.writeUInt16BE(parseInt(g, 16), i * 2));
  return out;
}

export function ipv6Text(b: Buffer): string {
  const g = Array.from({ length: 8 }, (_, i) => b.readUInt16BE(i * 2).toString(16));
  // The longest run of zero groups (two or more) becomes "::" (RFC 5952).
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; i++) {
    let j = i;
    while (j < 8 && g[j] === '0') j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
  }
  if (best < 0) return g.join(':');
  return `${g.slice(0, best).join(':')}::${g.slice(best + bestLen).join(':')}`;
}

/** "10.1.2.3/24" -> { address, prefix }. */
export function splitCidr(cidr: string): { address: string; prefix: number } {
  const [address, p] = cidr.split('/');
  return { address: address!, prefix: Number(p ?? (address!.includes(':') ? 128 : 32)) };
}

/** The IPv4 netmask of a prefix length as bytes (24 -> 255.255.255.0). */
export function ipv4Mask(prefix: number): Buffer {
  const m = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  const b = Buffer.alloc(4);
  b.writeUInt32BE(m);
  return b;
}

/** The modified EUI-64 link-local address of a MAC (RFC 4291 appendix A). */
export function linkLocalOf(mac: string): Buffer {
  const m = macBytes(mac);
  return Buffer.from([0xfe, 0x80, 0, 0, 0, 0, 0, 0, m[0]! ^ 0x02, m[1]!, m[2]!, 0xff, 0xfe, m[3]!, m[4]!, m[5]!]);
}
