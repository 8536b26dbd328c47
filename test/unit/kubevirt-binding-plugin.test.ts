// knit as KubeVirt's tap binding plugin (issue 25): the pod interface and tap names follow
// KubeVirt's name scheme (facts from kubevirt/kubevirt pkg/network/namescheme's tests), the
// binding CNI call (cni-arg logicNetworkName) maps to a tap on the existing pod interface, and
// the plan on that interface adds only the tap and the redirect, with the interface's own MAC,
// MTU, addresses and routes as the guest's.
import test from 'ava';
import { podSettings } from '../../src/cni-frontend/annotations.js';
import { kubevirtStrategy } from '../../runtimes/kubevirt/index.js';
import { strategies } from '../../runtimes/index.js';
import { hashedPodInterface, preparePodInterface } from '../../runtimes/kubevirt/pod-interface.js';
import { kubevirtTapName } from '../../runtimes/kubevirt/names.js';
import type { TapHandoff } from '../../src/base/handoff.js';
import type { PrepareContext } from '../../src/base/strategy.js';
import { makeInput, NETNS, planProblems } from './strategy-plan-check.js';

test('KubeVirt\'s hashed pod interface names, and the taps virt-launcher looks for', (t) => {
  // kubevirt pkg/network/namescheme/networknamescheme_test.go
  t.is(hashedPodInterface('red'), 'podb1f51a511f1');
  t.is(hashedPodInterface('network1'), 'poda7662f44d65');
  t.is(hashedPodInterface('blue'), 'pod16477688c0e');
  // pkg/network/link/names.go: "tap" + the pod interface name from its fourth character.
  t.is(kubevirtTapName('eth0', 0), 'tap0');
  t.is(kubevirtTapName('podb1f51a511f1', 1), 'tapb1f51a511f1');
});

test('a binding NAD call (args.cni.logicNetworkName) is a KubeVirt tap on that network\'s pod interface; only the annotation\'s queues carry over', (t) => {
  const s = podSettings({
    args: { cni: { logicNetworkName: 'red' } }, binding: { owner: '107' },
    runtimeConfig: { 'io.kubernetes.cri.pod-annotations': { 'knit.dev/binding': '{"binding":"masquerade","queues":"2"}' } },
  });
  t.is(s.runtime, 'kubevirt');
  t.deepEqual(s.binding, { owner: '107', queues: '2', binding: 'tap', logicNetwork: 'red' });
  t.throws(() => podSettings({ args: { cni: { logicNetworkName: 7 } } }), { message: /args\.cni\.logicNetworkName/ });
  t.is(podSettings({ args: { cni: {} } }).runtime, 'runc', 'no logicNetworkName: not a binding call');
});

/** prepare()'s reads, answered as the kernel would for a pod whose CNI made `links`. */
function fakeKernel(links: { name: string; index: number; mac: string; mtu: number }[]): PrepareContext {
  return {
    sysfsRoot: '/sys', holderOf: () => undefined, lock: () => undefined,
    runOps: (async (_ns: string | undefined, ops: { op: string; family?: number; link?: string }[]) => ops.map((o) => {
      if (o.op === 'link.list') return { links };
      if (o.op === 'addr.list') return { addrs: o.link === 'podb1f51a511f1' ? [{ index: 7, family: 4, address: '10.1.2.3', prefixLen: 24, scope: 'global', flags: [] }, { index: 7, family: 6, address: 'fe80::1', prefixLen: 64, scope: 'link', flags: [] }] : [] };
      if (o.op === 'route.list') return { routes: o.family === 4 ? [{ family: 4, dst: 'default', gateway: '10.1.2.1', index: 7, table: 254, scope: 'universe', protocol: 'boot' }, { family: 4, dst: '10.1.2.0/24', index: 7, table: 254, scope: 'link', protocol: 'kernel' }] : [] };
      throw new Error(`unexpected ${o.op}`);
    })) as PrepareContext['runOps'],
  };
}

