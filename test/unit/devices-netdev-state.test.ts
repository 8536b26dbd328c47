// Capturing a VF's original state and the ops that restore it. The PF's VF list is the shape
// `link.get {vfs:true}` returns (src/base/ops.ts LinkInfo), written out here because this
// machine has no SR-IOV PF to ask.
import test from 'ava';
import { KnitError } from '../../src/base/errors.js';
import type { LinkInfo } from '../../src/base/ops.js';
import { captureVfState, netdevRestoreOps, pfApplyOp, pfQueryOp, pfRestoreOp } from '../../src/devices/netdev-state.js';
import { parseDeviceParameters } from '../../src/devices/params.js';
import { parseDeviceRef, resolveVf } from '../../src/devices/reference.js';
import { createSriovNode, NODE } from '../fixtures/fake-sysfs.js';

const pfLink: LinkInfo = {
  index: 4, name: 'ens1f0', mtu: 9000, mac: '0c:42:a1:00:00:00', up: true, lowerUp: true, operstate: 'up', group: 0,
  vfs: [
    { vf: 0, mac: '00:00:00:00:00:00', vlan: 0, qos: 0, vlanProto: '802.1Q', spoofchk: true, trust: false, minTxRate: 0, maxTxRate: 0, linkState: 'auto' },
    { vf: 1, mac: '0c:42:a1:00:01:01', vlan: 30, qos: 1, vlanProto: '802.1Q', spoofchk: true, trust: false, minTxRate: 0, maxTxRate: 500, linkState: 'auto' },
  ],
};
const vfLink: LinkInfo = { index: 11, name: 'ens1f0v1', mtu: 1500, mac: '0c:42:a1:00:01:01', up: true, lowerUp: true, operstate: 'up', group: 0 };

test('captureVfState combines sysfs, the PF VF list and the VF netdev (simulated sysfs)', async (t) => {
  const { kernel } = await createSriovNode(t, { vfs: 2 });
  const vf = await resolveVf(kernel, parseDeviceRef({ bdf: NODE.vf(1) }));
  t.deepEqual(pfQueryOp(vf), { op: 'link.get', link: 'ens1f0', vfs: true });
  t.deepEqual(captureVfState(vf, pfLink, vfLink, 'exclusive'), {
    pciAddress: NODE.vf(1),
    pfPciAddress: NODE.pf,
    pfName: 'ens1f0',
    vfIndex: 1,
    pfSide: pfLink.vfs![1]!,
    netdev: { name: 'ens1f0v1', mtu: 1500, mac: '0c:42:a1:00:01:01' },
    driver: 'mlx5_core',
    rdma: { device: 'mlx5_3', netnsMode: 'exclusive' },
  });
  // Without the VF's link.get answer the sysfs view of the netdev is used.
  t.deepEqual(captureVfState(vf, pfLink).netdev, { name: 'ens1f0v1', mac: '0c:42:a1:00:01:01', mtu: 1500 });

  const err = t.throws(() => captureVfState(vf, { ...pfLink, vfs: [pfLink.vfs![0]!] }), { instanceOf: KnitError });
  t.is(err?.code, 'NOT_FOUND');
  t.regex(err?.message ?? '', /PF ens1f0 has no VF 1 in IFLA_VFINFO_LIST \(it reports VFs 0\)/);
});

test('PF-side apply and restore touch exactly the fields the parameters set (simulated sysfs)', async (t) => {
  const { kernel } = await createSriovNode(t, { vfs: 2 });
  const state = captureVfState(await resolveVf(kernel, parseDeviceRef({ bdf: NODE.vf(1) })), pfLink, vfLink);

  t.is(pfApplyOp(state, parseDeviceParameters({ interfaceName: 'net1', mtu: 9000 })), undefined, 'nothing PF-side asked');
  t.is(pfRestoreOp(state, parseDeviceParameters({ interfaceName: 'net1' })), undefined);

  const p = parseDeviceParameters({ mac: '02:00:00:00:00:07', vlan: 100, trust: true, maxTxRate: 1000 });
  t.deepEqual(pfApplyOp(state, p), {
    op: 'vf.set', link: 'ens1f0', vf: 1, mac: '02:00:00:00:00:07', vlan: 100, qos: 0, vlanProto: '802.1Q', trust: true, minTxRate: 0, maxTxRate: 1000,
  });
  t.deepEqual(pfRestoreOp(state, p), {
    op: 'vf.set', link: 'ens1f0', vf: 1, mac: '0c:42:a1:00:01:01', vlan: 30, qos: 1, vlanProto: '802.1Q', trust: false, minTxRate: 0, maxTxRate: 500,
  });

  const rateOnly = parseDeviceParameters({ minTxRate: 100 });
  t.deepEqual(pfApplyOp(state, rateOnly), { op: 'vf.set', link: 'ens1f0', vf: 1, minTxRate: 100, maxTxRate: 500 }, 'keeps the max rate it was not asked to change');
  t.deepEqual(pfRestoreOp(state, parseDeviceParameters({ spoofchk: false, linkState: 'disable' })), {
    op: 'vf.set', link: 'ens1f0', vf: 1, spoofchk: true, linkState: 'auto',
  });
});

test('netdev restore: down, then rename + MAC + MTU (and move, when given the host netns) (simulated sysfs)', async (t) => {
  const { kernel } = await createSriovNode(t, { vfs: 2 });
  const state = captureVfState(await resolveVf(kernel, parseDeviceRef({ bdf: NODE.vf(1) })), pfLink, vfLink);
  t.deepEqual(netdevRestoreOps(state, 'net1', '/proc/1/ns/net'), [
    { op: 'link.set', link: 'net1', up: false },
    { op: 'link.set', link: 'net1', name: 'ens1f0v1', mac: '0c:42:a1:00:01:01', mtu: 1500, netns: '/proc/1/ns/net' },
  ]);
  t.deepEqual(netdevRestoreOps(state, 'dev11'), [
    { op: 'link.set', link: 'dev11', up: false },
    { op: 'link.set', link: 'dev11', name: 'ens1f0v1', mac: '0c:42:a1:00:01:01', mtu: 1500 },
  ]);
  t.deepEqual(netdevRestoreOps({ ...state, netdev: undefined } as typeof state, 'x'), [], 'a VF without a netdev has none to restore');
});
