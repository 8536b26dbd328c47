// IP address and CIDR arithmetic for both families. Addresses are bigints so v4 and v6 share
// one code path (a v6 address does not fit in a double). Parsers are strict: the text is
// config or API input, and an ambiguous form (octal-looking "010.0.0.1", a zone id) is
// rejected rather than guessed at.
import { quote } from '../base/errors.js';

export type IpFamily = 4 | 6;

export interface IpAddress {
  family: IpFamily;
  value: bigint;
}

export interface Cidr {
  family: IpFamily;
  /** The address as written, host bits included ("10.0.0.5/24" keeps .5). */
  address: bigint;
  prefixLen: number;
  /** address with the host bits cleared. */
  network: bigint;
}

export const familyBits = (family: IpFamily): number => (family === 4 ? 32 : 128);

export class IpParseError extends Error {
  constructor(readonly input: string, what: string) {
    super(`${quote(input)} is not a valid ${what}`);
    this.name = 'IpParseError';
  }
}

const V4_OCTET = /^(0|[1-9][0-9]{0,2})$/;
const V6_GROUP = /^[0-9a-fA-F]{1,4}$/;

export function parseIPv4(text: string): bigint | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  let value = 0n;
  for (const part of parts) {
    if (!V4_OCTET.test(part)) return undefined;
    const octet = Number(part);
    if (octet > 255) return undefined;
    value = (value << 8n) | BigInt(octet);
  }
  return value;
}

export function parseIPv6(text: string): bigint | undefined {
  if (text.length === 0 || text.length > 45) return undefined;
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const head = groupsOf(halves[0], halves.length === 2 ? 'head' : 'whole');
  const tail = halves.length === 2 ? groupsOf(halves[1], 'tail') : [];
  if (!head || !tail) return undefined;
  const present = head.length + tail.length;
  // "::" stands for one or more zero groups (RFC 4291 §2.2); without it we need all eight.
  if (halves.length === 2 ? present > 7 : present !== 8) return undefined;
  const groups = [...head, ...new Array<number>(8 - present).fill(0), ...tail];
  return groups.reduce((acc, g) => (acc << 16n) | BigInt(g), 0n);
}

/** Hex groups of one side of "::"; a trailing dotted quad counts as two groups. */
function groupsOf(part: string, position: 'head' | 'tail' | 'whole'): number[] | undefined {
  if (part === '') return position === 'whole' ? undefined : [];
  const fields = part.split(':');
  const groups: number[] = [];
  for (let i = 0; i < fields.length; i++) {
    const field = fields[i];
    const last = i === fields.length - 1;
    if (last && position !== 'head' && field.includes('.')) {
      const v4 = parseIPv4(field);
      if (v4 === undefined) return undefined;
      groups.push(Number(v4 >> 16n), Number(v4 & 0xffffn));
    } else if (V6_GROUP.test(field)) {
      groups.push(parseInt(field, 16));
    } else {
      return undefined;
    }
  }
  return groups;
}

/** The family of an address or CIDR already known to parse, told by its text alone. */
export const familyOfText = (text: string): IpFamily => (text.includes(':') ? 6 : 4);

export function tryParseIp(text: string): IpAddress | undefined {
  if (text.includes(':')) {
    const value = parseIPv6(text);
    return value === undefined ? undefined : { family: 6, value };
  }
  const value = parseIPv4(text);
  return value === undefined ? undefined : { family: 4, value };
}

export function parseIp(text: string): IpAddress {
  const ip = tryParseIp(text);
  if (!ip) throw new IpParseError(text, 'IP address');
  return ip;
}

export function formatIPv4(value: bigint): string {
  return [24n, 16n, 8n, 0n].map((shift) => String((value >> shift) & 0xffn)).join('.');
}

/** RFC 5952 text: lower case, no leading zeros, the longest run (>= 2) of zero groups as "::"
 * (the first one on a tie), and ::ffff:a.b.c.d for IPv4-mapped addresses (§5). */
