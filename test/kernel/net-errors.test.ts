// How the netlink handle fails: kernel refusals as KernelError sentences naming what and where,
// bad op fields as TypeError/RangeError naming the field before anything reaches the kernel,
// and batches that stop at the failing op and report what completed.
import test from 'ava';
import { NetHandle } from '../../src/net/handle.js';
import { KernelError } from '../../src/net/errors.js';
import type { Op } from '../../src/base/ops.js';
import { link, linkNames } from '../helpers/observe.js';
import { makeNetns, uniquePrefix } from '../helpers/names.js';

function setup(t: import('ava').ExecutionContext, tag: string) {
  const p = uniquePrefix(tag);
  const ns = makeNetns(t, p, 'a');
  const h = NetHandle.open(ns.path);
  t.teardown(() => h.close());
  return { p, ns, h };
}

test('a duplicate name fails with EEXIST and a sentence naming the link and the netns', async (t) => {
  const { p, ns, h } = setup(t, 'knea');
  await h.run([{ op: 'link.add', kind: 'bridge', name: `${p}br` }]);
  const err = await t.throwsAsync(h.run([{ op: 'link.add', kind: 'bridge', name: `${p}br` }]), { instanceOf: KernelError });
  t.is(err!.message, `EEXIST creating bridge ${p}br: a link with this name already exists in netns ${ns.path}`);
  t.like(err, { code: 'EEXIST', errno: 17, index: 0, netns: ns.path, object: `bridge ${p}br` });
  t.deepEqual(err!.op, { op: 'link.add', kind: 'bridge', name: `${p}br` });

  const veth = await t.throwsAsync(h.run([{ op: 'link.add', kind: 'veth', name: `${p}br`, peer: { name: `${p}pe` } }]), { instanceOf: KernelError });
  t.regex(veth!.message, new RegExp(`^EEXIST creating veth ${p}br: a link with this name already exists in netns ${ns.path} \\(or the peer name ${p}pe is taken\\)$`));
  t.deepEqual(linkNames(ns.name).sort(), ['lo', `${p}br`].sort(), 'nothing half-made');
});

test("the kernel's extended ack text is carried and quoted", async (t) => {
  const { p, ns, h } = setup(t, 'knef');
  await h.run([{ op: 'tun.add', name: `${p}tap`, mode: 'tap' }]);
  // A tap's maximum MTU is 65521; the kernel says so in an extended ack.
  const err = await t.throwsAsync(h.run([{ op: 'link.set', link: `${p}tap`, mtu: 65535 }]), { instanceOf: KernelError });
  t.is(err!.code, 'EINVAL');
  t.regex(err!.extack ?? '', /MTU/i);
  t.true(err!.message.startsWith(`EINVAL setting mtu on link ${p}tap: `));
  t.true(err!.message.endsWith(`in netns ${ns.path} (kernel: ${err!.extack})`));
});

test('a batch stops at the failing op: index, completed results, later ops not run', async (t) => {
  const { p, ns, h } = setup(t, 'kneb');
  const ops: Op[] = [
    { op: 'link.add', kind: 'bridge', name: `${p}b0` },
    { op: 'link.add', kind: 'bridge', name: `${p}b1` },
    { op: 'addr.add', link: `${p}nope`, address: '10.80.0.1/24' },
    { op: 'link.add', kind: 'bridge', name: `${p}b2` },
  ];
  for (const run of [(o: Op[]) => h.run(o), async (o: Op[]) => h.runSync(o)]) {
    const err = await t.throwsAsync(run(ops), { instanceOf: KernelError });
    t.is(err!.index, 2);
    t.is(err!.code, 'ENODEV');
    t.is(err!.message, `ENODEV adding address 10.80.0.1/24 to ${p}nope: no link named ${p}nope (ops[2].link) in netns ${ns.path}`);
    t.is(link(ns.name, `${p}b2`), undefined, 'ops after the failure did not run');
    await h.run([{ op: 'link.del', link: `${p}b0` }, { op: 'link.del', link: `${p}b1` }]);
  }
  const first = await t.throwsAsync(h.run(ops), { instanceOf: KernelError });
  t.is(first!.completed.length, 2);
  t.is(first!.completed[0].index, link(ns.name, `${p}b0`).ifindex);
});

