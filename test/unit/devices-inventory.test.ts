// Inventory discovery and DRA attributes against a fake sysfs tree (no SR-IOV hardware here).
import test from 'ava';
import { rm, writeFile } from 'node:fs/promises';
import { deviceAttributes } from '../../src/devices/attributes.js';
import { describeDevice, scanInventory } from '../../src/devices/inventory.js';
import { bdfFromDraDeviceName, draDeviceName, normalizeBdf } from '../../src/devices/pci-address.js';
import { bindToVfio } from '../../src/devices/vfio.js';
import { createSriovNode, NODE } from '../fixtures/fake-sysfs.js';

test('inventory finds the PF, its VFs and the plain RDMA NIC, and skips non-network functions (simulated sysfs)', async (t) => {
  const { kernel } = await createSriovNode(t, { vfs: 3 });
  const inv = await scanInventory(kernel);
  t.deepEqual(
    inv.devices.map((d) => [d.pciAddress, d.kind]),
    [[NODE.pf, 'pf'], [NODE.port2, 'nic'], [NODE.vf(0), 'vf'], [NODE.vf(1), 'vf'], [NODE.vf(2), 'vf']],
  );
  t.is(inv.rdmaNetnsMode, 'shared');

  const pf = inv.devices.find((d) => d.pciAddress === NODE.pf)!;
  t.deepEqual(pf.sriov, { totalVfs: 8, numVfs: 3, vfs: [NODE.vf(0), NODE.vf(1), NODE.vf(2)] });
  t.is(pf.vf, undefined);
  t.deepEqual(pf.netdevs, [{ name: 'ens1f0', mac: '0c:42:a1:00:00:00', mtu: 9000, operstate: 'up', ifindex: 4 }]);

  const vf1 = inv.devices.find((d) => d.pciAddress === NODE.vf(1))!;
  t.deepEqual(vf1, {
    pciAddress: NODE.vf(1),
    name: 'pci-0000-3b-01-1',
    kind: 'vf',
    classCode: '020000',
    vendorId: '15b3',
    deviceId: '1018',
    subsystemVendorId: '15b3',
    subsystemDeviceId: '0080',
    driver: 'mlx5_core',
    numaNode: 1,
    iommuGroup: 41,
    pcieRoot: 'pci0000:3a',
    netdevs: [{ name: 'ens1f0v1', mac: '0c:42:a1:00:01:01', mtu: 1500, operstate: 'up', ifindex: 11 }],
    rdma: { device: 'mlx5_3', charDevices: ['/dev/infiniband/uverbs3', '/dev/infiniband/rdma_cm'] },
    vf: { pfPciAddress: NODE.pf, pfName: 'ens1f0', index: 1 },
  });

  const port2 = inv.devices.find((d) => d.pciAddress === NODE.port2)!;
  t.is(port2.sriov, undefined);
  t.is(port2.rdma?.device, 'mlx5_1');
});

test('DRA attributes use dranet names, plus VF and VFIO facts (simulated sysfs)', async (t) => {
  const { kernel } = await createSriovNode(t, { vfs: 2 });
  const inv = await scanInventory(kernel);
  const attrs = (bdf: string) => deviceAttributes(inv.devices.find((d) => d.pciAddress === bdf)!);

  t.deepEqual(attrs(NODE.vf(0)), {
    'dra.net/pciAddress': NODE.vf(0),
    'dra.net/pciVendor': '15b3',
    'dra.net/pciDevice': '1018',
    'dra.net/pciSubsystem': '0080',
    'dra.net/numaNode': 1,
    'dra.net/ifName': 'ens1f0v0',
    'dra.net/mac': '0c:42:a1:00:01:00',
    'dra.net/mtu': 1500,
    'dra.net/state': 'up',
    'dra.net/sriov': false,
    'dra.net/isSriovVf': true,
    'dra.net/vfIndex': 0,
    'dra.net/pfPciAddress': NODE.pf,
    'dra.net/pfName': 'ens1f0',
    'dra.net/virtual': false,
    'dra.net/rdma': true,
    'dra.net/rdmaDevice': 'mlx5_2',
    'dra.net/iommuGroup': 40,
    'dra.net/driver': 'mlx5_core',
    'resource.kubernetes.io/pciBusID': NODE.vf(0),
    'resource.kubernetes.io/pcieRoot': 'pci0000:3a',
  });

  const pf = attrs(NODE.pf);
  t.is(pf['dra.net/sriov'], true);
  t.is(pf['dra.net/sriovVfs'], 2);
  t.false('dra.net/isSriovVf' in pf, 'isSriovVf is only published when true, as dranet does');
  t.false('dra.net/vfIndex' in pf);

  const port2 = deviceAttributes(inv.devices.find((d) => d.pciAddress === NODE.port2)!, { prefix: 'knit.dev' });
  t.is(port2['knit.dev/sriov'], false);
  t.false('knit.dev/sriovVfs' in port2);
  t.is(port2['knit.dev/rdma'], true);
  t.is(port2['knit.dev/ifName'], 'ens1f1');
});

test('RDMA netns mode comes from ib_core netns_mode, or from the configured source (simulated sysfs)', async (t) => {
  const exclusive = await createSriovNode(t, { rdmaNetnsMode: 'N', vfs: 1 });
  t.is((await scanInventory(exclusive.kernel)).rdmaNetnsMode, 'exclusive');

  const noIbCore = await createSriovNode(t, { rdmaNetnsMode: null, vfs: 1 });
  t.false('rdmaNetnsMode' in (await scanInventory(noIbCore.kernel)), 'no ib_core: mode unknown');

  const fromNetlink = await scanInventory(exclusive.kernel, { rdmaNetnsMode: async () => 'shared' });
  t.is(fromNetlink.rdmaNetnsMode, 'shared');
});

