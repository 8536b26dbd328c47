// SandboxManager (src/core/manager.ts) over fakes (test/helpers/core-fixture.ts): the real IPAM
// and runc strategy, a fake runner, an in-memory record store. The kernel is out of scope here; it
// is what the kernel and e2e tests are for. What is checked: the journal precedes the kernel,
// a failure anywhere is taken back exactly, repeats are idempotent, conflicts are refused.
import test, { type ExecutionContext } from 'ava';
import { KnitError } from '../../src/base/errors.js';
import type { SandboxRecord } from '../../src/core/record.js';
import type { AttachRequest, InterfaceRequest } from '../../src/base/types.js';
import { HOST_PATHS, NETNS, TWO_NETWORKS, failStep, fixture, inversesOf, plannedSteps, request } from '../helpers/core-fixture.js';

test('attach journals the plan (state attaching) before the first kernel change, then records it attached', async (t) => {
  const f = fixture();
  const result = await f.manager.attach(request());
  const firstRunner = f.events.findIndex((e) => e.startsWith('runner.'));
  t.true(firstRunner > 0);
  t.deepEqual(f.events.slice(0, firstRunner), ['store.put attaching']);
  t.deepEqual(f.events.filter((e) => !e.startsWith('runner.')), ['store.put attaching', 'extensions.post-attach', 'store.put attached']);
  t.is(f.events.at(-1), 'store.put attached', 'recorded as attached after the last kernel change');

  const rec = f.records.get('sb-1')!;
  t.is(rec.state, 'attached');
  t.deepEqual(rec.result, result);
  t.deepEqual(f.runner.applied.map((x) => x.action), rec.steps.map((s) => s.do), 'every recorded step ran once, in order');
  t.deepEqual(result.ips.map((i) => i.address.split('/')[0]).sort(), ['10.188.1.2', 'fd00:188:1::2'].sort());
  t.is(f.held(), 2);
});

for (const [title, interfaces] of [['one routed dual-stack interface', [{ name: 'eth0' }]], ['two interfaces on two networks', TWO_NETWORKS]] as const) {
  test(`${title}: a failure at every step rolls back exactly the steps before it, in reverse, and leaves nothing`, async (t) => {
    const req = request({}, [...interfaces]);
    const steps = await plannedSteps(req);
    t.true(steps.length >= 5);
    for (let k = 0; k < steps.length; k++) {
      const f = fixture();
      failStep(f.runner, steps, k);
      const err = await t.throwsAsync(f.manager.attach(req), { instanceOf: KnitError }, `step ${k}`);
      t.is(err!.code, 'INTERNAL');
      t.true(err!.message.startsWith(`step ${k + 1} (${steps[k].description}) failed`), err!.message);
      t.deepEqual(
        f.runner.applied.map((x) => x.action),
        [...steps.slice(0, k).map((s) => s.do), ...inversesOf(f.records.written[0].steps, k)],
        `failure at step ${k}: the steps before it, then their inverses in reverse`,
      );
      t.is(f.records.get('sb-1'), undefined, 'the record is removed');
      t.is(f.held(), 0, 'the addresses are released');
      t.is(f.kicks(), 1, 'the reaper is told');
    }
  });
}

test('a kernel refusal of a name already taken is ALREADY_EXISTS, and is rolled back too', async (t) => {
  const f = fixture();
  f.runner.failAtSeq(0, 'EEXIST');
  const err = await t.throwsAsync(f.manager.attach(request()), { instanceOf: KnitError });
  t.is(err!.code, 'ALREADY_EXISTS');
  t.is(f.records.get('sb-1'), undefined);
  t.is(f.held(), 0);
});

test('a required extension failing after the last step takes every step back', async (t) => {
  const f = fixture();
  f.extensions.failPhase = 'post-attach';
  const err = await t.throwsAsync(f.manager.attach(request()), { instanceOf: KnitError });
  t.is(err!.code, 'UNAVAILABLE');
  const { steps } = f.records.written[0];
  t.deepEqual(f.runner.applied.map((x) => x.action), [...steps.map((s) => s.do), ...inversesOf(steps, steps.length)]);
  t.is(f.records.get('sb-1'), undefined);
  t.is(f.held(), 0);
});

