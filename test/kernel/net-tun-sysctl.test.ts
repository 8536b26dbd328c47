// tun/tap devices and sysctls, both made from a thread inside the handle's netns.
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { readlinkSync } from 'node:fs';
import { closeFd } from '../../src/net/fdpass.js';
import { NetHandle } from '../../src/net/handle.js';
import { addonPath } from '../../src/net/native.js';
import { createTun, getSysctl, setSysctl } from '../helpers/net-calls.js';
import { KernelError } from '../../src/net/errors.js';
import { link, sysctl, tunOwner } from '../helpers/observe.js';
import { makeNetns, uniquePrefix } from '../helpers/names.js';

test('tun.add: multi-queue tap with vnet_hdr, owner and group, queue fds returned and persistent', async (t) => {
  const p = uniquePrefix('knua');
  const ns = makeNetns(t, p, 'a');
  const h = NetHandle.open(ns.path);
  t.teardown(() => h.close());
  const made = await createTun(h, { name: `${p}tap`, mode: 'tap', queues: 3, vnetHdr: true, owner: 107, group: 107, returnFds: true });
  const open = new Set(made.fds);
  const close = (fd: number) => { if (open.delete(fd)) closeFd(fd); };
  t.teardown(() => [...open].forEach(close));
  t.is(made.fds.length, 3);
  for (const fd of made.fds) t.is(readlinkSync(`/proc/self/fd/${fd}`), '/dev/net/tun');
  let l = link(ns.name, `${p}tap`);
  t.is(l.ifindex, made.index);
  t.like(l.linkinfo.info_data, { type: 'tap', pi: false, vnet_hdr: true, multi_queue: true, persist: true, numqueues: 3 });
  t.deepEqual(tunOwner(ns.name, `${p}tap`), { user: 107, group: 107 });
  made.fds.forEach(close);
  l = link(ns.name, `${p}tap`);
  t.like(l.linkinfo.info_data, { numqueues: 0, persist: true }, 'persistent: outlives its queues');
  t.is(link(undefined, `${p}tap`), undefined, 'made in the netns, not in ours');
});

test('tun.add: a non-persistent tun lives exactly as long as its fd', async (t) => {
  const p = uniquePrefix('knub');
  const ns = makeNetns(t, p, 'a');
  const h = NetHandle.open(ns.path);
  t.teardown(() => h.close());
  const [r] = await h.run([{ op: 'tun.add', name: `${p}tun`, mode: 'tun', persist: false, returnFds: true }]);
  t.like(link(ns.name, `${p}tun`).linkinfo.info_data, { type: 'tun', persist: false });
  closeFd(r.fds![0]);
  t.is(link(ns.name, `${p}tun`), undefined);
  t.throws(() => h.runSync([{ op: 'tun.add', name: `${p}x`, mode: 'tun', persist: false }]), { instanceOf: RangeError, message: /ops\[0\]\.persist/ });
});

test('tun.add leaves no device behind when it fails: name taken, and running out of fds mid-way', async (t) => {
  const p = uniquePrefix('knuc');
  const ns = makeNetns(t, p, 'a');
  const h = NetHandle.open(ns.path);
  t.teardown(() => h.close());
  await h.run([{ op: 'link.add', kind: 'bridge', name: `${p}br` }, { op: 'tun.add', name: `${p}tp`, mode: 'tap' }]);
  for (const name of [`${p}br`, `${p}tp`]) {
    const err = await t.throwsAsync(h.run([{ op: 'tun.add', name, mode: 'tap' }]), { instanceOf: KernelError });
    t.is(err!.code, 'EEXIST');
    t.regex(err!.message, new RegExp(`^EEXIST creating tap ${name}: a link with this name already exists in netns ${ns.path}`));
  }
  t.is(link(ns.name, `${p}br`).linkinfo.info_kind, 'bridge', 'the existing link is untouched');

  // A child whose fd limit allows only three more files asks for eight queues.
  const script = `
    const { Handle } = require(${JSON.stringify(addonPath())});
    const fs = require('fs');
    const h = new Handle(${JSON.stringify(ns.path)});
    const limit = Number(fs.readFileSync('/proc/self/limits', 'utf8').match(/Max open files\\s+(\\d+)/)[1]);
    while (fs.readdirSync('/proc/self/fd').length < limit - 3) fs.openSync('/dev/null', 'r');
    try { h.runSync([{ op: 'tun.add', name: ${JSON.stringify(`${p}mq`)}, mode: 'tap', queues: 8 }]); console.log('made'); }
    catch (e) { console.log(e.code); }`;
  const r = spawnSync('prlimit', ['--nofile=200:200', process.execPath, '-e', script], { encoding: 'utf8' });
  t.is(r.stdout.trim(), 'EMFILE', r.stderr);
  t.is(link(ns.name, `${p}mq`), undefined, 'no half-made tap');
});

