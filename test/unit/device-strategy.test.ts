// The device strategy's prepare() and plans, against a simulated sysfs (no SR-IOV hardware on
// this machine) and a recorded kernel: link.get / addr.list answers written out here in the
// shape src/base/ops.ts gives them. The PF-side tests check the exact vf.set ops and their
// inverses with the recorded values; the vf.set encoding itself is checked byte for byte
// against iproute2 in test/kernel/net-vf.test.ts.
import test, { type ExecutionContext } from 'ava';
import { KnitError } from '../../src/base/errors.js';
import type { InterfaceRequest } from '../../src/base/types.js';
import type { AddrInfo, LinkInfo, Op, OpResult, ResultsOf } from '../../src/base/ops.js';
import { prepareDevice, HOST_NETNS } from '../../runtimes/with-devices/index.js';
import { withDevices } from '../../runtimes/with-devices/gate.js';
import { strategies } from '../../runtimes/index.js';
import type { PreparedDevice } from '../../runtimes/with-devices/index.js';
import type { InterfacePlan, PrepareContext, Strategy } from '../../src/base/strategy.js';
import { createSriovNode, NODE } from '../fixtures/fake-sysfs.js';
import { makeInput, NETNS, SANDBOX } from './strategy-plan-check.js';

const link = (name: string, over: Partial<LinkInfo> = {}): LinkInfo => ({
  index: 20, name, mtu: 1500, up: true, lowerUp: true, operstate: 'up', group: 0, ...over,
});

const PF_VFS = [
  { vf: 0, mac: '00:00:00:00:00:00', vlan: 0, qos: 0, vlanProto: '802.1Q' as const, spoofchk: true, trust: false, minTxRate: 0, maxTxRate: 0, linkState: 'auto' as const },
  { vf: 1, mac: '0c:42:a1:00:01:01', vlan: 30, qos: 1, vlanProto: '802.1Q' as const, spoofchk: true, trust: false, minTxRate: 0, maxTxRate: 500, linkState: 'auto' as const },
];

interface FakeKernelReads {
  host?: Record<string, LinkInfo>;
  sandbox?: string[];
  addrs?: Record<string, AddrInfo[]>;
  holders?: Record<string, string>;
  /** Devices another attach is claiming right now. */
  claiming?: Record<string, string>;
}

/** A PrepareContext answering from tables; records every op and lock. */
function fakeCtx(sysfsRoot: string, reads: FakeKernelReads = {}) {
  const host: Record<string, LinkInfo> = {
    ens1f0: link('ens1f0', { index: 4, mtu: 9000, mac: '0c:42:a1:00:00:00', vfs: PF_VFS }),
    ens1f0v0: link('ens1f0v0', { index: 10, mac: NODE.vfMac(0) }),
    ens1f0v1: link('ens1f0v1', { index: 11, mac: NODE.vfMac(1), up: false }),
    ens1f0v2: link('ens1f0v2', { index: 12, mac: NODE.vfMac(2) }),
    ...reads.host,
  };
  const ops: { netns?: string; op: Op }[] = [];
  const locks: string[] = [];
  const held = new Set<string>();
  const ctx: PrepareContext = {
    sysfsRoot,
    async runOps<const T extends readonly Op[]>(netns: string | undefined, batch: T) {
      return batch.map((op): OpResult => {
        ops.push({ netns, op });
        if (op.op === 'addr.list') return { addrs: reads.addrs?.[String(op.link)] ?? [] };
        if (op.op !== 'link.get') throw new Error(`unexpected op ${op.op}`);
        const found = netns === undefined ? host[String(op.link)] : reads.sandbox?.includes(String(op.link)) ? link(String(op.link)) : undefined;
        if (!found) throw Object.assign(new Error(`ENODEV reading link ${op.link}`), { code: 'ENODEV' });
        if (found.vfs && !op.vfs) return { link: { ...found, vfs: undefined } };
        return { link: found };
      }) as ResultsOf<T>;
    },
    holderOf: (bdf) => reads.holders?.[bdf],
    lock(key) {
      locks.push(key);
      if (held.has(key)) return SANDBOX;
      if (reads.claiming?.[key]) return reads.claiming[key];
      held.add(key);
      return undefined;
    },
  };
  return { ctx, ops, locks };
}