export function formatIPv6(value: bigint): string {
  if (value >> 32n === 0xffffn) return `::ffff:${formatIPv4(value & 0xffffffffn)}`;
  const groups: number[] = [];
  for (let shift = 112n; shift >= 0n; shift -= 16n) groups.push(Number((value >> shift) & 0xffffn));
  let bestStart = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = (gs: number[]) => gs.map((g) => g.toString(16)).join(':');
  if (bestStart < 0) return hex(groups);
  return `${hex(groups.slice(0, bestStart))}::${hex(groups.slice(bestStart + bestLen))}`;
}

export function formatIp(ip: IpAddress): string {
  return ip.family === 4 ? formatIPv4(ip.value) : formatIPv6(ip.value);
}

/** Canonical text of an address given as text (e.g. "FD00:0::1" -> "fd00::1"). */
export function normalizeIp(text: string): string {
  return formatIp(parseIp(text));
}

const PREFIX = /^(0|[1-9][0-9]{0,2})$/;

export function tryParseCidr(text: string): Cidr | undefined {
  const slash = text.indexOf('/');
  if (slash < 0) return undefined;
  const ip = tryParseIp(text.slice(0, slash));
  const prefixText = text.slice(slash + 1);
  if (!ip || !PREFIX.test(prefixText)) return undefined;
  const prefixLen = Number(prefixText);
  if (prefixLen > familyBits(ip.family)) return undefined;
  return { family: ip.family, address: ip.value, prefixLen, network: ip.value & prefixMask(ip.family, prefixLen) };
}

export function parseCidr(text: string): Cidr {
  const cidr = tryParseCidr(text);
  if (!cidr) throw new IpParseError(text, 'CIDR');
  return cidr;
}

export function prefixMask(family: IpFamily, prefixLen: number): bigint {
  const bits = BigInt(familyBits(family));
  const all = (1n << bits) - 1n;
  return (all << (bits - BigInt(prefixLen))) & all;
}

/** Number of addresses the prefix spans (2^host bits). */
export function cidrSize(cidr: Cidr): bigint {
  return 1n << BigInt(familyBits(cidr.family) - cidr.prefixLen);
}

export function cidrLast(cidr: Cidr): bigint {
  return cidr.network + cidrSize(cidr) - 1n;
}

export function cidrContains(cidr: Cidr, ip: IpAddress): boolean {
  return ip.family === cidr.family && ip.value >= cidr.network && ip.value <= cidrLast(cidr);
}

export function cidrsOverlap(a: Cidr, b: Cidr): boolean {
  return a.family === b.family && a.network <= cidrLast(b) && b.network <= cidrLast(a);
}

/** Every pair of CIDRs in the list that overlap, as index pairs [outer, inner]: one sort and a
 * sweep, not a comparison per pair (a cluster has a podCIDR per node, thousands of them). Two
 * CIDRs either nest or are apart, so the blocks still open where one starts all contain it. */
export function overlappingPairs(cidrs: readonly Cidr[]): [number, number][] {
  const order = cidrs.map((_, i) => i).sort((i, j) => {
    const a = cidrs[i]!;
    const b = cidrs[j]!;
    return a.family - b.family || (a.network < b.network ? -1 : a.network > b.network ? 1 : a.prefixLen - b.prefixLen);
  });
  const open: { at: number; last: bigint }[] = [];
  const pairs: [number, number][] = [];
  for (const at of order) {
    const c = cidrs[at]!;
    while (open.length && (cidrs[open[open.length - 1]!.at]!.family !== c.family || open[open.length - 1]!.last < c.network)) open.pop();
    for (const o of open) pairs.push([o.at, at]);
    open.push({ at, last: cidrLast(c) });
  }
  return pairs;
}

/** The address n places after the network address (n = 0 is the network address). */
export function nthAddress(cidr: Cidr, n: bigint): IpAddress {
  if (n < 0n || n >= cidrSize(cidr)) {
    throw new RangeError(`address #${n} is outside ${formatCidr(cidr)}`);
  }
  return { family: cidr.family, value: cidr.network + n };
}

/** "network/prefix" in canonical form (host bits cleared). */
export function formatCidr(cidr: Cidr): string {
  return `${formatIp({ family: cidr.family, value: cidr.network })}/${cidr.prefixLen}`;
}
