// A sorted, merged set of closed address intervals: how a pool remembers what it must never
// hand out (gateway, reserved addresses and ranges) without listing every address.

export type Interval = readonly [lo: bigint, hi: bigint];

export class Intervals {
  readonly list: readonly Interval[];

  constructor(intervals: Iterable<Interval>) {
    const sorted = [...intervals].filter(([lo, hi]) => lo <= hi).sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    const merged: [bigint, bigint][] = [];
    for (const [lo, hi] of sorted) {
      const last = merged[merged.length - 1];
      if (last && lo <= last[1] + 1n) {
        if (hi > last[1]) last[1] = hi;
      } else {
        merged.push([lo, hi]);
      }
    }
    this.list = merged;
  }

  /** The interval holding addr (binary search), if any. */
  find(addr: bigint): Interval | undefined {
    let lo = 0;
    let hi = this.list.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const [a, b] = this.list[mid];
      if (addr < a) hi = mid - 1;
      else if (addr > b) lo = mid + 1;
      else return this.list[mid];
    }
    return undefined;
  }

  has(addr: bigint): boolean {
    return this.find(addr) !== undefined;
  }

  /** Intervals cut down to [lo, hi]. */
  clip(lo: bigint, hi: bigint): Intervals {
    return new Intervals(this.list.map(([a, b]): Interval => [a > lo ? a : lo, b < hi ? b : hi]));
  }

  /** How many addresses the intervals cover. */
  count(): bigint {
    return this.list.reduce((n, [a, b]) => n + (b - a + 1n), 0n);
  }
}