async function planFor(
  t: ExecutionContext,
  ifaces: InterfaceRequest[],
  opts: { index?: number; rdma?: 'Y' | 'N'; runtime?: 'runc' | 'kata' | 'kubevirt'; reads?: FakeKernelReads } = {},
): Promise<{ prepared: PreparedDevice; plan: InterfacePlan; ops: { netns?: string; op: Op }[]; locks: string[] }> {
  const { root } = await createSriovNode(t, { rdmaNetnsMode: opts.rdma ?? 'Y' });
  const input = makeInput(opts.runtime ?? 'runc', ifaces, { index: opts.index, addresses: [] });
  const { ctx, ops, locks } = fakeCtx(root, opts.reads);
  const strategy = strategies[input.request.runtime];
  const prepared = (await strategy.prepare!(input, ctx)) as PreparedDevice;
  input.prepared = prepared;
  return { prepared, plan: strategy.planInterface(input), ops, locks };
}

const vfRef = (i: number, parameters: Record<string, unknown> = {}) => ({ bdf: NODE.vf(i), parameters });

test('netdev mode: prepare records the VF before any change, and the plan moves it with the recorded inverses (simulated sysfs)', async (t) => {
  const { prepared, plan, ops, locks } = await planFor(t, [{ name: 'net1', mtu: 1400, mac: '02:00:00:00:00:01', device: vfRef(1, {
    addresses: ['192.0.2.10/24', '2001:db8::10/64'],
    routes: [{ dst: 'default', gw: '192.0.2.1' }, { dst: '198.51.100.0/24', gw: '192.0.2.254', mtu: 1300 }],
  }) }]);
  t.deepEqual(locks, [NODE.vf(1)]);
  // Only reads, and no PF query: the request changes nothing on the PF side.
  t.deepEqual(ops.map((o) => [o.netns ?? 'host', o.op.op, (o.op as { link?: unknown }).link]), [
    ['host', 'link.get', 'ens1f0v1'], ['host', 'addr.list', 'ens1f0v1'], [NETNS, 'link.get', 'net1'],
  ]);
  t.like(prepared, {
    pciAddress: NODE.vf(1), kind: 'vf', driver: 'mlx5_core', draName: 'pci-0000-3b-01-1',
    netdev: { name: 'ens1f0v1', mac: NODE.vfMac(1), mtu: 1500, up: false },
    vf: { pfPciAddress: NODE.pf, pfName: 'ens1f0', index: 1 },
    rdma: { device: 'mlx5_3', netnsMode: 'shared' },
  });
  t.is(prepared.vf?.pfSide, undefined);

  t.deepEqual(plan.steps.map((s) => [s.netns ?? 'host', s.do, s.undo]), [
    ['host', { op: 'device.claim', pciAddress: NODE.vf(1), netdev: 'ens1f0v1', sysfsRoot: prepared.sysfsRoot },
      { op: 'device.return', pciAddress: NODE.vf(1), name: 'ens1f0v1', mac: NODE.vfMac(1), mtu: 1500, up: false, sysfsRoot: prepared.sysfsRoot }],
    ['host', { op: 'link.set', link: 'ens1f0v1', name: 'net1', netns: NETNS }, undefined],
    [NETNS, { op: 'link.get', link: 'net1' }, { op: 'link.set', link: 'net1', name: 'ens1f0v1', mtu: 1500, mac: NODE.vfMac(1), netns: HOST_NETNS }],
    [NETNS, { op: 'link.set', link: 'net1', mac: '02:00:00:00:00:01', mtu: 1400 }, undefined],
    [NETNS, { op: 'addr.add', link: 'net1', address: '192.0.2.10/24', noDad: false }, undefined],
    [NETNS, { op: 'addr.add', link: 'net1', address: '2001:db8::10/64', noDad: true }, undefined],
    [NETNS, { op: 'link.set', link: 'net1', up: true }, undefined],
    [NETNS, { op: 'route.add', dst: 'default', family: 4, link: 'net1', gateway: '192.0.2.1' }, undefined],
    [NETNS, { op: 'route.add', dst: '198.51.100.0/24', family: 4, link: 'net1', gateway: '192.0.2.254', mtu: 1300 }, undefined],
  ]);
  t.deepEqual(plan.ips, [
    { address: '192.0.2.10/24', family: 4, interface: 0 },
    { address: '2001:db8::10/64', family: 6, interface: 0 },
  ]);
  t.deepEqual(plan.routes, [{ dst: '0.0.0.0/0', gw: '192.0.2.1' }, { dst: '198.51.100.0/24', gw: '192.0.2.254', mtu: 1300 }]);
  t.deepEqual(plan.interfaces, [{
    name: 'net1', kind: 'vf', mac: '02:00:00:00:00:01', mtu: 1400, sandbox: NETNS, pciId: NODE.vf(1),
    handoff: {
      model: 'netdev', pciAddress: NODE.vf(1), hostInterfaceName: 'ens1f0v1', draDevice: { device: 'pci-0000-3b-01-1' },
      // KEP-4817 ResourceClaim.status.devices[].networkData
      networkData: { interfaceName: 'net1', ips: ['192.0.2.10/24', '2001:db8::10/64'], hardwareAddress: '02:00:00:00:00:01' },
      // Shared RDMA mode: the device stays, the container gets the char devices.
      rdma: { device: 'mlx5_3', charDevices: ['/dev/infiniband/uverbs3', '/dev/infiniband/rdma_cm'], netnsMode: 'shared', moved: false },
    },
  }]);
});