test('missing links, routes and netns paths are errors that say which', async (t) => {
  const { p, ns, h } = setup(t, 'knec');
  const del = await t.throwsAsync(h.run([{ op: 'link.del', link: `${p}gone` }]), { instanceOf: KernelError });
  t.is(del!.message, `ENODEV deleting link ${p}gone: no such link in netns ${ns.path}`);
  const byIndex = await t.throwsAsync(h.run([{ op: 'link.get', link: 99999 }]), { instanceOf: KernelError });
  t.is(byIndex!.message, `ENODEV reading link #99999: no such link in netns ${ns.path}`);

  const open = t.throws(() => NetHandle.open(`/run/netns/${p}missing`), { instanceOf: KernelError });
  t.is(open!.code, 'ENOENT');
  t.regex(open!.message, new RegExp(`/run/netns/${p}missing`));
  const notNs = t.throws(() => NetHandle.open('/etc/hostname'), { instanceOf: KernelError });
  t.regex(notNs!.message, /\/etc\/hostname/);

  const peer = await t.throwsAsync(
    h.run([{ op: 'link.add', kind: 'veth', name: `${p}v0`, peer: { name: `${p}v1`, netns: `/run/netns/${p}missing` } }]),
    { instanceOf: KernelError },
  );
  t.is(peer!.code, 'ENOENT');
  t.regex(peer!.message, new RegExp(`^ENOENT creating veth ${p}v0: .*ops\\[0\\]\\.peer\\.netns`));
  t.is(link(ns.name, `${p}v0`), undefined);

  const move = await t.throwsAsync(h.run([{ op: 'link.set', link: 'lo', netns: `/run/netns/${p}missing` }]), { instanceOf: KernelError });
  t.regex(move!.message, /ops\[0\]\.netns/);
});

test('bad fields are rejected before the kernel, naming the field', async (t) => {
  const { p, ns, h } = setup(t, 'kned');
  const cases: [unknown, RegExp, typeof TypeError | typeof RangeError][] = [
    [[{ op: 'link.add', kind: 'bridge', name: `${p}ok` }, { op: 'link.add', kind: 'veth', name: `${p}v`, peer: { name: 5 } }], /^ops\[1\]\.peer\.name: expected string, got number$/, TypeError],
    [[{ op: 'link.add', kind: 'veth', name: `${p}v` }], /^ops\[0\]\.peer: expected object, got undefined$/, TypeError],
    [[{ op: 'link.add', kind: 'bridge', name: 'a-very-long-name0' }], /^ops\[0\]\.name: interface name 'a-very-long-name0' is 17 bytes; Linux allows at most 15$/, RangeError],
    [[{ op: 'link.add', kind: 'veth', name: `${p}v`, peer: { name: 'eth0-in-the-pod' + 'x' } }], /^ops\[0\]\.peer\.name: .* is 16 bytes/, RangeError],
    [[{ op: 'link.set', link: `${p}v`, mtu: '1500' }], /^ops\[0\]\.mtu: expected number, got string$/, TypeError],
    [[{ op: 'link.set', link: `${p}v`, mtu: 10 }], /^ops\[0\]\.mtu: must be between 68 and 65535/, RangeError],
    [[{ op: 'link.set', link: true }], /^ops\[0\]\.link: expected interface name \(string\) or ifindex \(number\), got boolean$/, TypeError],
    [[{ op: 'addr.add', link: 'lo', address: '10.0.0.300/24' }], /^ops\[0\]\.address: '10\.0\.0\.300\/24' is not an address/, RangeError],
    [[{ op: 'route.add', dst: '10.1.0.0/16', gateway: 'fd00::1' }], /^ops\[0\]\.gateway: address family differs/, RangeError],
    [[{ op: 'link.add', kind: 'dummy', name: 'x' }], /^ops\[0\]\.kind: 'dummy' is not one of 'veth', 'bridge'/, RangeError],
    [[{ op: 'link.delGroup', group: 0 }], /^ops\[0\]\.group: must be between 1 and/, RangeError],
    [[{ op: 'frobnicate' }], /^ops\[0\]\.op: unknown op 'frobnicate'$/, RangeError],
    [[null], /^ops\[0\]: expected object, got null$/, TypeError],
    [{ op: 'link.list' }, /^ops: expected an array of ops$/, TypeError],
  ];
  for (const [ops, message, type] of cases) {
    await t.throwsAsync(h.run(ops as Op[]), { instanceOf: type, message });
    t.throws(() => h.runSync(ops as Op[]), { instanceOf: type, message });
  }
  t.throws(() => h.encode({ op: 'link.set', link: 'lo', mac: 'zz' } as Op), { instanceOf: RangeError, message: /^op\.mac:/ });
  t.is(link(ns.name, `${p}ok`), undefined, 'a batch with a bad op sends nothing, not even the good ops before it');
});

test('a closed handle refuses work with EBADF; close is idempotent', async (t) => {
  const { h, ns } = setup(t, 'knee');
  h.close();
  h.close();
  t.true(h.closed);
  const err = await t.throwsAsync(h.run([{ op: 'link.add', kind: 'bridge', name: 'x' }]), { instanceOf: KernelError });
  t.is(err!.code, 'EBADF');
  t.is(err!.message, `EBADF creating bridge x: the netlink handle is closed in netns ${ns.path}`);
  t.throws(() => h.runSync([{ op: 'link.list' }]), { instanceOf: KernelError, message: /^EBADF/ });
});
