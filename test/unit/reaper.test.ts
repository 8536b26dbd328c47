// The reaper (src/core/reaper.ts) against a fake runner: which reap groups a run deletes, and
// when whenReaped() resolves.
import test from 'ava';
import { Reaper, parksIn } from '../../src/core/reaper.js';
import { reapGroup } from '../../src/base/names.js';
import type { Step } from '../../src/base/plan.js';
import { FakeRunner } from '../helpers/fake-runner.js';

const A = { path: '/run/netns/rp-a', dev: 4, ino: 101 };
const B = { path: '/run/netns/rp-b', dev: 4, ino: 102 };
const deletes = (r: FakeRunner) =>
  r.applied.filter((x) => x.action.op === 'link.delGroup').map((x) => `${x.netns ?? 'host'}:${(x.action as { group: number }).group}`).sort();

test('a run deletes the host reap group and the group in every netns it was kicked with, once', async (t) => {
  const runner = new FakeRunner();
  const reaper = new Reaper(runner, (e) => t.fail(e.message), 1000);
  reaper.kick(A);
  reaper.kick(A);
  reaper.kick(B);
  reaper.kick();
  await reaper.reapNow();
  t.deepEqual(deletes(runner), [`${A.path}:${reapGroup()}`, `${B.path}:${reapGroup()}`, `host:${reapGroup()}`]);
  runner.applied.length = 0;
  await reaper.reapNow();
  t.deepEqual(deletes(runner), [`host:${reapGroup()}`], 'a netns is reaped by one run only');
  reaper.stop();
});

test('a netns that is gone, or is another namespace now, is skipped: its devices went with it', async (t) => {
  const runner = new FakeRunner();
  runner.gone.add(B.path);
  const reaper = new Reaper(runner, (e) => t.fail(e.message), 1000);
  reaper.kick(A);
  reaper.kick(B);
  await reaper.reapNow();
  t.deepEqual(deletes(runner), [`${A.path}:${reapGroup()}`, `host:${reapGroup()}`]);
  t.true(runner.usableAsked.some((q) => q.netns === A.path && q.expect?.ino === A.ino), 'asked with the identity it was parked in');
  reaper.stop();
});

test('whenReaped resolves only after a run that started after the call', async (t) => {
  const runner = new FakeRunner();
  const reaper = new Reaper(runner, (e) => t.fail(e.message), 1);
  const first = reaper.reapNow(); // already running when the device below is parked
  reaper.kick(A);
  let done = false;
  const waited = reaper.whenReaped().then(() => (done = true));
  await first;
  await waited;
  t.true(done);
  t.true(deletes(runner).includes(`${A.path}:${reapGroup()}`), 'the netns kicked during the first run was reaped by a later one');
  reaper.stop();
});

test('parksIn names the sandbox netns only for plans that park a device there', (t) => {
  const tap: Step = { description: 'tap', netns: A.path, do: { op: 'tun.add', name: 'tap0', mode: 'tap' }, retire: [], reapInNetns: true };
  const addr: Step = { description: 'addr', netns: A.path, do: { op: 'addr.add', link: 'eth0', address: '10.0.0.2/24' } };
  t.is(parksIn([addr, tap], A), A);
  t.is(parksIn([addr], A), undefined);
});
