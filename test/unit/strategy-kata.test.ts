// The kata strategy's plans: tcfilter (default), macvtap, host-tap with the DAN file. Pure
// plan shapes; the kernel tier runs the same plans in a netns.
import test from 'ava';
import { createHash } from 'node:crypto';
import { kataStrategy } from '../../runtimes/kata/index.js';
import type { PrepareContext } from '../../src/base/strategy.js';
import { strategies } from '../../runtimes/index.js';
import { KnitError } from '../../src/base/errors.js';
import type { InterfaceRequest } from '../../src/base/types.js';
import type { FileRemoveAction, FileWriteAction, RouteOp, TunAddOp } from '../../src/base/ops.js';
import type { Handoff, TapHandoff as VmHandoff } from '../../src/base/handoff.js';
import type { DanConfig } from '../../runtimes/kata/dan.js';
import { makeInput, NETNS, SANDBOX, V4, V6, inNetns, ops, planProblems } from './strategy-plan-check.js';

const BRIDGE = [{ name: 'knbr0', netns: 'host' }];
const eth0 = (binding?: Record<string, string>): InterfaceRequest => ({ name: 'eth0', ...(binding ? { binding } : {}) });
const handoffOf = (plan: { interfaces: { handoff?: Handoff }[] }) => plan.interfaces.find((i) => i.handoff)!.handoff as VmHandoff;

test('registry maps every runtime to its strategy', (t) => {
  t.deepEqual(Object.keys(strategies).sort(), ['kata', 'kubevirt', 'runc']);
  for (const [kind, s] of Object.entries(strategies)) t.is(s.runtime as string, kind);
});

test('tcfilter (default): runc veth, then tap0_kata and redirects both ways, all undone', (t) => {
  const plan = kataStrategy.planInterface(makeInput('kata', [eth0()]));
  t.deepEqual(planProblems(plan.steps, BRIDGE), []);
  t.is(plan.steps[0].do.op, 'link.add');
  const tail = plan.steps.slice(-6);
  t.deepEqual(ops(tail), ['tun.add', 'link.set', 'qdisc.add', 'qdisc.add', 'filter.add', 'filter.add']);
  t.true(tail.every((s) => s.netns === NETNS));
  const tun = tail[0].do as TunAddOp;
  t.like(tun, { name: 'tap0_kata', mode: 'tap', queues: 1, vnetHdr: true, persist: true });
  t.like(tail[1].do, { op: 'link.set', link: 'tap0_kata', mtu: 1450, up: true });
  t.like(tail[2], { do: { link: 'eth0', kind: 'ingress' }, undo: { op: 'qdisc.del', link: 'eth0' } });
  t.like(tail[3].do, { link: 'tap0_kata', kind: 'ingress' });
  t.like(tail[4].do, { link: 'eth0', parent: 'ingress', redirectTo: 'tap0_kata' });
  t.like(tail[5].do, { link: 'tap0_kata', parent: 'ingress', redirectTo: 'eth0' });
  // The veth keeps its address, as Kata leaves it.
  t.true(plan.steps.some((s) => s.netns === NETNS && s.do.op === 'addr.add' && s.do.link === 'eth0'));
});

test('tcfilter hand-off: tap, flags, guest MAC = veth MAC, MTU, guest L3', (t) => {
  const plan = kataStrategy.planInterface(makeInput('kata', [eth0()], { addresses: [V4, V6] }));
  const pod = plan.interfaces.find((i) => i.name === 'eth0')!;
  const h = handoffOf(plan);
  t.like(h, {
    runtime: 'kata', model: 'tcfilter', device: 'tap', name: 'tap0_kata', netns: NETNS, queues: 1,
    flags: 'IFF_TAP|IFF_NO_PI|IFF_VNET_HDR', flagsValue: 0x5002, persist: true, mac: pod.mac, mtu: 1450, podIpsOn: 'pod+guest',
  });
  t.is(pod.mac, '0a:58:0a:58:00:05');
  t.deepEqual(h.guest.ips, [
    { address: '10.88.0.5/16', family: 4, gateway: '10.88.0.1' },
    { address: 'fd88::5/64', family: 6, gateway: 'fd88::1' },
  ]);
  t.deepEqual(h.guest.routes, [
    { dst: '0.0.0.0/0', gateway: '10.88.0.1' },
    { dst: '10.96.0.0/12', gateway: '10.88.0.1' },
    { dst: '::/0', gateway: 'fd88::1' },
  ]);
  t.deepEqual(h.guest.neighbors, []);
  t.like(h.guest, { name: 'eth0', mac: pod.mac, mtu: 1450, delivery: 'agent' });
  t.deepEqual(h.guest.dns?.nameservers, ['10.96.0.10']);
  // The tap's own MAC is not the guest's: the result does not claim one for it.
  t.is(plan.interfaces.find((i) => i.name === 'tap0_kata')!.mac, undefined);
  t.deepEqual(plan.ips.map((ip) => plan.interfaces[ip.interface].name), ['eth0', 'eth0']);
});

