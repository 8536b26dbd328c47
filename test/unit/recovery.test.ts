// Start-up repair (src/core/recovery.ts) from the records a crashed daemon left, over the fakes
// of test/helpers/core-fixture.ts: the journal entry of each state is taken from a real run of
// the manager, then handed to a fresh store, IPAM and runner, as after a restart.
import test from 'ava';
import { recover } from '../../src/core/recovery.js';
import type { Reaper } from '../../src/core/reaper.js';
import { tolerant, type Step, type StepAction } from '../../src/base/plan.js';
import type { SandboxRecord } from '../../src/core/record.js';
import { NETNS, fixture, request } from '../helpers/core-fixture.js';

/** What undoing `steps` at start-up must send: each undo, last step first, tolerant. */
const undosOf = (steps: Step[]): StepAction[] => [...steps].reverse().flatMap((s) => (s.undo ? [tolerant(s.undo)] : []));

/** The records a crash left, each in the state `pick` finds it in the crashed daemon's writes. */
async function crashedWith(pick: (written: SandboxRecord[]) => SandboxRecord, withInterface = false): Promise<SandboxRecord> {
  const crashed = fixture();
  await crashed.manager.attach(request());
  if (withInterface) await crashed.manager.addInterface('sb-1', { name: 'net1', network: 'storage' });
  await crashed.manager.detach('sb-1');
  return pick(crashed.records.written);
}

/** A restarted daemon holding `rec`, and recovery run over it. */
async function restart(rec: SandboxRecord, before?: (f: ReturnType<typeof fixture>) => void) {
  const f = fixture();
  f.records.docs.set(rec.sandboxId, structuredClone(rec));
  before?.(f);
  let reaped = 0;
  const reaper = { reapNow: async () => void reaped++, kick: () => undefined } as unknown as Reaper;
  const report = await recover(f.records, f.ipam, f.runner, reaper);
  // Recovery also dumps the host's links to sweep leaks; the fake has none.
  const sent = f.runner.applied.map((x) => x.action).filter((a) => a.op !== 'link.list');
  return { f, report, sent, reaped };
}

const state = (s: SandboxRecord['state']) => (w: SandboxRecord[]) => w.find((r) => r.state === s)!;

test('a crash mid-attach: every step is undone in reverse, the record goes, no address stays held', async (t) => {
  const rec = await crashedWith(state('attaching'));
  const { f, report, sent, reaped } = await restart(rec);
  t.deepEqual(report.rolledBack, ['sb-1']);
  t.deepEqual(report.errors, []);
  t.deepEqual(sent, undosOf(rec.steps));
  t.is(f.records.get('sb-1'), undefined);
  t.is(f.held(), 0);
  t.is(reaped, 1);
});

test('a crash mid-detach: the detach is finished', async (t) => {
  const rec = await crashedWith(state('detaching'));
  const { f, report, sent } = await restart(rec);
  t.deepEqual(report.completedDetach, ['sb-1']);
  t.deepEqual(sent, undosOf(rec.steps));
  t.is(f.records.get('sb-1'), undefined);
  t.is(f.held(), 0);
});

test('an attached sandbox is kept and its addresses are held again; nothing is sent to the kernel', async (t) => {
  const rec = await crashedWith(state('attached'));
  const { f, report, sent } = await restart(rec);
  t.deepEqual(report.kept, ['sb-1']);
  t.deepEqual(sent, []);
  t.deepEqual(f.records.get('sb-1'), rec);
  t.is(f.held(), 2);
  // The next sandbox does not get the kept one's address.
  const next = await f.manager.attach(request({ sandboxId: 'sb-2', netnsPath: '/run/netns/tm-two' }));
  const kept = rec.result.ips.map((i) => i.address);
  t.false(next.ips.some((i) => kept.includes(i.address)));
});

test('an undo that fails at start-up keeps the record and its addresses for the next try', async (t) => {
  const rec = await crashedWith(state('attaching'));
  const hostEnd = (rec.steps[0].do as { name: string }).name;
  const { f, report } = await restart(rec, (g) => g.runner.failEvery((a) => a.op === 'link.del' && (a as { link: unknown }).link === hostEnd));
  t.deepEqual(report.rolledBack, []);
  t.is(report.errors.length, 1);
  t.true(report.errors[0].startsWith(`sb-1: ${rec.steps[0].description}`), report.errors[0]);
  t.is(f.records.get('sb-1')?.state, 'attaching');
  t.is(f.held(), 2);
});

test('inverses inside a netns that is gone are skipped at start-up', async (t) => {
  const rec = await crashedWith(state('attaching'));
  const { f, report, sent } = await restart(rec, (g) => g.runner.gone.add(NETNS));
  t.deepEqual(report.rolledBack, ['sb-1']);
  t.deepEqual(sent, undosOf(rec.steps.filter((s) => s.netns === undefined)));
  t.is(f.records.get('sb-1'), undefined);
});

test('an AddInterface cut short is taken back; the rest of the sandbox stays attached', async (t) => {
  const rec = await crashedWith((w) => w.find((r) => r.pending?.op === 'add')!, true);
  const added = rec.steps.filter((s) => s.iface === 'net1');
  t.true(added.length > 0);
  const { f, report, sent } = await restart(rec);
  t.deepEqual(report.repairedInterfaces, ['sb-1/net1']);
  t.deepEqual(report.kept, ['sb-1']);
  t.deepEqual(sent, undosOf(added));
  const now = f.records.get('sb-1')!;
  t.is(now.pending, undefined);
  t.deepEqual(now.request.interfaces.map((i) => i.name), ['eth0']);
  t.deepEqual(now.steps, rec.steps.filter((s) => s.iface !== 'net1'));
  t.is(f.held(), 2, 'only eth0 holds addresses');
});