/** An undo that cannot finish fails INTERNAL and keeps the record (in `state`) and its
 * addresses, the only copy of what is left to take back; a Detach once the kernel obliges
 * finishes the job. */
async function keptThenFinished(t: ExecutionContext, f: ReturnType<typeof fixture>, call: Promise<unknown>, state: SandboxRecord['state'], message: RegExp) {
  const err = await t.throwsAsync(call, { instanceOf: KnitError });
  t.is(err!.code, 'INTERNAL');
  t.regex(err!.message, message);
  t.is(f.records.get('sb-1')?.state, state);
  t.is(f.held(), 2);
  f.runner.failWhen = undefined;
  await f.manager.detach('sb-1');
  t.is(f.records.get('sb-1'), undefined);
  t.is(f.held(), 0);
}

test('a rollback that cannot finish keeps the record and its addresses for Detach to finish', async (t) => {
  const f = fixture();
  const steps = await plannedSteps(request());
  const last = JSON.stringify(steps.at(-1)!.do);
  // The last step fails, and so does every inverse of the first (the host end of the veth).
  const hostEnd = (steps[0].do as { name: string }).name;
  f.runner.failWhen = (a) => JSON.stringify(a) === last || (a.op === 'link.set' && (a as { link: unknown }).link === hostEnd);
  await keptThenFinished(t, f, f.manager.attach(request()), 'attaching', /rollback of sb-1 is incomplete/);
});

test('attach is idempotent: the same request answers the same result with no kernel change', async (t) => {
  const f = fixture();
  const first = await f.manager.attach(request());
  const batches = f.runner.batches.length;
  const again = await f.manager.attach(request({ labels: { retried: 'yes' }, annotations: { by: 'kubelet' } }));
  t.deepEqual(again, first);
  t.is(f.runner.batches.length, batches, 'no runner call');
  t.is(f.held(), 2);
});

test('attach of an attached sandbox with a different request is FAILED_PRECONDITION and changes nothing', async (t) => {
  const f = fixture();
  await f.manager.attach(request());
  const before = structuredClone(f.records.get('sb-1'));
  const batches = f.runner.batches.length;
  for (const other of [request({ netnsPath: '/run/netns/tm-other' }), request({}, [{ name: 'eth0', mtu: 1400 }])]) {
    const err = await t.throwsAsync(f.manager.attach(other), { instanceOf: KnitError });
    t.is(err!.code, 'FAILED_PRECONDITION');
    t.is(err!.details.field, 'sandbox_id');
    t.regex(err!.message, /different request/);
  }
  t.is(f.runner.batches.length, batches);
  t.deepEqual(f.records.get('sb-1'), before);
});

test('a second sandbox in a live netns is refused; once that netns is gone its identity is free again', async (t) => {
  const f = fixture();
  await f.manager.attach(request());
  const batches = f.runner.batches.length;
  const err = await t.throwsAsync(f.manager.attach(request({ sandboxId: 'sb-2' })), { instanceOf: KnitError });
  t.is(err!.code, 'FAILED_PRECONDITION');
  t.is(err!.details.field, 'netns_path');
  t.true(err!.message.includes('sb-1'));
  t.is(f.runner.batches.length, batches);
  t.is(f.records.get('sb-2'), undefined);
  t.is(f.held(), 2, 'the refused sandbox holds no address');

  // The netns of sb-1 died and its inode number was reused for a new pod's netns.
  f.runner.gone.add(NETNS);
  await f.manager.attach(request({ sandboxId: 'sb-2' }));
  t.is(f.records.get('sb-2')?.state, 'attached');
});

