// The bound on CNI chains at once: never more than its size running, the rest in arrival order,
// and a chain that fails gives its slot back.
import test from 'ava';
import { ChainSlots } from '../../src/cni-exec/slots.js';

test('at most size chains run at once; the others start in the order they came, as slots free up', async (t) => {
  const slots = new ChainSlots(3);
  let running = 0;
  let most = 0;
  const started: number[] = [];
  const gates: (() => void)[] = [];
  const all = Array.from({ length: 10 }, (_, i) => slots.run(async () => {
    started.push(i);
    most = Math.max(most, ++running);
    await new Promise<void>((r) => gates.push(r));
    running--;
    return i;
  }));
  await new Promise((r) => setImmediate(r));
  t.deepEqual(started, [0, 1, 2]);
  t.is(slots.queued, 7);
  while (gates.length) {
    gates.shift()!();
    await new Promise((r) => setImmediate(r));
  }
  t.deepEqual(await Promise.all(all), [...Array(10).keys()]);
  t.deepEqual(started, [...Array(10).keys()], 'in arrival order');
  t.is(most, 3);
  t.is(slots.peak, 3);
});

test('a chain that fails gives its slot back', async (t) => {
  const slots = new ChainSlots(1);
  await t.throwsAsync(slots.run(async () => { throw new Error('plugin failed'); }), { message: 'plugin failed' });
  t.is(await slots.run(async () => 'next'), 'next');
  t.is(slots.queued, 0);
});
