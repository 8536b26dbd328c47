// Batches in a pod's netns (runInNetns, the daemon's path) and the worker threads that join
// it (native/src/ns_thread.cc): no thread may be left holding a pod's netns, or a deleted
// pod's namespace would live on with its veth ends.
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { DaemonActionRunner } from '../../src/daemon/action-runner.js';
import { KernelError } from '../../src/net/errors.js';
import { NetHandle, runInNetns } from '../../src/net/handle.js';
import { link } from '../helpers/observe.js';
import { makeNetns, uniquePrefix } from '../helpers/names.js';

/** Polls until ok() or ms pass; a dead netns is cleaned up by a kernel workqueue, not at once. */
async function eventually(ok: () => boolean, ms: number): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) if (ok()) return true;
  return ok();
}

test('a pod netns knit worked in dies when deleted: its veth end in another netns goes too', async (t) => {
  const p = uniquePrefix('knpw');
  const host = makeNetns(t, p, 'h');
  const pod = makeNetns(t, p, 'x');
  execFileSync('ip', ['-n', host.name, 'link', 'add', `${p}h`, 'type', 'veth', 'peer', 'name', `${p}x`, 'netns', pod.name]);
  const runner = new DaemonActionRunner();
  t.teardown(() => runner.close());

  // Every kind of work that joins the pod's netns on a worker, several at once so that
  // several workers start: sockets (pool and JS-thread batches), sysctls and taps.
  const batches = Array.from({ length: 8 }, (_, i) =>
    runner.runOps(pod.path, [
      { op: 'link.set', link: `${p}x`, up: true },
      { op: 'sysctl.set', key: 'net.ipv4.ip_forward', value: '1' },
      { op: 'tun.add', name: `${p}t${i}`, mode: 'tap' },
      { op: 'link.get', link: `${p}x` },
    ]),
  );
  const h = NetHandle.open(pod.path);
  // On the JS thread while the pool batches run: it may read the sysctl before or after them.
  const quick = h.runSync([{ op: 'sysctl.get', key: 'net.ipv4.ip_forward' }, { op: 'link.list' }]);
  const results = await Promise.all(batches);
  const after = h.runSync([{ op: 'sysctl.get', key: 'net.ipv4.ip_forward' }]);
  h.close();
  t.is(results.length, 8);
  for (const r of results) t.is(r[3].link.index, link(pod.name, `${p}x`).ifindex);
  t.true(['0', '1'].includes(quick[0].value), 'the concurrent read answered');
  t.is(after[0].value, '1', 'the pool batches set it in the pod netns');
  t.is(link(pod.name, `${p}t7`)?.linkinfo?.info_data?.type, 'tap');
  t.truthy(link(host.name, `${p}h`), 'the host end is there while the pod netns lives');

  execFileSync('ip', ['netns', 'del', pod.name]);
  // The veth pair goes only when the namespace is really freed, i.e. nothing holds it.
  t.true(await eventually(() => link(host.name, `${p}h`) === undefined, 30_000), 'the pod netns was freed');
  const gone = await runInNetns(host.path, [{ op: 'link.list' }]);
  t.false(gone[0].links.some((l) => l.name === `${p}h`), 'knit sees it gone too');
});

test('runInNetns answers as open + run + close would: results, failing op, bad paths, bad fields', async (t) => {
  const p = uniquePrefix('knpb');
  const ns = makeNetns(t, p, 'a');
  const h = NetHandle.open(ns.path);
  t.teardown(() => h.close());

  t.deepEqual(await runInNetns(ns.path, [{ op: 'link.list' }]), await h.run([{ op: 'link.list' }]));

  const failed = await t.throwsAsync(
    runInNetns(ns.path, [{ op: 'link.add', kind: 'bridge', name: `${p}b0` }, { op: 'link.del', link: `${p}gone` }]),
    { instanceOf: KernelError },
  );
  t.is(failed!.message, `ENODEV deleting link ${p}gone: no such link in netns ${ns.path}`);
  t.is(failed!.index, 1);
  t.is(failed!.completed.length, 1);
  t.is(failed!.completed[0].index, link(ns.name, `${p}b0`).ifindex, 'the op before the failing one took effect');

  const missing = `/run/netns/${p}missing`;
  const openMissing = t.throws(() => NetHandle.open(missing), { instanceOf: KernelError });
  const runMissing = await t.throwsAsync(runInNetns(missing, [{ op: 'link.list' }]), { instanceOf: KernelError });
  t.is(runMissing!.code, 'ENOENT');
  t.is(runMissing!.index, undefined);
  t.is(runMissing!.message, openMissing!.message);
  const openNotNs = t.throws(() => NetHandle.open('/etc/hostname'), { instanceOf: KernelError });
  const runNotNs = await t.throwsAsync(runInNetns('/etc/hostname', [{ op: 'link.list' }]), { instanceOf: KernelError });
  t.is(runNotNs!.code, 'EINVAL');
  t.is(runNotNs!.message, openNotNs!.message);

  await t.throwsAsync(
    runInNetns(ns.path, [{ op: 'link.add', kind: 'bridge', name: `${p}b1` }, { op: 'link.add', kind: 'veth', name: `${p}v` }] as never),
    { instanceOf: TypeError, message: /^ops\[1\]\.peer: expected object/ },
  );
  t.is(link(ns.name, `${p}b1`), undefined, 'nothing was sent');
});