test('tcfilter on a routed network: guest gets the onlink gateway and its permanent neighbour', (t) => {
  const plan = kataStrategy.planInterface(makeInput('kata', [eth0()], { mode: 'routed' }));
  t.deepEqual(planProblems(plan.steps), []);
  const h = handoffOf(plan);
  t.deepEqual(h.guest.ips, [{ address: '10.88.0.5/32', family: 4, gateway: '169.254.1.1' }]);
  t.deepEqual(h.guest.routes[0], { dst: '0.0.0.0/0', gateway: '169.254.1.1', onlink: true });
  t.deepEqual(h.guest.neighbors, [{ address: '169.254.1.1', mac: 'ee:ee:ee:ee:ee:ee', state: 'permanent' }]);
});

test('queues > 1 make a multi-queue tap and say so in the flags', (t) => {
  const plan = kataStrategy.planInterface(makeInput('kata', [eth0({ queues: '4' })]));
  t.is((plan.steps.find((s) => s.do.op === 'tun.add')!.do as TunAddOp).queues, 4);
  t.like(handoffOf(plan), { queues: 4, flags: 'IFF_TAP|IFF_NO_PI|IFF_VNET_HDR|IFF_MULTI_QUEUE', flagsValue: 0x5102 });
});

test('the second interface gets tap1_kata, as Kata numbers endpoints', (t) => {
  const ifaces = [eth0(), { name: 'net1' }];
  const plan = kataStrategy.planInterface(makeInput('kata', ifaces, { index: 1 }));
  t.deepEqual(planProblems(plan.steps, BRIDGE), []);
  t.is(handoffOf(plan).name, 'tap1_kata');
});

test('macvtap: bridge-mode macvtap on an address-less veth, guest MAC on the macvtap', (t) => {
  const input = makeInput('kata', [eth0({ mode: 'macvtap', queues: '2' })], { addresses: [V4, V6] });
  const plan = kataStrategy.planInterface(input);
  t.deepEqual(planProblems(plan.steps, BRIDGE), []);
  const sandboxOps = inNetns(plan.steps, NETNS).map((s) => s.do.op);
  t.false(sandboxOps.includes('addr.add'));
  t.false(sandboxOps.includes('route.add'));
  const mv = plan.steps.find((s) => s.do.op === 'link.add' && s.do.kind === 'macvtap')!;
  t.like(mv, { netns: NETNS, do: { name: 'tap0_kata', parent: 'eth0', mode: 'bridge', mac: '0a:58:0a:58:00:05', mtu: 1450 }, undo: { op: 'link.del', link: 'tap0_kata' } });
  const pod = plan.interfaces.find((i) => i.name === 'eth0')!;
  t.not(pod.mac, '0a:58:0a:58:00:05');
  const h = handoffOf(plan);
  t.like(h, { model: 'macvtap', device: 'macvtap', name: 'tap0_kata', queues: 2, mac: '0a:58:0a:58:00:05', podIpsOn: 'guest' });
  t.is(h.guest.ips.length, 2);
  t.deepEqual(plan.ips.map((ip) => plan.interfaces[ip.interface].name), ['tap0_kata', 'tap0_kata']);
});