test('a VF bound to vfio-pci has no netdev and no RDMA device, and says so in its attributes (simulated sysfs)', async (t) => {
  const { kernel } = await createSriovNode(t, { vfs: 2 });
  await bindToVfio(kernel, NODE.vf(0));
  const vf0 = (await describeDevice(kernel, NODE.vf(0)))!;
  t.is(vf0.driver, 'vfio-pci');
  t.is(vf0.driverOverride, 'vfio-pci');
  t.deepEqual(vf0.netdevs, []);
  t.is(vf0.rdma, undefined);
  t.deepEqual(vf0.vf, { pfPciAddress: NODE.pf, pfName: 'ens1f0', index: 0 });
  const a = deviceAttributes(vf0);
  t.is(a['dra.net/driver'], 'vfio-pci');
  t.false('dra.net/ifName' in a);
  t.is(a['dra.net/rdma'], false);
  // The other VF is untouched.
  t.is((await describeDevice(kernel, NODE.vf(1)))!.netdevs[0]?.name, 'ens1f0v1');
});

test('describeDevice answers for one BDF without a scan, undefined when absent (simulated sysfs)', async (t) => {
  const { kernel } = await createSriovNode(t, { vfs: 1 });
  t.is((await describeDevice(kernel, NODE.vf(0)))?.vf?.index, 0);
  t.is(await describeDevice(kernel, '0000:99:00.0'), undefined);
  t.is((await describeDevice(kernel, NODE.nvme))?.classCode, '010802');
  t.is((await describeDevice(kernel, NODE.nvme))?.numaNode, 0);
  t.is((await describeDevice(kernel, NODE.bridge))?.numaNode, undefined, 'numa_node -1 means no affinity');
});

test('a VF\'s index comes from the PF\'s sriov_offset and sriov_stride, confirmed by one virtfn link; without them, or when they disagree with the links, from every virtfnN link (simulated sysfs)', async (t) => {
  const node = await createSriovNode(t, { vfs: 3 });
  const pfDir = `bus/pci/devices/${NODE.pf}`;
  t.is(await node.kernel.read(`${pfDir}/sriov_offset`), '8', 'VF 0 at 3b:01.0 is the PF 3b:00.0 plus 8');
  t.is(await node.kernel.read(`${pfDir}/sriov_stride`), '1');
  const links: string[] = [];
  const readlink = node.kernel.readlink.bind(node.kernel);
  node.kernel.readlink = (rel) => (links.push(rel), readlink(rel));
  t.deepEqual((await describeDevice(node.kernel, NODE.vf(2)))?.vf, { pfPciAddress: NODE.pf, pfName: 'ens1f0', index: 2 });
  t.deepEqual(links.filter((l) => l.includes('virtfn')), [`${pfDir}/virtfn2`], 'one virtfn link read');

  for (const [what, offset] of [['wrong', '9'], ['missing', undefined]] as const) {
    if (offset) await writeFile(node.kernel.path(`${pfDir}/sriov_offset`), `${offset}\n`);
    else await rm(node.kernel.path(`${pfDir}/sriov_offset`));
    links.length = 0;
    t.is((await describeDevice(node.kernel, NODE.vf(2)))?.vf?.index, 2, `sriov_offset ${what}: found by the links`);
    const read = [...new Set(links.filter((l) => /virtfn\d+$/.test(l)))].sort();
    t.deepEqual(read, [0, 1, 2].map((i) => `${pfDir}/virtfn${i}`), `sriov_offset ${what}: every virtfn link read`);
  }
});

test('describeDevice without the inventory\'s facts reads no IDs, NUMA node, PCIe root or driver_override, and answers the rest alike (simulated sysfs)', async (t) => {
  const { kernel } = await createSriovNode(t, { vfs: 2 });
  const full = (await describeDevice(kernel, NODE.vf(1)))!;
  const lean = (await describeDevice(kernel, NODE.vf(1), { inventory: false }))!;
  const { vendorId, deviceId, subsystemVendorId, subsystemDeviceId, numaNode, pcieRoot, driverOverride, ...rest } = full;
  t.truthy(vendorId && deviceId && subsystemDeviceId && numaNode !== undefined && pcieRoot, 'the full read has them');
  t.deepEqual(lean, rest);
  t.is(await describeDevice(kernel, '0000:99:00.0', { inventory: false }), undefined);
});

test('DRA device names round-trip to BDFs and are DNS labels', (t) => {
  for (const bdf of ['0000:3b:01.1', '0000:00:1f.7', 'ffff:ff:1f.0']) {
    const name = draDeviceName(bdf);
    t.regex(name, /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
    t.true(name.length <= 63);
    t.is(bdfFromDraDeviceName(name), bdf);
  }
  t.is(bdfFromDraDeviceName('eth0'), undefined);
  t.is(bdfFromDraDeviceName('pci-0000-3b-01-8'), undefined);
  t.is(normalizeBdf('3B:01.1'), '0000:3b:01.1');
  t.is(normalizeBdf('0000:3b:01.8'), undefined);
  t.is(normalizeBdf('../../etc'), undefined);
});