test('PF-side settings: one vf.set whose inverse writes back exactly the recorded fields, a MAC read-back, first in the plan (simulated PF: no SR-IOV hardware)', async (t) => {
  const parameters = { mac: '02:aa:bb:cc:dd:01', vlan: 100, qos: 2, spoofchk: false, trust: true, maxTxRate: 1000, linkState: 'enable' };
  const { prepared, plan, ops } = await planFor(t, [{ name: 'net1', device: vfRef(1, parameters) }]);
  t.deepEqual(ops.find((o) => o.op.op === 'link.get' && o.op.link === 'ens1f0')?.op, { op: 'link.get', link: 'ens1f0', vfs: true });
  t.deepEqual(prepared.vf?.pfSide, PF_VFS[1]);
  const [pf, check, claim] = plan.steps;
  t.is(pf.netns, undefined);
  t.deepEqual(pf.do, {
    op: 'vf.set', link: 'ens1f0', vf: 1, vlan: 100, qos: 2, vlanProto: '802.1Q', mac: '02:aa:bb:cc:dd:01',
    minTxRate: 0, maxTxRate: 1000, spoofchk: false, trust: true, linkState: 'enable',
  });
  // The recorded VF 1: vlan 30 qos 1, its own admin MAC, rate 0/500, spoofchk on, trust off, auto.
  t.deepEqual(pf.undo, {
    op: 'vf.set', link: 'ens1f0', vf: 1, vlan: 30, qos: 1, vlanProto: '802.1Q', mac: '0c:42:a1:00:01:01',
    minTxRate: 0, maxTxRate: 500, spoofchk: true, trust: false, linkState: 'auto',
  });
  t.deepEqual(check.do, { op: 'vf.checkMac', link: 'ens1f0', vf: 1, mac: '02:aa:bb:cc:dd:01' });
  t.is(check.undo, undefined);
  t.is(claim.do.op, 'device.claim');
  // The admin MAC is also the netdev's MAC in the sandbox and the reported hardwareAddress.
  t.deepEqual(plan.steps.find((s) => s.do.op === 'link.set' && s.netns && 'mac' in s.do)?.do, { op: 'link.set', link: 'net1', mac: '02:aa:bb:cc:dd:01' });
  t.is((plan.interfaces[0].handoff as { networkData: { hardwareAddress: string } }).networkData.hardwareAddress, '02:aa:bb:cc:dd:01');
});