test("macvtap ifindex: prepare takes the first index from the sandbox's own start whose /dev/tap node is free and no attach in flight takes; none without a way to look", async (t) => {
  const input = makeInput('kata', [eth0({ mode: 'macvtap' })]);
  const asked: string[] = [];
  const locked: string[] = [];
  let first: number | undefined;
  const ctx = (taken: (index: number) => boolean, busy: (index: number) => boolean) => ({
    runOps: async () => [], sysfsRoot: '/sys', holderOf: () => undefined,
    // A busy index is held by this very attach (another of its interfaces took it): taken all the same.
    lock: (key: string) => (locked.push(key), busy(Number(key.split(':')[1])) ? SANDBOX : undefined),
    pathExists: (p: string) => (asked.push(p), taken(Number(p.slice('/dev/tap'.length)))),
  }) as unknown as PrepareContext;
  const free = (await kataStrategy.prepare!(input, ctx(() => false, () => false))) as { macvtapIndex: number };
  first = free.macvtapIndex;
  t.true(first >= 8192 && first < 8192 + 0x10000);
  t.deepEqual(asked, [`/dev/tap${first}`]);
  t.deepEqual(locked, [`macvtap-ifindex:${first}`]);
  // The same sandbox and interface start at the same place; a taken node and a busy index are passed over.
  const start = first;
  const next = (i: number) => 8192 + ((start - 8192 + i) % 0x10000);
  const picked = (await kataStrategy.prepare!(input, ctx((i) => i === next(0), (i) => i === next(1)))) as { macvtapIndex: number };
  t.is(picked.macvtapIndex, next(2));
  const plan = kataStrategy.planInterface({ ...input, prepared: picked });
  t.is((plan.steps.find((s) => s.do.op === 'link.add' && s.do.kind === 'macvtap')!.do as { index?: number }).index, next(2));
  // Other models pick nothing; a context that cannot look leaves the kernel's pick.
  t.is(await kataStrategy.prepare!(makeInput('kata', [eth0()]), ctx(() => false, () => false)), undefined);
  const { pathExists: _, ...blind } = ctx(() => false, () => false) as PrepareContext & { pathExists?: unknown };
  t.is(await kataStrategy.prepare!(input, blind as PrepareContext), undefined);
  t.false('index' in (kataStrategy.planInterface(input).steps.find((s) => s.do.op === 'link.add' && s.do.kind === 'macvtap')!.do));
});

test('host-tap (bridge network): a host tap on the bridge, nothing in the netns, and the DAN file', (t) => {
  const plan = kataStrategy.planInterface(makeInput('kata', [eth0({ mode: 'host-tap', queues: '2' })], { addresses: [V4, V6] }));
  t.deepEqual(planProblems(plan.steps, BRIDGE), []);
  t.deepEqual(inNetns(plan.steps, NETNS), []);
  const tun = plan.steps[0];
  const tap = (tun.do as TunAddOp).name;
  t.regex(tap, /^knt[0-9a-f]{9}$/);
  t.truthy(tun.retire?.length, 'host tap has the fast retire path');
  t.like(plan.steps[1].do, { op: 'link.set', link: tap, master: 'knbr0', up: true, mtu: 1450 });
  t.like(plan.steps[2].do, { op: 'link.set', link: tap, hairpin: true });
  const write = plan.steps.at(-1)!;
  const path = `/run/kata-containers/dans/${SANDBOX}.json`;
  t.like(write, { do: { op: 'file.write', path, within: '/run/kata-containers/dans' }, undo: { op: 'file.remove', path } });
  t.is((write.undo as FileRemoveAction).sha256, createHash('sha256').update((write.do as FileWriteAction).content).digest('hex'), 'undo removes only what was written');
  t.deepEqual(plan.interfaces.map((i) => [i.name, i.sandbox]), [[tap, undefined]]);
  t.like(handoffOf(plan), { model: 'host-tap', name: tap, netns: null, queues: 2, podIpsOn: 'guest', dan: { path } });

  const dan = JSON.parse((write.do as FileWriteAction).content) as DanConfig;
  t.deepEqual(Object.keys(dan), ['devices']);
  t.is(dan.devices.length, 1);
  const dev = dan.devices[0];
  t.deepEqual(Object.keys(dev).sort(), ['device', 'guest_mac', 'name', 'network_info']);
  t.deepEqual(dev.device, { type: 'host-tap', tap_name: tap, queue_num: 2, queue_size: 256 });
  t.like(dev, { name: 'eth0', guest_mac: '0a:58:0a:58:00:05' });
  t.deepEqual(dev.network_info.interface, { ip_addresses: ['10.88.0.5/16', 'fd88::5/64'], mtu: 1450, flags: 0 });
  t.deepEqual(dev.network_info.routes, [
    { dest: '', gateway: '10.88.0.1', source: '', scope: 0, flags: 0 },
    { dest: '10.96.0.0/12', gateway: '10.88.0.1', source: '', scope: 0, flags: 0 },
    { dest: '', gateway: 'fd88::1', source: '', scope: 0, flags: 0 },
  ]);
  t.deepEqual(dev.network_info.neighbors, []);
});

