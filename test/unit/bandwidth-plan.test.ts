// Bandwidth plans (runtimes/common/bandwidth.ts): what each runtime adds for a limit, the units
// the addon gets, every step's inverse, the record format it needs, and that GC counts the ifb
// as the record's. Pure plan shapes; test/kernel/bandwidth.test.ts runs them.
import test from 'ava';
import { strategies } from '../../runtimes/index.js';
import { ifbName, planBandwidth, tbfParams } from '../../runtimes/common/bandwidth.js';
import { hostIfName } from '../../src/base/names.js';
import { ownedHostDevices, recordVersionFor, type SandboxRecord } from '../../src/core/record.js';
import type { InterfaceRequest } from '../../src/base/types.js';
import { makeInput, SANDBOX, planProblems } from './strategy-plan-check.js';

const BRIDGE = [{ name: 'knbr0', netns: 'host' }];
const bw = { ingress: { rate: 20_000_000, burst: 2_000_000 }, egress: { rate: 10_000_000, burst: 1_000_000 } };

test('tbf parameters are bytes: rate/8, burst/8, and a queue of 25 ms at the rate plus the burst', (t) => {
  t.deepEqual(tbfParams({ rate: 20_000_000, burst: 2_000_000 }), { rate: 2_500_000, burst: 250_000, limit: 62_500 + 250_000 });
  // Large limits saturate the kernel's u32 fields instead of wrapping.
  t.deepEqual(tbfParams({ rate: 8e15, burst: 8 * 2 ** 32 - 8 }), { rate: 1e15, burst: 2 ** 32 - 1, limit: 2 ** 32 - 1 });
});

test('no limit, no steps; ingress only is one tbf; egress only is the ifb, its tbf, the ingress qdisc and the redirect', (t) => {
  t.deepEqual(planBandwidth(SANDBOX, 'eth0', 'kn0', 1500, undefined), []);
  const ingress = planBandwidth(SANDBOX, 'eth0', 'kn0', 1500, { ingress: bw.ingress });
  t.deepEqual(ingress.map((s) => s.do), [{ op: 'qdisc.add', link: 'kn0', kind: 'tbf', rate: 2_500_000, burst: 250_000, limit: 312_500 }]);
  t.deepEqual(ingress[0]!.undo, { op: 'qdisc.del', link: 'kn0', kind: 'tbf' });
  const egress = planBandwidth(SANDBOX, 'eth0', 'kn0', 9000, { egress: bw.egress });
  const ifb = ifbName(SANDBOX, 'eth0');
  t.regex(ifb, /^knb[0-9a-f]{9}$/);
  t.like(egress[0], { do: { op: 'link.add', kind: 'ifb', name: ifb, mtu: 9000, up: true }, undo: { op: 'link.del', link: ifb } });
  t.true((egress[0]!.do as { alias: string }).alias.endsWith(`sandbox=${SANDBOX};if=eth0`));
  t.like(egress[1], { do: { op: 'qdisc.add', link: ifb, kind: 'tbf', rate: 1_250_000 }, undo: { op: 'qdisc.del', link: ifb, kind: 'tbf' } });
  t.like(egress[2], { do: { op: 'qdisc.add', link: 'kn0', kind: 'ingress' }, undo: { op: 'qdisc.del', link: 'kn0', kind: 'ingress' } });
  t.like(egress[3], { do: { op: 'filter.add', link: 'kn0', parent: 'ingress', redirectTo: ifb }, undo: { op: 'filter.del', link: 'kn0', parent: 'ingress' } });
  t.true(egress.every((s) => s.netns === undefined), 'all on the host, where the sandbox cannot reach');
});

const cases: [string, 'runc' | 'kata' | 'kubevirt', Record<string, string> | undefined, (id: string) => string, ('bridge' | 'routed')?][] = [
  ['runc', 'runc', undefined, (id) => hostIfName(id, 'eth0')],
  ['runc routed', 'runc', undefined, (id) => hostIfName(id, 'eth0'), 'routed'],
  ['kubevirt bridge', 'kubevirt', { binding: 'bridge' }, (id) => hostIfName(id, 'eth0-nic')],
  ['kata tcfilter', 'kata', { mode: 'tcfilter' }, (id) => hostIfName(id, 'eth0')],
  ['kata macvtap', 'kata', { mode: 'macvtap' }, (id) => hostIfName(id, 'eth0')],
  ['kata host-tap', 'kata', { mode: 'host-tap' }, (id) => hostIfName(id, 'eth0', 't')],
  ['kubevirt masquerade', 'kubevirt', { binding: 'masquerade' }, (id) => hostIfName(id, 'eth0')],
  ['kubevirt tap', 'kubevirt', { binding: 'tap' }, (id) => hostIfName(id, 'eth0')],
];
for (const [name, runtime, binding, hostDev, mode] of cases) {
  test(`${name}: the limit is shaped on the host device, every step sound, record format 3, the ifb owned`, async (t) => {
    const iface: InterfaceRequest = { name: 'eth0', ...(binding ? { binding } : {}), bandwidth: bw };
    const plan = await strategies[runtime].planInterface(makeInput(runtime, [iface], { mode }));
    t.deepEqual(planProblems(plan.steps, BRIDGE), []);
    const dev = hostDev(SANDBOX);
    t.true(plan.steps.some((s) => !s.netns && s.do.op === 'qdisc.add' && s.do.kind === 'tbf' && s.do.link === dev), `tbf on ${dev}`);
    // The ifb is named from the interface the host device is named from (KubeVirt bridge: eth0-nic).
    const ifb = plan.steps.find((s) => !s.netns && s.do.op === 'link.add' && s.do.kind === 'ifb')?.do as { name: string } | undefined;
    t.regex(ifb?.name ?? '', /^knb[0-9a-f]{9}$/);
    t.true(plan.steps.some((s) => !s.netns && s.do.op === 'filter.add' && s.do.link === dev && s.do.redirectTo === ifb?.name));
    t.is(recordVersionFor(plan.steps), 3);
    const rec = { steps: plan.steps, result: { interfaces: plan.interfaces } } as unknown as SandboxRecord;
    t.true(ownedHostDevices(rec).includes(ifb!.name));
    const plain = await strategies[runtime].planInterface(makeInput(runtime, [{ ...iface, bandwidth: undefined }], { mode }));
    t.true(recordVersionFor(plain.steps) < 3, 'without a limit the older format is kept');
  });
}