test('detach runs the retire inverses of every step in reverse, releases the addresses and kicks the reaper', async (t) => {
  const f = fixture();
  await f.manager.attach(request({}, TWO_NETWORKS));
  const steps = f.records.get('sb-1')!.steps;
  const applied = f.runner.applied.length;
  f.events.length = 0;
  await f.manager.detach('sb-1');
  t.deepEqual(f.runner.applied.slice(applied).map((x) => x.action), inversesOf(steps, steps.length));
  t.is(f.events[0], 'extensions.pre-detach');
  t.is(f.events[1], 'store.put detaching', 'the journal says detaching before the first inverse');
  t.is(f.events.at(-1), 'store.remove');
  t.is(f.records.get('sb-1'), undefined);
  t.is(f.held(), 0);
  t.is(f.kicks(), 1);

  const batches = f.runner.batches.length;
  await f.manager.detach('sb-1');
  t.is(f.runner.batches.length, batches, 'a second detach has nothing to do');
});

test('detach of a sandbox with a device parked in its netns answers first (Query and List no longer show it) and drops the record once the reaper is done', async (t) => {
  let reaped!: () => void;
  const f = fixture(undefined, () => new Promise<void>((resolve) => (reaped = resolve)));
  await f.manager.attach(request());
  const rec = f.records.get('sb-1')!;
  // A VM's tap: parked in the sandbox netns on detach, deleted there by the reaper.
  const tap = { description: 'tap', netns: NETNS, do: { op: 'tun.add' as const, name: 'tap0', mode: 'tap' as const }, retire: [{ op: 'link.set' as const, link: 'tap0', up: false }], reapInNetns: true as const };
  f.records.docs.set('sb-1', { ...rec, steps: [...rec.steps, tap] });
  await f.manager.detach('sb-1');
  t.is(f.records.get('sb-1')?.state, 'detaching', 'answered while the record still notes the parked tap');
  t.is(f.held(), 0, 'the addresses are free at once');
  // For callers it is gone already: Query answers NOT_FOUND and List leaves it out.
  await t.throwsAsync(f.manager.query('sb-1'), { message: /sb-1 is not attached/ });
  t.deepEqual(await f.manager.list(), []);
  let again = false;
  const second = f.manager.detach('sb-1').then(() => (again = true));
  await new Promise((r) => setImmediate(r));
  t.false(again, 'the sandbox stays locked until the record is gone');
  reaped();
  await second;
  t.is(f.records.get('sb-1'), undefined);
  t.is(f.events.at(-1), 'store.remove');
});

test('detach of an unknown sandbox succeeds and touches nothing', async (t) => {
  const f = fixture();
  await f.manager.detach('sb-never');
  t.deepEqual(f.events, []);
  t.is(f.runner.batches.length, 0);
});