test('on the hashed pod interface another CNI made: the tap tap<hash> for uid 107, the redirect, nothing else; the guest takes that interface\'s MAC, MTU, address and routes', async (t) => {
  const input = makeInput('kubevirt', [{ name: 'net1', binding: { binding: 'tap', logicNetwork: 'red', queues: '4' } }]);
  const ctx = fakeKernel([{ name: 'eth0', index: 2, mac: '0a:00:00:00:00:01', mtu: 1500 }, { name: 'podb1f51a511f1', index: 7, mac: '0a:00:00:00:00:07', mtu: 1400 }]);
  const prepared = await preparePodInterface(input, ctx, 'red');
  const plan = kubevirtStrategy.planInterface({ ...input, prepared });
  t.deepEqual(planProblems(plan.steps, [{ name: 'podb1f51a511f1', netns: NETNS }]), [], 'the other CNI\'s interface is the only device used that the plan did not make');
  t.deepEqual(plan.steps.map((s) => s.do.op), ['tun.add', 'link.set', 'qdisc.add', 'qdisc.add', 'filter.add', 'filter.add']);
  t.like(plan.steps[0]!.do, { op: 'tun.add', name: 'tapb1f51a511f1', queues: 4, owner: 107, group: 107, persist: true });
  t.true(plan.steps.every((s) => s.netns === NETNS));
  t.false(plan.steps.some((s) => s.do.op === 'link.set' && (s.do as { link: string }).link === 'podb1f51a511f1'), 'the other CNI\'s interface is not changed');
  t.deepEqual(plan.ips, []);
  const h = plan.interfaces[0]!.handoff as TapHandoff;
  t.like(h, { name: 'tapb1f51a511f1', mac: '0a:00:00:00:00:07', mtu: 1400, queues: 4, flags: 'IFF_TAP|IFF_NO_PI|IFF_VNET_HDR|IFF_MULTI_QUEUE', podInterface: 'podb1f51a511f1' });
  t.deepEqual(h.guest.ips, [{ address: '10.1.2.3/24', family: 4, gateway: '10.1.2.1' }]);
  t.deepEqual(h.guest.routes, [{ dst: '0.0.0.0/0', gateway: '10.1.2.1' }]);
  t.is(h.guest.name, 'net1', 'the interface of the request (CNI_IFNAME), as for every hand-off');
  t.regex(h.libvirt!.interface, /<target dev='tapb1f51a511f1' managed='no'\/>[\s\S]*<driver name='vhost' queues='4'\/>/);
});

test('the primary network: no hashed interface, so eth0 and tap0; no pod interface at all is INVALID_ARGUMENT naming the option', async (t) => {
  const input = makeInput('kubevirt', [{ name: 'net1', binding: { binding: 'tap', logicNetwork: 'default' } }]);
  const prepared = await preparePodInterface(input, fakeKernel([{ name: 'eth0', index: 2, mac: '0a:00:00:00:00:01', mtu: 1500 }]), 'default');
  t.is(prepared.podInterface, 'eth0');
  t.like(kubevirtStrategy.planInterface({ ...input, prepared }).steps[0]!.do, { name: 'tap0' });
  await t.throwsAsync(preparePodInterface(input, fakeKernel([]), 'default'), { message: /interfaces\[0\]\.binding\.logicNetwork: .*neither pod[0-9a-f]{11} nor eth0/ });
  t.throws(() => kubevirtStrategy.planInterface(makeInput('kubevirt', [{ name: 'eth0', binding: { binding: 'masquerade', logicNetwork: 'x' } }])), { message: /logicNetwork: only applies to binding tap/ });
});

test('every runtime plans a binding on a pod interface already there the same way: a runc pod whose eth0 knit made gets the tap on eth0 (issue 34), and a CNI network runs no chain for it', async (t) => {
  const ctx = fakeKernel([{ name: 'eth0', index: 2, mac: '0a:00:00:00:00:01', mtu: 1500 }]);
  const ifaces = [{ name: 'eth0' }, { name: 'net1', binding: { binding: 'tap', logicNetwork: 'default' } }];
  for (const runtime of ['runc', 'kata', 'kubevirt'] as const) {
    const input = makeInput(runtime, ifaces, { index: 1 });
    const prepared = await strategies[runtime].prepare!(input, ctx);
    const plan = strategies[runtime].planInterface({ ...input, prepared });
    t.deepEqual(plan.steps.map((s) => s.do.op), ['tun.add', 'link.set', 'qdisc.add', 'qdisc.add', 'filter.add', 'filter.add'], runtime);
    t.like(plan.steps[0]!.do, { op: 'tun.add', name: 'tap0', owner: 107, group: 107 }, runtime);
    const redirects = plan.steps.filter((s) => s.do.op === 'filter.add').map((s) => s.do as { link: string; redirectTo: string });
    t.deepEqual(redirects.map((f) => `${f.link}→${f.redirectTo}`).sort(), ['eth0→tap0', 'tap0→eth0'], runtime);
    t.like(plan.interfaces[0]!.handoff, { runtime: 'kubevirt', model: 'tap', name: 'tap0', mac: '0a:00:00:00:00:01' }, runtime);
    const onChain = { ...input, network: { ...input.network, mode: 'cni' as const, cni: { conflist: '{}', pluginDirs: [], cacheDir: '/x', timeoutMs: 1000 } } };
    const chainPlan = strategies[runtime].planInterface({ ...onChain, prepared: await strategies[runtime].prepare!(onChain, ctx) });
    t.false(chainPlan.steps.some((s) => s.do.op === 'cni.add'), `${runtime}: no chain for an interface that makes no pod interface`);
  }
  // The runtime's own options stay refused where they were: runc takes no binding on its veths.
  t.throws(() => strategies.runc.planInterface(makeInput('runc', [{ name: 'eth0', binding: { binding: 'tap' } }])), { message: /runc takes no binding options/ });
});