test('only the PF fields a request sets are restored: a VLAN alone gives a vf.set of vlan/qos/proto both ways (simulated PF)', async (t) => {
  const { plan } = await planFor(t, [{ name: 'net1', device: vfRef(0, { vlan: 7, vlanProto: '802.1ad' }) }]);
  t.deepEqual(plan.steps[0].do, { op: 'vf.set', link: 'ens1f0', vf: 0, vlan: 7, qos: 0, vlanProto: '802.1ad' });
  t.deepEqual(plan.steps[0].undo, { op: 'vf.set', link: 'ens1f0', vf: 0, vlan: 0, qos: 0, vlanProto: '802.1Q' });
  t.is(plan.steps[1].do.op, 'device.claim', 'no MAC read-back without a MAC');
});

test('Detach order is RDMA, then the netdev, then the PF side: the inverses in reverse (simulated sysfs, RDMA exclusive mode)', async (t) => {
  const { plan } = await planFor(t, [{ name: 'net1', device: vfRef(0, { spoofchk: false }) }], { rdma: 'N' });
  const inverses = [...plan.steps].reverse().filter((s) => s.undo).map((s) => [s.netns ?? 'host', s.undo!.op]);
  t.deepEqual(inverses, [
    [NETNS, 'rdma.move'],
    [NETNS, 'link.set'],
    ['host', 'device.return'],
    ['host', 'vf.set'],
  ]);
  const rdma = plan.steps.filter((s) => s.do.op.startsWith('rdma.'));
  t.deepEqual(rdma.map((s) => [s.netns ?? 'host', s.do, s.undo]), [
    ['host', { op: 'rdma.move', device: 'mlx5_2', to: NETNS }, undefined],
    [NETNS, { op: 'rdma.present', device: 'mlx5_2' }, { op: 'rdma.move', device: 'mlx5_2' }],
  ]);
  t.like(plan.interfaces[0].handoff, { rdma: { device: 'mlx5_2', netnsMode: 'exclusive', moved: true } });
});

test('references by host netdev name and by DRA claim result lead to the same VF (simulated sysfs)', async (t) => {
  const byName = await planFor(t, [{ name: 'net1', device: { netdev: 'ens1f0v0' } }]);
  const byClaim = await planFor(t, [{ name: 'net1', device: { pool: 'node-a', name: 'pci-0000-3b-01-0', parameters: { interfaceName: 'rdma0' } } }]);
  t.is(byName.prepared.pciAddress, NODE.vf(0));
  t.is(byClaim.prepared.pciAddress, NODE.vf(0));
  t.is(byClaim.plan.interfaces[0].name, 'rdma0', 'parameters.interfaceName names it in the sandbox');
  t.deepEqual((byClaim.plan.interfaces[0].handoff as { draDevice: unknown }).draDevice, { device: 'pci-0000-3b-01-0', pool: 'node-a' });
});