test('tun.open adds queue fds to an existing tap, never creates one, and refuses other flags', async (t) => {
  const p = uniquePrefix('knue');
  const ns = makeNetns(t, p, 'a');
  const h = NetHandle.open(ns.path);
  t.teardown(() => h.close());
  const tap = `${p}tap`;
  const [made] = await h.run([{ op: 'tun.add', name: tap, mode: 'tap', queues: 2, vnetHdr: true }]);
  const [r] = await h.run([{ op: 'tun.open', name: tap, mode: 'tap', queues: 2, vnetHdr: true }]);
  t.teardown(() => r.fds?.forEach((fd) => closeFd(fd)));
  t.is(r.index, made.index);
  t.is(r.fds?.length, 2);
  t.is(link(ns.name, tap).linkinfo.info_data.numqueues, 2);

  const missing = await t.throwsAsync(h.run([{ op: 'tun.open', name: `${p}none`, mode: 'tap' }]), { instanceOf: KernelError });
  t.is(missing!.message, `ENODEV opening queues of tap ${p}none: no such tun/tap device in netns ${ns.path}`);
  t.is(link(ns.name, `${p}none`), undefined, 'no device was made by the attempt');
  const flags = await t.throwsAsync(h.run([{ op: 'tun.open', name: tap, mode: 'tun', queues: 2 }]), { instanceOf: KernelError });
  t.is(flags!.code, 'EINVAL');
  t.is(link(ns.name, tap).linkinfo.info_data.numqueues, 2, 'a refused open attaches nothing');
});

test('sysctl.set/get write and read /proc/sys inside the netns', async (t) => {
  const p = uniquePrefix('knud');
  const ns = makeNetns(t, p, 'a');
  const h = NetHandle.open(ns.path);
  t.teardown(() => h.close());
  const dev = `${p}v0`;
  await h.run([{ op: 'link.add', kind: 'veth', name: dev, peer: { name: `${p}v1` } }]);
  const key = `net.ipv4.conf.${dev}.arp_notify`;
  t.is(await getSysctl(h, key), '0');
  await setSysctl(h, key, '1');
  t.is(sysctl(ns.name, key), '1', 'seen by sysctl(8) in the netns');
  t.is(await getSysctl(h, key), '1');
  await h.run([{ op: 'sysctl.set', key: 'net.ipv4.ip_forward', value: '1' }]);
  t.is(sysctl(ns.name, 'net.ipv4.ip_forward'), '1');

  const host = NetHandle.open();
  t.teardown(() => host.close());
  const err = await t.throwsAsync(getSysctl(host, key), { instanceOf: KernelError });
  t.is(err!.code, 'ENOENT', "the veth's sysctl does not exist in our own netns");
  t.regex(err!.message, /^ENOENT reading sysctl .*: no such sysctl .* in the daemon's netns/);
  t.throws(() => h.runSync([{ op: 'sysctl.set', key: 'net/../../etc', value: '1' }]), { instanceOf: RangeError, message: /ops\[0\]\.key/ });
});
