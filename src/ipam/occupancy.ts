// Which addresses of a pool's dynamic range are taken, and where the next free one is.
// Two shapes, one contract: a bitmap for ranges up to 2^24 addresses (every v4 pool a node
// would use; 2 MiB at most) and a sparse set for the rest (a v6 /64 has 2^64 addresses, which
// must never be materialized). Both search next-fit from a cursor and wrap once.

import type { Intervals } from './intervals.js';

export interface Occupancy {
  isTaken(addr: bigint): boolean;
  take(addr: bigint): void;
  free(addr: bigint): void;
  /** The first free address at or after `from`, wrapping past the end once; undefined if full. */
  findFree(from: bigint): bigint | undefined;
}

/** Largest dynamic range kept as a bitmap. */
export const BITMAP_LIMIT = 1n << 24n;

export function makeOccupancy(start: bigint, end: bigint, excluded: Intervals): Occupancy {
  return end - start + 1n <= BITMAP_LIMIT
    ? new BitmapOccupancy(start, end, excluded)
    : new SparseOccupancy(start, end, excluded);
}

/** One bit per address of [start, end]; excluded addresses are set from the start, so a
 * search skips them like taken ones, and full 32-bit words are skipped in one step. */
export class BitmapOccupancy implements Occupancy {
  private readonly words: Uint32Array;
  private readonly length: number;

  constructor(private readonly start: bigint, end: bigint, excluded: Intervals) {
    this.length = Number(end - start + 1n);
    this.words = new Uint32Array(Math.ceil(this.length / 32));
    for (const [lo, hi] of excluded.list) {
      for (let i = Number(lo - start); i <= Number(hi - start); i++) this.set(i);
    }
    // Bits past the end of the range are set so the word scan never returns them.
    for (let i = this.length; i < this.words.length * 32; i++) this.set(i);
  }

  isTaken(addr: bigint): boolean {
    const i = Number(addr - this.start);
    return (this.words[i >>> 5] & (1 << (i & 31))) !== 0;
  }

  take(addr: bigint): void {
    this.set(Number(addr - this.start));
  }

  free(addr: bigint): void {
    const i = Number(addr - this.start);
    this.words[i >>> 5] &= ~(1 << (i & 31));
  }

  findFree(from: bigint): bigint | undefined {
    const first = Number(from - this.start);
    const hit = this.scan(first, this.length) ?? this.scan(0, first);
    return hit === undefined ? undefined : this.start + BigInt(hit);
  }

  private set(i: number): void {
    this.words[i >>> 5] |= 1 << (i & 31);
  }

  /** First clear bit in [from, to). */
  private scan(from: number, to: number): number | undefined {
    let i = from;
    while (i < to) {
      const word = this.words[i >>> 5];
      if (word === 0xffffffff) {
        i = (i | 31) + 1;
        continue;
      }
      if ((word & (1 << (i & 31))) === 0) return i;
      i++;
    }
    return undefined;
  }
}

/** Taken addresses in a Set; excluded ones as intervals, jumped over whole. A probe walks past
 * at most (taken + excluded intervals) addresses before it finds a free one, however big the
 * range, and next-fit keeps that walk short in practice. */
export class SparseOccupancy implements Occupancy {
  private readonly taken = new Set<bigint>();

  constructor(private readonly start: bigint, private readonly end: bigint, private readonly excluded: Intervals) {}

  isTaken(addr: bigint): boolean {
    return this.taken.has(addr) || this.excluded.has(addr);
  }

  take(addr: bigint): void {
    this.taken.add(addr);
  }

  free(addr: bigint): void {
    this.taken.delete(addr);
  }

  findFree(from: bigint): bigint | undefined {
    let addr = from;
    let wrapped = false;
    for (;;) {
      if (addr > this.end) {
        if (wrapped) return undefined;
        wrapped = true;
        addr = this.start;
      }
      if (wrapped && addr >= from) return undefined;
      const interval = this.excluded.find(addr);
      if (interval) addr = interval[1] + 1n;
      else if (this.taken.has(addr)) addr++;
      else return addr;
    }
  }
}