test('vfio mode: PF side, claim, bind with the recorded driver and group; the answer names /dev/vfio/<group> and the guest L3 (simulated sysfs)', async (t) => {
  const device = vfRef(0, { mode: 'vfio', mac: '02:aa:00:00:00:07', vlan: 12, addresses: ['192.0.2.7/24'], routes: [{ dst: 'default', gw: '192.0.2.1' }] });
  const { prepared, plan } = await planFor(t, [{ name: 'net1', device }], { runtime: 'kubevirt' });
  t.is(prepared.iommuGroup, 40);
  const root = { sysfsRoot: prepared.sysfsRoot };
  t.deepEqual(plan.steps.map((s) => [s.do.op, s.undo?.op]), [['vf.set', 'vf.set'], ['vf.checkMac', undefined], ['device.claim', 'device.return'], ['vfio.bind', 'vfio.restore']]);
  t.deepEqual(plan.steps[3].do, { op: 'vfio.bind', pciAddress: NODE.vf(0), iommuGroup: 40, originalDriver: 'mlx5_core', ...root });
  t.deepEqual(plan.steps[3].undo, { op: 'vfio.restore', pciAddress: NODE.vf(0), originalDriver: 'mlx5_core', ...root });
  t.true(plan.steps.every((s) => s.netns === undefined), 'nothing happens in the sandbox netns');
  const [ifc] = plan.interfaces;
  t.like(ifc, { name: 'net1', kind: 'vfio', mac: '02:aa:00:00:00:07', mtu: 1500, pciId: NODE.vf(0) });
  t.is(ifc.sandbox, undefined);
  t.like(ifc.handoff, {
    model: 'vfio', pciAddress: NODE.vf(0), iommuGroup: 40, vfioDevice: '/dev/vfio/40', containerDevice: '/dev/vfio/vfio', originalDriver: 'mlx5_core',
    podIpsOn: 'guest', networkData: { interfaceName: 'net1', ips: ['192.0.2.7/24'], hardwareAddress: '02:aa:00:00:00:07' },
    guest: { name: 'net1', mac: '02:aa:00:00:00:07', ips: [{ address: '192.0.2.7/24', family: 4 }], routes: [{ dst: '0.0.0.0/0', gateway: '192.0.2.1' }] },
  });
  t.is(
    (ifc.handoff as { libvirt: { hostdev: string } }).libvirt.hostdev,
    "<hostdev mode='subsystem' type='pci' managed='no'>\n  <source><address domain='0x0000' bus='0x3b' slot='0x01' function='0x0'/></source>\n  <alias name='ua-net1'/>\n</hostdev>",
  );
});

test('vfio mode for Kata: the answer carries the DAN "vfio" device entry runtime-rs reads (simulated sysfs)', async (t) => {
  const { plan } = await planFor(t, [{ name: 'eth1', device: vfRef(0, { mode: 'vfio', addresses: ['192.0.2.8/24'] }) }], { runtime: 'kata' });
  t.deepEqual((plan.interfaces[0].handoff as { dan: unknown }).dan, {
    name: 'eth1', guest_mac: NODE.vfMac(0), device: { type: 'vfio', pci_device_id: NODE.vf(0) },
    network_info: { interface: { ip_addresses: ['192.0.2.8/24'], mtu: 1500, flags: 0 }, routes: [], neighbors: [] },
  });
});

async function refusal(t: ExecutionContext, ifaces: InterfaceRequest[], opts: Parameters<typeof planFor>[2] = {}) {
  const err = await t.throwsAsync(planFor(t, ifaces, opts), { instanceOf: KnitError });
  return err!;
}

test('a device another sandbox holds is refused, naming the holder (simulated sysfs)', async (t) => {
  const err = await refusal(t, [{ name: 'net1', device: vfRef(0) }], { reads: { holders: { [NODE.vf(0)]: 'sb-other' } } });
  t.is(err.code, 'FAILED_PRECONDITION');
  t.is(err.message, `interfaces[0].device: PCI device ${NODE.vf(0)} is held by sandbox sb-other; detach that sandbox first`);
});

test('a device another attach is claiming right now is refused at once, naming it (simulated sysfs)', async (t) => {
  const err = await refusal(t, [{ name: 'net1', device: vfRef(0) }], { reads: { claiming: { [NODE.vf(0)]: 'sb-busy' } } });
  t.is(err.code, 'FAILED_PRECONDITION');
  t.is(err.message, `interfaces[0].device: PCI device ${NODE.vf(0)} is being attached to sandbox sb-busy right now`);
});

