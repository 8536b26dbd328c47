// The bitmap and the sparse set are two shapes of one contract: driven through the same random
// (seeded) sequence of takes, frees and next-fit searches, they must answer identically.
import test from 'ava';
import { Intervals } from '../../src/ipam/intervals.js';
import { BitmapOccupancy, SparseOccupancy } from '../../src/ipam/occupancy.js';

function lcg(seed: number) {
  let s = seed >>> 0;
  return (n: number) => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s % n;
  };
}

test('bitmap and sparse occupancy agree on every search', (t) => {
  const start = 1000n;
  const end = 1199n; // 200 addresses: several 32-bit words, last one partial
  const excluded = new Intervals([[1000n, 1000n], [1031n, 1064n], [1199n, 1199n]]);
  const bitmap = new BitmapOccupancy(start, end, excluded);
  const sparse = new SparseOccupancy(start, end, excluded);
  const rand = lcg(42);
  let found = 0;
  for (let step = 0; step < 5000; step++) {
    const addr = start + BigInt(rand(200));
    const op = rand(3);
    if (op === 0 && !excluded.has(addr)) {
      bitmap.take(addr);
      sparse.take(addr);
    } else if (op === 1 && !excluded.has(addr)) {
      bitmap.free(addr);
      sparse.free(addr);
    } else {
      const a = bitmap.findFree(addr);
      t.is(a, sparse.findFree(addr), `search from ${addr} at step ${step}`);
      if (a !== undefined) {
        found++;
        t.false(bitmap.isTaken(a));
      }
    }
    t.is(bitmap.isTaken(addr), sparse.isTaken(addr));
  }
  t.true(found > 0);
});

test('a full range has no free address, and one freed address is found from anywhere', (t) => {
  for (const Occ of [BitmapOccupancy, SparseOccupancy]) {
    const occ = new Occ(0n, 99n, new Intervals([[10n, 19n]]));
    for (let a = 0n; a < 100n; a++) if (a < 10n || a > 19n) occ.take(a);
    t.is(occ.findFree(0n), undefined, Occ.name);
    t.is(occ.findFree(57n), undefined, Occ.name);
    occ.free(5n);
    t.is(occ.findFree(57n), 5n, `${Occ.name} wraps to the start`);
    t.is(occ.findFree(5n), 5n, Occ.name);
  }
});

test('intervals merge, clip, count and find', (t) => {
  const iv = new Intervals([[5n, 9n], [1n, 2n], [3n, 4n], [20n, 30n], [25n, 26n], [8n, 3n]]);
  t.deepEqual(iv.list, [[1n, 9n], [20n, 30n]]);
  t.is(iv.count(), 20n);
  t.deepEqual(iv.find(25n), [20n, 30n]);
  t.is(iv.find(15n), undefined);
  t.deepEqual(iv.clip(5n, 22n).list, [[5n, 9n], [20n, 22n]]);
  t.deepEqual(iv.clip(10n, 19n).list, []);
});