test('host-tap (routed network): gateway MAC on the tap, host routes to it, neighbour in the DAN file', (t) => {
  const input = makeInput('kata', [eth0({ mode: 'host-tap', danDir: '/var/lib/kata/dan/' })], { mode: 'routed', addresses: [V4, V6] });
  const plan = kataStrategy.planInterface({ ...input, danDir: '/var/lib/kata' });
  t.deepEqual(planProblems(plan.steps), []);
  const tap = (plan.steps[0].do as TunAddOp).name;
  t.like(plan.steps[1].do, { mac: 'ee:ee:ee:ee:ee:ee' });
  const routes = plan.steps.filter((s) => s.do.op === 'route.add').map((s) => s.do as RouteOp);
  t.deepEqual(routes.map((r) => [r.dst, r.link, r.scope]), [['10.88.0.5/32', tap, 'link'], ['fd88::5/128', tap, 'link']]);
  t.true(plan.steps.filter((s) => s.do.op === 'route.add').every((s) => s.undo?.op === 'route.del'));
  t.true(plan.steps.some((s) => s.do.op === 'sysctl.set' && s.do.key === `net.ipv4.conf.${tap}.forwarding`));
  const write = plan.steps.at(-1)!.do as FileWriteAction;
  t.is(write.path, `/var/lib/kata/dan/${SANDBOX}.json`);
  t.is(write.within, '/var/lib/kata');
  const dev = (JSON.parse(write.content) as DanConfig).devices[0];
  t.deepEqual(dev.network_info.interface.ip_addresses, ['10.88.0.5/32', 'fd88::5/128']);
  t.deepEqual(dev.network_info.routes[0], { dest: '', gateway: '169.254.1.1', source: '', scope: 0, flags: 4 });
  t.deepEqual(dev.network_info.neighbors, [
    { ip_address: '169.254.1.1/32', hardware_addr: 'ee:ee:ee:ee:ee:ee', state: 128, flags: 0 },
    { ip_address: 'fe80::1/128', hardware_addr: 'ee:ee:ee:ee:ee:ee', state: 128, flags: 0 },
  ]);
});

function invalidField(t: import('ava').ExecutionContext, fn: () => unknown, field: string) {
  const err = t.throws(fn, { instanceOf: KnitError });
  t.is(err?.code, 'INVALID_ARGUMENT');
  t.is(err?.details.field, field);
  t.true(err?.message.startsWith(`${field}: `));
}

test('bad kata options are INVALID_ARGUMENT naming the field', (t) => {
  const plan = (binding: Record<string, string>) => () => kataStrategy.planInterface(makeInput('kata', [eth0(), { name: 'net1', binding }], { index: 1 }));
  invalidField(t, plan({ mode: 'bogus' }), 'interfaces[1].binding.mode');
  invalidField(t, plan({ queues: '0' }), 'interfaces[1].binding.queues');
  invalidField(t, plan({ queues: '257' }), 'interfaces[1].binding.queues');
  invalidField(t, plan({ queues: 'four' }), 'interfaces[1].binding.queues');
  invalidField(t, plan({ queues: '1.5' }), 'interfaces[1].binding.queues');
  invalidField(t, plan({ mode: 'tcfilter', danDir: '/x' }), 'interfaces[1].binding.danDir');
  invalidField(t, plan({ vhost: 'on' }), 'interfaces[1].binding.vhost');
  invalidField(t, () => kataStrategy.planInterface(makeInput('kata', [eth0({ mode: 'host-tap', danDir: 'dans' })])), 'interfaces[0].binding.danDir');
  invalidField(t, () => kataStrategy.planInterface(makeInput('kata', [eth0({ mode: 'host-tap', danDir: '/run/../etc' })])), 'interfaces[0].binding.danDir');
  // Only kata.danDir (default Kata's /run/kata-containers/dans) or a directory below it.
  for (const danDir of ['/etc', '/run/kata-containers', '/run/kata-containers/dans-x', '/']) {
    invalidField(t, () => kataStrategy.planInterface(makeInput('kata', [eth0({ mode: 'host-tap', danDir })])), 'interfaces[0].binding.danDir');
  }
});

test('host-tap must be the sandbox\'s only interface (one DAN file, used exclusively)', (t) => {
  invalidField(t, () => kataStrategy.planInterface(makeInput('kata', [eth0({ mode: 'host-tap' }), { name: 'net1' }])), 'interfaces[0].binding.mode');
});
