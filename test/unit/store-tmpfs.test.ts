// On tmpfs (/run on a node) the store writes synchronously; the contract is the same.
import test from 'ava';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { RecordStore } from '../../src/store/index.js';
import { onTmpfs } from '../../src/store/atomic.js';

test('a store on tmpfs round-trips, orders writes, removes, and clears crash leftovers', async (t) => {
  const dir = mkdtempSync('/dev/shm/knit-store-');
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  t.true(onTmpfs(dir), '/dev/shm is a tmpfs');
  t.false(onTmpfs('/proc'), 'procfs is not');
  const s = await RecordStore.open<{ n: number }>(path.join(dir, 'r'));
  const writes = Array.from({ length: 20 }, (_, n) => s.put('a/b', { n }));
  await Promise.all(writes);
  t.deepEqual(s.get('a/b'), { n: 19 });
  const files = readdirSync(path.join(dir, 'r'));
  t.is(files.length, 1);
  t.deepEqual(JSON.parse(readFileSync(path.join(dir, 'r', files[0]), 'utf8')), { n: 19 });
  writeFileSync(path.join(dir, 'r', `.x.1-1.tmp`), '{"n": 1');
  const again = await RecordStore.open<{ n: number }>(path.join(dir, 'r'));
  t.deepEqual(again.get('a/b'), { n: 19 });
  t.is(readdirSync(path.join(dir, 'r')).length, 1, 'the leftover temporary file is gone');
  await again.remove('a/b');
  t.is(again.get('a/b'), undefined);
  t.deepEqual(readdirSync(path.join(dir, 'r')), []);
});
