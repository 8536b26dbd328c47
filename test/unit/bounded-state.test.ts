// What the daemon keeps per sandbox goes when the sandbox does: after many attach/detach
// cycles, every Map, Set and array reachable from the sandbox manager (its IPAM pools, record
// store, locks, claims and caches) holds as many entries as after the first cycle, and a
// record store that wrote and removed as many records holds none. A daemon whose state grew
// with every pod it ever served would climb under churn however its heap is tuned (issue 27).
// Entries are counted, not bytes or time; the first cycle builds the caches that are made on
// first use (the netns index), so later cycles are compared with it.
import test from 'ava';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { RecordStore } from '../../src/store/record-store.js';
import { fixture, request } from '../helpers/core-fixture.js';

/** Entries of every Map, Set and array reachable from root through object fields (closures
 * are opaque), each container counted once; `skip` are objects that grow by design (a fake's
 * call log). */
function retainedEntries(root: unknown, skip: readonly object[] = []): number {
  const seen = new Set<object>(skip);
  let total = 0;
  const walk = (v: unknown): void => {
    if (v === null || typeof v !== 'object' || seen.has(v)) return;
    seen.add(v);
    if (v instanceof Map) {
      total += v.size;
      for (const [k, x] of v) {
        walk(k);
        walk(x);
      }
    } else if (v instanceof Set || Array.isArray(v)) {
      total += Array.isArray(v) ? v.length : v.size;
      for (const x of v) walk(x);
    } else if (!(v instanceof Promise)) {
      for (const key of Object.getOwnPropertyNames(v)) walk((v as Record<string, unknown>)[key]);
    }
  };
  walk(root);
  return total;
}

test('after 200 attach/detach cycles the manager keeps what it kept after the first, and no record', async (t) => {
  const f = fixture();
  const grows = [f.runner, f.events, f.records.written, f.extensions];
  const cycle = async (i: number) => {
    const id = `bs-${i}`;
    await f.manager.attach(request({ sandboxId: id, netnsPath: `/run/netns/bs-${i}` }));
    await f.manager.detach(id);
  };
  const idle = retainedEntries(f.manager, grows);
  await cycle(0);
  const afterOne = retainedEntries(f.manager, grows);
  for (let i = 1; i <= 200; i++) await cycle(i);
  await new Promise((r) => setImmediate(r)); // the reaper's notices
  t.is(f.records.docs.size, 0, 'no record is left');
  t.is(f.held(), 0, 'no address is held');
  t.is(retainedEntries(f.manager, grows), afterOne, `entries: idle ${idle}, after one cycle ${afterOne}`);
  // With sandboxes attached the count does grow, and it comes back when they go.
  for (let i = 300; i < 310; i++) await f.manager.attach(request({ sandboxId: `bs-${i}`, netnsPath: `/run/netns/bs-${i}` }));
  t.true(retainedEntries(f.manager, grows) > afterOne, 'the walk sees per-sandbox state (it can fail)');
  for (let i = 300; i < 310; i++) await f.manager.detach(`bs-${i}`);
  await new Promise((r) => setImmediate(r));
  t.is(retainedEntries(f.manager, grows), afterOne);
});

test('a record store that wrote and removed 500 records holds nothing of them', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'knit-bounded-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const store = await RecordStore.open<{ n: number }>(dir);
  const idle = retainedEntries(store);
  for (let i = 0; i < 500; i++) {
    await store.put(`r${i}`, { n: i });
    await store.put(`r${i}`, { n: i + 1 });
    await store.remove(`r${i}`);
  }
  await store.settled();
  await new Promise((r) => setImmediate(r)); // the write chains' last links
  t.is(store.size, 0);
  t.is(retainedEntries(store), idle);
});
