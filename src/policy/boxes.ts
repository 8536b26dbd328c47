// The elements of one rule's set, made disjoint. nftables' concatenated interval sets
// (pipapo) refuse an element that starts or ends inside another one, and a delete must name
// an element exactly as it was added; so each set holds a canonical, non-overlapping cover of
// what its rule allows, and knit diffs sets element by element against that cover.
import { formatIp, prefixMask, familyBits, type IpFamily } from '../ipam/ip.js';

/** addresses lo..hi × IP protocols plo..phi × ports tlo..thi, all inclusive. */
export interface Box {
  lo: bigint;
  hi: bigint;
  plo: number;
  phi: number;
  tlo: number;
  thi: number;
}

/** Address intervals merged: sorted, disjoint, adjacent ones joined. */
export function mergeIntervals(list: [bigint, bigint][]): [bigint, bigint][] {
  const sorted = [...list].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const out: [bigint, bigint][] = [];
  for (const [lo, hi] of sorted) {
    const last = out[out.length - 1];
    if (last && lo <= last[1] + 1n) {
      if (hi > last[1]) last[1] = hi;
    } else out.push([lo, hi]);
  }
  return out;
}

/** Cuts [min, max] at every box's bounds along one axis. */
function elementary(bounds: [number, number][]): [number, number][] {
  const cuts = [...new Set(bounds.flatMap(([lo, hi]) => [lo, hi + 1]))].sort((a, b) => a - b);
  const out: [number, number][] = [];
  for (let i = 0; i + 1 < cuts.length; i++) out.push([cuts[i]!, cuts[i + 1]! - 1]);
  return out;
}

/** A disjoint cover of the boxes' union, the same for the same union however it was given. */
export function normalizeBoxes(boxes: Box[]): Box[] {
  if (!boxes.length) return [];
  const protos = elementary(boxes.map((b) => [b.plo, b.phi]));
  const out: Box[] = [];
  let prev: { key: string; cells: { t: [number, number]; addrs: [bigint, bigint][] }[]; p: [number, number] } | undefined;
  const flush = () => {
    if (!prev) return;
    for (const c of prev.cells) for (const [lo, hi] of c.addrs) out.push({ lo, hi, plo: prev.p[0], phi: prev.p[1], tlo: c.t[0], thi: c.t[1] });
  };
  for (const p of protos) {
    const inP = boxes.filter((b) => b.plo <= p[0] && b.phi >= p[1]);
    if (!inP.length) {
      flush();
      prev = undefined;
      continue;
    }
    const cells: { t: [number, number]; addrs: [bigint, bigint][] }[] = [];
    for (const t of elementary(inP.map((b) => [b.tlo, b.thi]))) {
      const addrs = mergeIntervals(inP.filter((b) => b.tlo <= t[0] && b.thi >= t[1]).map((b) => [b.lo, b.hi]));
      if (!addrs.length) continue;
      const last = cells[cells.length - 1];
      // Neighbouring port ranges with the same addresses become one range.
      if (last && last.t[1] + 1 === t[0] && sameIntervals(last.addrs, addrs)) last.t = [last.t[0], t[1]];
      else cells.push({ t, addrs });
    }
    const key = JSON.stringify(cells, (_k, v) => (typeof v === 'bigint' ? v.toString() : v));
    // Neighbouring protocols with the same ports and addresses become one range too.
    if (prev && prev.p[1] + 1 === p[0] && prev.key === key) prev.p = [prev.p[0], p[1]];
    else {
      flush();
      prev = { key, cells, p };
    }
  }
  flush();
  return out;
}

function sameIntervals(a: [bigint, bigint][], b: [bigint, bigint][]): boolean {
  return a.length === b.length && a.every(([lo, hi], i) => lo === b[i]![0] && hi === b[i]![1]);
}

/** nft's text for an address interval: the address, a prefix when it is one, else a range. */
export function intervalText(family: IpFamily, lo: bigint, hi: bigint): string {
  const ip = (v: bigint) => formatIp({ family, value: v });
  if (lo === hi) return ip(lo);
  const bits = familyBits(family);
  const size = hi - lo + 1n;
  if ((size & (size - 1n)) === 0n) {
    const len = bits - (size.toString(2).length - 1);
    if ((lo & prefixMask(family, len)) === lo) return `${ip(lo)}/${len}`;
  }
  return `${ip(lo)}-${ip(hi)}`;
}

const rangeText = (lo: number, hi: number) => (lo === hi ? String(lo) : `${lo}-${hi}`);

export function boxText(family: IpFamily, b: Box): string {
  return `${intervalText(family, b.lo, b.hi)} . ${rangeText(b.plo, b.phi)} . ${rangeText(b.tlo, b.thi)}`;
}
