// The executor (src/core/executor.ts) against a fake runner: how steps are batched, which step
// a failure is blamed on, how inverses run, and what a failed run says to the caller.
import test from 'ava';
import { runSteps, undoSteps, StepFailed, planRunError } from '../../src/core/executor.js';
import { KnitError, CniCode } from '../../src/base/errors.js';
import type { Step } from '../../src/base/plan.js';
import { FakeRunner } from '../helpers/fake-runner.js';

const A = '/run/netns/ex-a';
const B = '/run/netns/ex-b';

/** A step that adds an address to `link` in `netns`, undone by deleting it. */
const addr = (link: string, netns?: string): Step => ({
  description: `address on ${link}`,
  netns,
  do: { op: 'addr.add', link, address: '10.188.0.2/24' },
  undo: { op: 'addr.del', link, address: '10.188.0.2/24' },
});
const nft = (table: string): Step => ({
  description: `nft table ${table}`,
  do: { op: 'nft.apply', family: 'inet', table, ruleset: '' },
  undo: { op: 'nft.delete', family: 'inet', table },
});
const shape = (r: FakeRunner) => r.batches.map((b) => `${b.kind}@${b.netns ?? 'host'}x${b.actions.length}`);

test('consecutive ops for one netns go in one batch; a host action always runs alone', async (t) => {
  const steps = [addr('a1', A), addr('a2', A), nft('t1'), nft('t2'), addr('a3', A), addr('b1', B), addr('b2', B), addr('h1'), addr('h2')];
  const runner = new FakeRunner();
  const results = await runSteps(steps, runner);
  t.deepEqual(shape(runner), [`ops@${A}x2`, 'host@hostx1', 'host@hostx1', `ops@${A}x1`, `ops@${B}x2`, 'ops@hostx2']);
  t.is(results.length, steps.length, 'one result per step');
  t.deepEqual(
    runner.applied.map((x) => x.action),
    steps.map((s) => s.do),
    'every step ran once, in order',
  );
});

test('a failpoint splits the batch where it fires, after everything before it reached the runner', async (t) => {
  const steps = [addr('a1', A), addr('a2', A), addr('a3', A)];
  const runner = new FakeRunner();
  const seenAtFire: number[] = [];
  await runSteps(steps, runner, { index: 1, fire: () => seenAtFire.push(runner.applied.length) });
  t.deepEqual(shape(runner), [`ops@${A}x1`, `ops@${A}x2`]);
  t.deepEqual(seenAtFire, [1]);

  const end = new FakeRunner();
  const fired: number[] = [];
  await runSteps(steps, end, { index: steps.length, fire: () => fired.push(end.applied.length) });
  t.deepEqual(fired, [3], 'index = steps.length fires once every step is done');
  t.deepEqual(shape(end), [`ops@${A}x3`]);
});

test('a failure at op k of a batch is StepFailed at that step; nothing after it runs', async (t) => {
  const steps = [nft('t0'), addr('a1', A), addr('a2', A), addr('a3', A), addr('b1', B)];
  for (const failing of [0, 1, 2, 3, 4]) {
    const runner = new FakeRunner().failAtSeq(failing, 'ENODEV');
    const err = await t.throwsAsync(runSteps(steps, runner), { instanceOf: StepFailed });
    t.is(err!.stepIndex, failing, `failure of step ${failing}`);
    t.is(err!.step, steps[failing]);
    t.is((err!.cause as { code?: string }).code, 'ENODEV');
    t.regex(err!.message, new RegExp(`^step ${failing + 1} \\(${steps[failing].description}\\) failed`));
    t.deepEqual(
      runner.applied.map((x) => x.action),
      steps.slice(0, failing).map((s) => s.do),
      'exactly the steps before the failing one took effect',
    );
  }
});

test('undo runs the inverses of steps [0, count) in reverse, tolerant, skipping steps without one', async (t) => {
  const dies: Step = { description: 'route via a1', netns: A, do: { op: 'route.add', dst: '10.188.1.0/24', link: 'a1' } };
  const steps = [nft('t0'), addr('a1', A), dies, addr('a2', A), addr('never', A)];
  const runner = new FakeRunner();
  const errors = await undoSteps(steps, 4, runner, 'undo');
  t.deepEqual(errors, []);
  t.deepEqual(
    runner.applied.map((x) => x.action),
    [
      { op: 'addr.del', link: 'a2', address: '10.188.0.2/24', ignoreMissing: true },
      { op: 'addr.del', link: 'a1', address: '10.188.0.2/24', ignoreMissing: true },
      { op: 'nft.delete', family: 'inet', table: 't0', ignoreMissing: true },
    ],
  );
  t.deepEqual(shape(runner), [`ops@${A}x2`, 'host@hostx1'], 'inverses are batched like steps');
});

