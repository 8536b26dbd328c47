// Resolving a device reference (BDF, host netdev, DRA claim result) to the VF in sysfs.
import test from 'ava';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { KnitError } from '../../src/base/errors.js';
import { parseDeviceRef, resolveDevice, resolveVf } from '../../src/devices/reference.js';
import { bindToVfio } from '../../src/devices/vfio.js';
import { createSriovNode, NODE } from '../fixtures/fake-sysfs.js';

const opts = { pool: 'node-a', driver: 'knit.dev' };

test('a VF resolves the same by BDF, by netdev and by DRA claim result (simulated sysfs)', async (t) => {
  const { kernel } = await createSriovNode(t, { vfs: 3 });
  const byBdf = await resolveVf(kernel, parseDeviceRef({ bdf: NODE.vf(2) }), opts);
  const byNetdev = await resolveVf(kernel, parseDeviceRef({ netdev: 'ens1f0v2' }), opts);
  const byClaim = await resolveVf(kernel, parseDeviceRef({ pool: 'node-a', device: 'pci-0000-3b-01-2', driver: 'knit.dev' }), opts);
  t.is(byBdf.pciAddress, NODE.vf(2));
  t.deepEqual(byNetdev, byBdf);
  t.deepEqual(byClaim, byBdf);
  t.deepEqual(byBdf.vf, { pfPciAddress: NODE.pf, pfName: 'ens1f0', index: 2 });
  t.is(byBdf.netdevs[0]?.name, 'ens1f0v2');
});

async function notFound(t: import('ava').ExecutionContext, p: Promise<unknown>, field: string, message: RegExp) {
  const err = await t.throwsAsync(p, { instanceOf: KnitError });
  t.is(err?.code, 'NOT_FOUND', err?.message);
  t.is(err?.details.field, field);
  t.regex(err?.message ?? '', message);
}

test('unknown references are NOT_FOUND and say what was looked for (simulated sysfs)', async (t) => {
  const { kernel, root } = await createSriovNode(t, { vfs: 2 });
  // A virtual interface, as the kernel shows one: devices/virtual/net/<if>, no device link.
  await fs.mkdir(path.join(root, 'devices/virtual/net/kt-veth0'), { recursive: true });
  await fs.symlink('../../devices/virtual/net/kt-veth0', path.join(root, 'class/net/kt-veth0'));
  await notFound(t, resolveDevice(kernel, parseDeviceRef({ netdev: 'kt-veth0' }), opts), 'device.netdev', /"kt-veth0" is not backed by a PCI function/);
  await notFound(t, resolveDevice(kernel, parseDeviceRef({ bdf: '0000:3b:01.7' }), opts), 'device.bdf', /PCI device 0000:3b:01.7 does not exist on this node/);
  await notFound(t, resolveDevice(kernel, parseDeviceRef({ netdev: 'ens9f9' }), opts), 'device.netdev', /no interface "ens9f9" in the host network namespace/);
  await notFound(t, resolveDevice(kernel, parseDeviceRef({ pool: 'node-b', device: 'pci-0000-3b-01-0' }), opts), 'device.pool', /"node-b" is not this node's pool "node-a"/);
  await notFound(t, resolveDevice(kernel, parseDeviceRef({ pool: 'node-a', device: 'gpu-0' }), opts), 'device.device', /"gpu-0" is not a device name this node publishes/);
  await notFound(t, resolveDevice(kernel, parseDeviceRef({ pool: 'node-a', device: 'pci-0000-3b-01-5' }), opts), 'device.device', /DRA device "pci-0000-3b-01-5" \(PCI 0000:3b:01.5\) in pool "node-a" does not exist/);
  await notFound(t, resolveDevice(kernel, parseDeviceRef({ pool: 'node-a', device: 'pci-0000-3b-01-0', driver: 'dra.net' }), opts), 'device.driver', /"dra.net" is not this driver/);
  await notFound(t, resolveDevice(kernel, parseDeviceRef({ bdf: NODE.nvme }), opts), 'device.bdf', /is not a network device \(PCI class 010802\)/);
});

test('a PF or plain NIC resolves as a device but is refused as a VF (simulated sysfs)', async (t) => {
  const { kernel } = await createSriovNode(t, { vfs: 1 });
  t.is((await resolveDevice(kernel, parseDeviceRef({ netdev: 'ens1f1' }), opts)).kind, 'nic');
  for (const [netdev, what] of [['ens1f0', /is an SR-IOV physical function, not a VF/], ['ens1f1', /is a NIC without SR-IOV, not a VF/]] as const) {
    const err = await t.throwsAsync(resolveVf(kernel, parseDeviceRef({ netdev }), opts), { instanceOf: KnitError });
    t.is(err?.code, 'FAILED_PRECONDITION');
    t.regex(err?.message ?? '', what);
  }
});

test('a VF bound to vfio-pci is found by BDF and claim, no longer by its old netdev name (simulated sysfs)', async (t) => {
  const { kernel } = await createSriovNode(t, { vfs: 2 });
  await bindToVfio(kernel, NODE.vf(0));
  t.is((await resolveVf(kernel, parseDeviceRef({ bdf: NODE.vf(0) }), opts)).driver, 'vfio-pci');
  t.is((await resolveVf(kernel, parseDeviceRef({ pool: 'node-a', device: 'pci-0000-3b-01-0' }), opts)).driver, 'vfio-pci');
  await notFound(t, resolveVf(kernel, parseDeviceRef({ netdev: 'ens1f0v0' }), opts), 'device.netdev', /no interface "ens1f0v0"/);
});