test("detach naming the host's netns (a bind mount of it), or another live one, is refused naming netns_path and changes nothing; a gone path detaches", async (t) => {
  const f = fixture();
  await f.manager.attach(request());
  const batches = f.runner.batches.length;
  const held = f.held();
  for (const [path, says] of [[[...HOST_PATHS][0], /the host's network namespace/], ['/run/netns/tm-other', /another network namespace/]] as const) {
    const err = await t.throwsAsync(f.manager.detach('sb-1', path), { instanceOf: KnitError });
    t.is(err?.code, 'INVALID_ARGUMENT');
    t.is(err?.details.field, 'netns_path');
    t.regex(err!.message, says);
    t.regex(err!.message, /nothing was detached$/);
  }
  t.is(f.runner.batches.length, batches, 'nothing run');
  t.is(f.held(), held, 'addresses still held');
  t.is(f.records.get('sb-1')?.state, 'attached');
  f.runner.gone.add('/run/netns/tm-deleted');
  await f.manager.detach('sb-1', '/run/netns/tm-deleted');
  t.is(f.records.get('sb-1'), undefined);
});

test('detach of a sandbox whose netns is gone skips the inverses inside it', async (t) => {
  const f = fixture();
  await f.manager.attach(request());
  const applied = f.runner.applied.length;
  f.runner.gone.add(NETNS);
  await f.manager.detach('sb-1');
  const sent = f.runner.applied.slice(applied);
  t.true(sent.length > 0, 'the host side is still taken back');
  t.true(sent.every((x) => x.netns === undefined), 'nothing is sent into the dead netns');
  t.is(f.records.get('sb-1'), undefined);
});

test('a detach that cannot finish keeps the record detaching with its addresses; a retry finishes', async (t) => {
  const f = fixture();
  await f.manager.attach(request());
  f.runner.failEvery((a) => a.op === 'link.set' && (a as { up?: boolean }).up === false);
  await keptThenFinished(t, f, f.manager.detach('sb-1'), 'detaching', /detach of sb-1 is incomplete/);
});

for (const [title, interfaces] of [['one interface', [{ name: 'eth0' }]], ['two interfaces on two networks', TWO_NETWORKS]] as const) {
  test(`a runc detach (${title}) is one host batch and sends nothing to the pod netns`, async (t) => {
    const f = fixture();
    await f.manager.attach(request({}, [...interfaces]));
    const attachBatches = f.runner.batches.length;
    const asked = f.runner.usableAsked.length;
    t.true(f.runner.batches.some((b) => b.netns === NETNS), 'the attach did work in the pod netns (the check can fail)');
    await f.manager.detach('sb-1');
    const detach = f.runner.batches.slice(attachBatches);
    t.deepEqual(detach.map((b) => [b.kind, b.netns]), [['ops', undefined]]);
    t.deepEqual(f.runner.usableAsked.slice(asked).filter((q) => q.netns === NETNS), [], 'not even a look at the pod netns');
  });
}

test('a failed journal write changes nothing in the kernel and holds no address', async (t) => {
  const f = fixture();
  f.records.failPut = (doc) => doc.state === 'attaching';
  const err = await t.throwsAsync(f.manager.attach(request()), { instanceOf: KnitError });
  t.is(err!.code, 'INTERNAL');
  t.regex(err!.message, /cannot write the record of sandbox sb-1: no space left/);
  t.is(f.runner.batches.length, 0);
  t.is(f.held(), 0);
  t.is(f.records.get('sb-1'), undefined);
});

test('a failed write of the attached state takes the whole plan back', async (t) => {
  const f = fixture();
  f.records.failPut = (doc) => doc.state === 'attached';
  const err = await t.throwsAsync(f.manager.attach(request()), { instanceOf: KnitError });
  t.is(err!.code, 'INTERNAL');
  t.regex(err!.message, /cannot record sandbox sb-1 as attached/);
  const { steps } = f.records.written[0];
  t.deepEqual(f.runner.applied.map((x) => x.action), [...steps.map((s) => s.do), ...inversesOf(steps, steps.length)]);
  t.is(f.records.get('sb-1'), undefined);
  t.is(f.held(), 0);
});

test('concurrent attaches of one sandbox are serialized: one plan runs, both get its result', async (t) => {
  const f = fixture();
  // Hold the first batch until both calls are in, so an unserialized second call would see the
  // record still attaching (and be refused) or plan a second time.
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const runOps = f.runner.runOps.bind(f.runner);
  let calls = 0;
  f.runner.runOps = async (ns, ops) => {
    if (calls++ === 0) await gate;
    return runOps(ns, ops);
  };
  const first = f.manager.attach(request());
  const second = f.manager.attach(request());
  await new Promise((r) => setImmediate(r));
  release();
  const [a, b] = await Promise.all([first, second]);
  t.deepEqual(a, b);
  const steps = f.records.get('sb-1')!.steps;
  t.deepEqual(f.runner.applied.map((x) => x.action), steps.map((s) => s.do), 'the plan ran once');
  t.is(f.events.filter((e) => e === 'store.put attaching').length, 1);
});

test('attach and detach of one sandbox in flight together run one after the other', async (t) => {
  const f = fixture();
  const attached = f.manager.attach(request());
  const detached = f.manager.detach('sb-1');
  await Promise.all([attached, detached]);
  t.is(f.records.get('sb-1'), undefined, 'the detach saw the finished attach');
  t.is(f.held(), 0);
});

test('AddInterface journals then runs only the new interface\'s steps; RemoveInterface takes back only those', async (t) => {
  const f = fixture();
  await f.manager.attach(request());
  const before = f.records.get('sb-1')!;
  const applied = f.runner.applied.length;
  f.events.length = 0;
  const result = await f.manager.addInterface('sb-1', { name: 'net1', network: 'storage' });
  t.true(result.interfaces.some((i) => i.name === 'net1'));
  const after = f.records.get('sb-1')!;
  const added = after.steps.slice(before.steps.length);
  t.true(added.length > 0 && added.every((s) => s.iface === 'net1'));
  t.deepEqual(after.steps.slice(0, before.steps.length), before.steps, 'the other interface\'s steps are untouched');
  t.deepEqual(f.runner.applied.slice(applied).map((x) => x.action), added.map((s) => s.do));
  t.is(f.events[0], 'store.put attached', 'the pending add is journalled before the kernel change');
  t.is(f.records.get('sb-1')!.pending, undefined);
  t.is(f.held(), 3);

  const again = f.runner.applied.length;
  t.deepEqual(await f.manager.addInterface('sb-1', { name: 'net1', network: 'storage' }), result, 'a repeat is idempotent');
  t.is(f.runner.applied.length, again);

  await f.manager.removeInterface('sb-1', 'net1');
  t.deepEqual(f.runner.applied.slice(again).map((x) => x.action), inversesOf(added, added.length));
  const removed = f.records.get('sb-1')!;
  t.deepEqual(removed.steps, before.steps);
  t.deepEqual(removed.result, before.result);
  t.is(f.held(), 2);

  const err = await t.throwsAsync(f.manager.removeInterface('sb-1', 'eth0'), { instanceOf: KnitError });
  t.is(err!.code, 'FAILED_PRECONDITION', 'the default-route interface goes only with the sandbox');
  const missing = await t.throwsAsync(f.manager.addInterface('sb-none', { name: 'net1' }), { instanceOf: KnitError });
  t.is(missing!.code, 'NOT_FOUND');
});

test('AddInterface failing at every step takes back exactly its own steps before it, and its addresses', async (t) => {
  const scratch = fixture();
  await scratch.manager.attach(request());
  const attachedSteps = scratch.records.get('sb-1')!.steps.length;
  await scratch.manager.addInterface('sb-1', { name: 'net1', network: 'storage' });
  const added = scratch.records.get('sb-1')!.steps.slice(attachedSteps);
  for (let k = 0; k < added.length; k++) {
    const f = fixture();
    await f.manager.attach(request());
    const { updatedAt: _b, ...was } = structuredClone(f.records.get('sb-1')!);
    const applied = f.runner.applied.length;
    const written = f.records.written.length;
    failStep(f.runner, added, k);
    const err = await t.throwsAsync(f.manager.addInterface('sb-1', { name: 'net1', network: 'storage' }), { instanceOf: KnitError });
    t.is(err!.code, 'INTERNAL');
    const journal = f.records.written[written];
    t.deepEqual(journal.pending, { op: 'add', ifname: 'net1' }, 'the add is journalled first');
    t.deepEqual(
      f.runner.applied.slice(applied).map((x) => x.action),
      [...added.slice(0, k).map((s) => s.do), ...inversesOf(journal.steps.slice(attachedSteps), k)],
      `failure at step ${k} of the add`,
    );
    const { updatedAt: _a, ...now } = f.records.get('sb-1')!;
    t.deepEqual(now, was, 'the record is as it was');
    t.is(f.held(), 2);
  }
});

test('host ports go to the default-route interface; one held by another sandbox, even before its record is written, is refused naming it', async (t) => {
  const f = fixture();
  const portMappings: AttachRequest['portMappings'] = [{ protocol: 'tcp', containerPort: 80, hostPort: 8080 }];
  const interfaces = [{ name: 'eth0' }, { name: 'net1', network: 'storage', defaultRoute: true }];
  // While sb-1 reads the bridge's route_localnet (planning: no record yet), sb-2 asks for the same port.
  let rival: Promise<unknown> | undefined;
  f.runner.failWhen = (a) => {
    if (a.op === 'sysctl.get' && !rival) {
      rival = f.manager.attach(request({ sandboxId: 'sb-2', netnsPath: '/run/netns/tm-other', portMappings }, [{ name: 'eth0' }])).catch((e) => e);
    }
    return undefined;
  };
  const result = await f.manager.attach(request({ portMappings }, interfaces));
  const err = (await rival) as KnitError;
  t.is(err.code, 'ALREADY_EXISTS');
  t.is(err.details.field, 'port_mappings[0]');
  t.regex(err.message, /held by sandbox sb-1/);
  const storage = result.ips.find((i) => i.address.startsWith('10.188.2.'))!.address.split('/')[0];
  const table = f.records.get('sb-1')!.steps.find((s) => s.do.op === 'nft.apply')!.do as { ruleset: string };
  t.regex(table.ruleset, new RegExp(`dnat ip to ${storage.replace(/\./g, '\\.')}:80\n`), 'DNAT to the default-route interface (net1 on storage)');
  t.notRegex(table.ruleset, /10\.188\.1\./);
  t.is(f.records.get('sb-1')!.version, 2, 'a plan with host-port actions is record format 2');
  await f.manager.attach(request({ sandboxId: 'sb-3', netnsPath: '/run/netns/tm-3' }));
  t.is(f.records.get('sb-3')!.version, 1, 'one without them stays format 1, which older knits read');
  await f.manager.detach('sb-1');
  await t.notThrowsAsync(f.manager.attach(request({ sandboxId: 'sb-2', netnsPath: '/run/netns/tm-other', portMappings }, [{ name: 'eth0' }])), 'free again after detach');
});

test('Plan refuses exactly what Attach refuses, before anything is held or run: static IPs the pool would not take, a /32 off its gateway, a runc binding key, a netns that is not one', async (t) => {
  const { manager, runner, held, records } = fixture();
  await manager.attach(request({ sandboxId: 'other', netnsPath: '/run/netns/tm-other' }, [{ name: 'eth0', network: 'storage', ips: ['10.188.2.9/24'] }]));
  const heldBefore = held();
  const batchesBefore = runner.batches.length;
  const bad: [InterfaceRequest, string][] = [
    [{ name: 'eth0', network: 'storage', ips: ['10.188.9.5/24'] }, 'interfaces[0].ips[0]'], // outside the subnet
    [{ name: 'eth0', network: 'storage', ips: ['10.188.2.1/24'] }, 'interfaces[0].ips[0]'], // the gateway
    [{ name: 'eth0', network: 'storage', ips: ['10.188.2.9/24'] }, 'interfaces[0].ips[0]'], // held by "other"
    [{ name: 'eth0', network: 'storage', ips: ['10.188.2.5/32'] }, 'interfaces[0].ips[0]'], // gateway off-link
    [{ name: 'eth0', binding: { queues: '2' } }, 'interfaces[0].binding.queues'],
  ];
  for (const [iface, field] of bad) {
    for (const call of [() => manager.plan(request({}, [iface])), () => manager.attach(request({}, [iface]))]) {
      const err = await t.throwsAsync(call(), { instanceOf: KnitError });
      t.is(err?.details.field, field, err?.message);
    }
  }
  t.is(held(), heldBefore, 'nothing more held');
  t.is(runner.batches.length, batchesBefore, 'nothing more run');
  t.deepEqual([...records.docs.keys()], ['other']);
  const notNetns = fixture({ identify: (path) => { throw KnitError.invalid('netns_path', `${path} is not a network namespace`); }, goneChecker: () => () => false, relation: () => 'none' });
  for (const call of [() => notNetns.manager.plan(request()), () => notNetns.manager.attach(request())]) {
    t.is((await t.throwsAsync(call(), { instanceOf: KnitError }))?.details.field, 'netns_path');
  }
  t.is(notNetns.held(), 0);
  // The routed network's gateway is link-local and on-link by route: a /32 there is its normal shape.
  await t.notThrowsAsync(manager.plan(request({}, [{ name: 'eth0', ips: ['10.188.1.9/32'] }])));
});