test('one device named twice in a request is refused (simulated sysfs)', async (t) => {
  const { root } = await createSriovNode(t);
  const ifaces = [{ name: 'net1', device: vfRef(0) }, { name: 'net2', device: { netdev: 'ens1f0v0' } }];
  const { ctx } = fakeCtx(root);
  await prepareDevice(makeInput('runc', ifaces, { index: 0, addresses: [] }), ctx);
  const err = await t.throwsAsync(prepareDevice(makeInput('runc', ifaces, { index: 1, addresses: [] }), ctx), { instanceOf: KnitError });
  t.is(err?.code, 'INVALID_ARGUMENT');
  t.regex(err?.message ?? '', /^interfaces\[1\]\.device: names PCI device 0000:3b:01\.0, which another interface of this request names too$/);
});

test('refusals before any change name the field (simulated sysfs)', async (t) => {
  const cases: { ifaces: InterfaceRequest[]; opts?: Parameters<typeof planFor>[2]; code: KnitError["code"]; message: RegExp }[] = [
    { ifaces: [{ name: 'net1', device: vfRef(0, { vlan: 5000 }) }], code: 'INVALID_ARGUMENT', message: /^interfaces\[0\]\.device\.parameters\.vlan: 5000 is out of range 0\.\.4094$/ },
    { ifaces: [{ name: 'net1', device: vfRef(0, { mtuu: 1 }) }], code: 'INVALID_ARGUMENT', message: /^interfaces\[0\]\.device\.parameters\.mtuu: is not a known parameter/ },
    { ifaces: [{ name: 'net1', device: { bdf: NODE.nvme } }], code: 'NOT_FOUND', message: /is not a network device/ },
    { ifaces: [{ name: 'net1', device: vfRef(0) }], opts: { reads: { sandbox: ['net1'] } }, code: 'ALREADY_EXISTS', message: /^interfaces\[0\]\.name: netns .* already has an interface named net1$/ },
    { ifaces: [{ name: 'eth0' }, { name: 'net1', device: vfRef(0, { interfaceName: 'eth0' }) }], opts: { index: 1 }, code: 'INVALID_ARGUMENT', message: /^interfaces\[1\]\.device\.parameters\.interfaceName: "eth0" is also the name of interfaces\[0\]$/ },
    { ifaces: [{ name: 'net1', device: vfRef(0, { mtu: 9100 }) }], code: 'INVALID_ARGUMENT', message: /^interfaces\[0\]\.device\.parameters\.mtu: 9100 is above the MTU of its PF ens1f0 \(9000\)$/ },
    { ifaces: [{ name: 'net1', device: { bdf: NODE.pf, parameters: { trust: true } } }], opts: { reads: { host: { ens1f0: link('ens1f0', { index: 4, mac: '0c:42:a1:00:00:00' }) } } }, code: 'FAILED_PRECONDITION', message: /need an SR-IOV VF; 0000:3b:00\.0 is a PF$/ },
    { ifaces: [{ name: 'net1', device: vfRef(0) }], opts: { reads: { addrs: { ens1f0v0: [{ index: 10, family: 4, address: '10.1.1.1', prefixLen: 24, scope: 'global', flags: [] }] } } }, code: 'FAILED_PRECONDITION', message: /ens1f0v0 \(0000:3b:01\.0\) has address 10\.1\.1\.1\/24 in the host; knit does not take devices the host uses/ },
    { ifaces: [{ name: 'net1', device: vfRef(0) }], opts: { reads: { host: { ens1f0v0: link('ens1f0v0', { index: 10, master: 3 }) } } }, code: 'FAILED_PRECONDITION', message: /is enslaved to another device/ },
    { ifaces: [{ name: 'net1', device: vfRef(2, { mode: 'vfio' }) }], code: 'FAILED_PRECONDITION', message: /IOMMU group 43 of 0000:3b:01\.2 is not viable for VFIO: 0000:3b:00\.1 \(bound to mlx5_core\)/ },
    { ifaces: [{ name: 'net1', mac: '02:00:00:00:00:09', device: vfRef(0, { mode: 'vfio' }) }], code: 'INVALID_ARGUMENT', message: /^interfaces\[0\]\.mac: a VM owns a vfio device.*device\.parameters\.mac$/ },
  ];
  for (const c of cases) {
    const err = await refusal(t, c.ifaces, c.opts);
    t.is(err.code, c.code, err.message);
    t.regex(err.message, c.message);
  }
});