test('retire mode runs a step\'s retire actions instead of its undo; undo mode ignores them', async (t) => {
  const veth: Step = {
    description: 'veth h1',
    do: { op: 'link.add', kind: 'veth', name: 'h1', peer: { name: 'eth0', netns: A } },
    undo: { op: 'link.del', link: 'h1' },
    retire: [{ op: 'link.set', link: 'h1', up: false }, { op: 'link.set', link: 'h1', group: 7 }],
  };
  const retire = new FakeRunner();
  await undoSteps([veth], 1, retire, 'retire');
  t.deepEqual(retire.applied.map((x) => x.action), [
    { op: 'link.set', link: 'h1', up: false, ignoreMissing: true },
    { op: 'link.set', link: 'h1', group: 7, ignoreMissing: true },
  ]);
  const undo = new FakeRunner();
  await undoSteps([veth], 1, undo, 'undo');
  t.deepEqual(undo.applied.map((x) => x.action), [{ op: 'link.del', link: 'h1', ignoreMissing: true }]);
});

test('inverses inside a netns that is gone are skipped; the netns is asked once, for the expected identity', async (t) => {
  const steps = [addr('h1'), addr('a1', A), addr('a2', A), addr('b1', B)];
  const runner = new FakeRunner();
  runner.gone.add(A);
  const expect = { dev: 4, ino: 4026532000 };
  const errors = await undoSteps(steps, steps.length, runner, 'undo', expect);
  t.deepEqual(errors, []);
  t.deepEqual(runner.applied.map((x) => `${x.netns ?? 'host'} ${(x.action as { link: string }).link}`), [`${B} b1`, 'host h1']);
  t.deepEqual(runner.usableAsked, [{ netns: B, expect }, { netns: A, expect }]);
});

test('a failed inverse is reported and the rest of its batch is retried one by one', async (t) => {
  const steps = [addr('a1', A), addr('a2', A), addr('a3', A), addr('a4', A)];
  // Reverse order: a4 a3 a2 a1; a3 fails.
  const runner = new FakeRunner().failEvery((a) => (a as { link?: string }).link === 'a3');
  const errors = await undoSteps(steps, steps.length, runner, 'undo');
  t.is(errors.length, 1);
  t.regex(errors[0], /^address on a3: fake failure of addr\.del/);
  t.deepEqual(shape(runner), [`ops@${A}x4`, `ops@${A}x1`, `ops@${A}x1`], 'the batch, then a2 and a1 alone');
  t.deepEqual(runner.applied.map((x) => (x.action as { link: string }).link), ['a4', 'a2', 'a1']);

  const stubborn = new FakeRunner().failEvery((a) => (a as { link?: string }).link !== 'a2');
  const all = await undoSteps(steps, steps.length, stubborn, 'undo');
  t.deepEqual(all.map((e) => e.split(':')[0]), ['address on a4', 'address on a3', 'address on a1'], 'every failure is collected');
  t.deepEqual(stubborn.applied.map((x) => (x.action as { link: string }).link), ['a2']);
});

test('an undo failpoint fires before its inverse and at the end', async (t) => {
  const steps = [addr('a1', A), addr('a2', A), addr('a3', A)];
  const runner = new FakeRunner();
  const fired: number[] = [];
  await undoSteps(steps, 3, runner, 'undo', undefined, { index: 2, fire: () => fired.push(runner.applied.length) });
  t.deepEqual(fired, [2]);
  t.deepEqual(shape(runner), [`ops@${A}x2`, `ops@${A}x1`]);
});

test('planRunError says a failed run in the request\'s terms', (t) => {
  const step = addr('eth0', A);
  const own = new KnitError('FAILED_PRECONDITION', 'device 0000:01:00.1 is held by sandbox x', { field: 'interfaces[0].device' });
  t.is(planRunError(own), own, 'a KnitError passes through');

  const kept = planRunError(new StepFailed(2, step, own));
  t.is(kept.code, 'FAILED_PRECONDITION', 'a plan action\'s own error keeps its code');
  t.is(kept.details.field, 'interfaces[0].device');
  t.regex(kept.message, /^step 3 \(address on eth0\) failed: device 0000:01:00\.1 is held/);

  const taken = planRunError(new StepFailed(0, step, Object.assign(new Error('File exists'), { code: 'EEXIST' })));
  t.is(taken.code, 'ALREADY_EXISTS');
  t.true(taken.message.includes(`(in ${A})`));
  const takenOnHost = planRunError(new StepFailed(0, addr('h1'), Object.assign(new Error('File exists'), { code: 'EEXIST' })));
  t.true(takenOnHost.message.includes('(in the host netns)'));

  const other = planRunError(new StepFailed(1, step, Object.assign(new Error('No such device'), { code: 'ENODEV' })));
  t.is(other.code, 'INTERNAL');
  t.is(other.details.cniCode, CniCode.ioFailure);
  t.is(planRunError(new Error('boom')).code, 'INTERNAL');
});
