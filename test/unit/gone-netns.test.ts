// The gone-netns sweep in core (src/core/gone-netns.ts, SandboxManager.reapGoneNetns) over the
// fakes of test/helpers/core-fixture.ts: which sandboxes it detaches, through which path, what
// it releases and announces, and the retry of an attach whose pool ran dry. The kernel side (what
// "gone" means, the devices) is test/kernel/netns-gone.test.ts.
import test from 'ava';
import { KnitError } from '../../src/base/errors.js';
import type { WatchEvent } from '../../src/base/types.js';
import { GoneNetnsSweeper } from '../../src/core/gone-netns.js';
import type { SandboxRecord } from '../../src/core/record.js';
import { fixture, request } from '../helpers/core-fixture.js';

const pod = (n: number) => request({ sandboxId: `sb-${n}`, netnsPath: `/run/netns/tg-${n}` });

test('a sweep detaches exactly the sandboxes whose netns is gone, releases their addresses and says why', async (t) => {
  const f = fixture();
  await f.manager.attach(pod(1));
  await f.manager.attach(pod(2));
  const events: WatchEvent[] = [];
  f.manager.watch((e) => events.push(e));
  t.deepEqual(await f.manager.reapGoneNetns('test'), [], 'nothing is gone yet');

  f.runner.gone.add('/run/netns/tg-1');
  const before = f.runner.applied.length;
  t.deepEqual(await f.manager.reapGoneNetns('test'), ['sb-1']);
  t.is(f.records.get('sb-1'), undefined);
  t.is(f.records.get('sb-2')?.state, 'attached', 'a live one stays');
  t.is(f.held(), 2, "sb-1's two addresses are free, sb-2's held");
  t.deepEqual(events, [{ type: 'detach', sandboxId: 'sb-1', reason: 'netns-gone' }]);
  // The normal inverses ran, minus those inside the gone netns.
  const undone = f.runner.applied.slice(before);
  t.true(undone.length > 0);
  t.true(undone.every((x) => x.netns === undefined), 'only host-side inverses run');
  t.true(f.events.includes('store.put detaching'), 'journalled as a detach');
});

test('a pool that runs dry sweeps, then the attach takes the freed address', async (t) => {
  const f = fixture();
  // A /24 has 253 addresses for pods past the gateway: fill it.
  const size = f.ipam.usage('pods').find((p) => p.family === 4)!.free;
  for (let n = 1; n <= size; n++) await f.manager.attach(pod(n));
  const full = await t.throwsAsync(f.manager.attach(pod(size + 1)), { instanceOf: KnitError });
  t.is(full!.code, 'RESOURCE_EXHAUSTED', 'nothing gone: the pool is really full');

  const freed = f.records.get('sb-7')!.allocations[0].addresses.find((a) => a.family === 4)!.address;
  f.runner.gone.add('/run/netns/tg-7');
  const result = await f.manager.attach(pod(size + 1));
  t.true(result.ips.some((i) => i.address.split('/')[0] === freed), "sb-7's IPv4 address, swept and taken");
  t.is(f.records.get('sb-7'), undefined);
});

test('a sandbox with a Detach under way is left to it, not detached twice', async (t) => {
  const f = fixture();
  await f.manager.attach(pod(1));
  const events: WatchEvent[] = [];
  f.manager.watch((e) => events.push(e));
  f.runner.gone.add('/run/netns/tg-1');
  const detached = f.manager.detach('sb-1'); // holds the lock first
  const swept = f.manager.reapGoneNetns('test'); // finds it gone, and busy
  await detached;
  t.deepEqual(await swept, []);
  t.deepEqual(events, [{ type: 'detach', sandboxId: 'sb-1' }], 'one detach, the caller\'s');
});

test('sweeps run one at a time; asks meanwhile share the next one', async (t) => {
  let finds = 0;
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const sweeper = new GoneNetnsSweeper(
    () => {
      finds++;
      return [{ sandboxId: `s${finds}` } as SandboxRecord];
    },
    async () => {
      await gate;
      return true;
    },
  );
  const first = sweeper.sweep('a');
  const second = sweeper.sweep('b');
  const third = sweeper.sweep('c');
  t.is(finds, 1, 'the second waits for the first');
  release();
  t.deepEqual(await first, ['s1']);
  t.deepEqual(await second, ['s2']);
  t.is(await third, await second, 'the third shares the second');
  t.is(finds, 2);
});

test('an attach that leaves a pool with under 1/16 free sweeps in the background', async (t) => {
  const f = fixture();
  const size = f.ipam.usage('pods').find((p) => p.family === 4)!.free;
  const lowAt = size - Math.floor((size - 1) / 16); // the attach after which free * 16 < size
  for (let n = 1; n < lowAt; n++) await f.manager.attach(pod(n));
  f.runner.gone.add('/run/netns/tg-3');
  t.truthy(f.records.get('sb-3'), 'not low yet: nothing swept');
  await f.manager.attach(pod(lowAt));
  // A sweep asked for now runs after the background one: it finds nothing left to do.
  t.deepEqual(await f.manager.reapGoneNetns('test'), [], 'the background sweep took it');
  t.is(f.records.get('sb-3'), undefined, 'swept without a pool running dry');
});