test('netdev mode needs a netdev: a VF on vfio-pci is refused, pointing at vfio mode (simulated sysfs)', async (t) => {
  const { root, kernel } = await createSriovNode(t);
  await kernel.write(`bus/pci/devices/${NODE.vf(0)}/driver_override`, 'vfio-pci');
  await kernel.write('bus/pci/drivers/mlx5_core/unbind', NODE.vf(0));
  await kernel.write('bus/pci/drivers_probe', NODE.vf(0));
  const err = await t.throwsAsync(prepareDevice(makeInput('runc', [{ name: 'net1', device: vfRef(0) }], { addresses: [] }), fakeCtx(root).ctx), { instanceOf: KnitError });
  t.is(err?.code, 'FAILED_PRECONDITION');
  t.regex(err?.message ?? '', /has no netdev in the host netns \(bound to vfio-pci; .*use mode "vfio"/);
  // The same VF in vfio mode: nothing to claim, bind and restore are no-ops for vfio-pci.
  const input = makeInput('kubevirt', [{ name: 'net1', device: vfRef(0, { mode: 'vfio' }) }], { addresses: [] });
  input.prepared = await strategies[input.request.runtime].prepare!(input, fakeCtx(root).ctx);
  t.deepEqual(strategies[input.request.runtime].planInterface(input).steps.map((s) => s.do.op), ['vfio.bind']);
});

test('withDevices: interfaces with a device go to the device strategy, the others to the runtime (simulated sysfs)', async (t) => {
  const calls: string[] = [];
  const inner: Strategy = {
    runtime: 'runc',
    planInterface(input) {
      calls.push(input.iface.name);
      return { steps: [], interfaces: [], ips: [], routes: [] };
    },
  };
  const s = withDevices(inner);
  const { root } = await createSriovNode(t);
  const ifaces = [{ name: 'eth0' }, { name: 'net1', device: vfRef(0) }];
  const { ctx } = fakeCtx(root);
  const eth0 = makeInput('runc', ifaces, { index: 0 });
  t.is(await s.prepare!(eth0, ctx), undefined);
  s.planInterface(eth0);
  const net1 = makeInput('runc', ifaces, { index: 1, addresses: [] });
  net1.prepared = await s.prepare!(net1, ctx);
  t.is(s.planInterface(net1).interfaces[0].pciId, NODE.vf(0));
  t.deepEqual(calls, ['eth0']);
  // Planning a device without prepare() is a bug, said as such.
  const bare = makeInput('runc', ifaces, { index: 1, addresses: [] });
  t.throws(() => s.planInterface(bare), { message: /needs prepare\(\) to have read the device first/ });
});

test('pool addresses (a network named) and static ips join the parameters\' addresses, without a gateway route (simulated sysfs)', async (t) => {
  const { root } = await createSriovNode(t);
  const ifaces: InterfaceRequest[] = [{ name: 'net1', network: 'pods', device: vfRef(0, { addresses: ['192.0.2.5/24'] }) }];
  const input = makeInput('runc', ifaces, { addresses: [{ family: 4, address: '10.88.0.9', prefixLen: 16, gateway: '10.88.0.1' }] });
  input.prepared = await strategies[input.request.runtime].prepare!(input, fakeCtx(root).ctx);
  const plan = strategies[input.request.runtime].planInterface(input);
  t.deepEqual(plan.ips.map((i) => i.address), ['10.88.0.9/16', '192.0.2.5/24']);
  t.deepEqual(plan.routes, []);

  const noNet = makeInput('runc', [{ name: 'net1', ips: ['192.0.2.6/24'], device: vfRef(0) }], { addresses: [] });
  noNet.prepared = await strategies[noNet.request.runtime].prepare!(noNet, fakeCtx(root).ctx);
  t.deepEqual(strategies[noNet.request.runtime].planInterface(noNet).ips.map((i) => i.address), ['192.0.2.6/24']);
});
