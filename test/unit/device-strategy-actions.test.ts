// The device actions a device plan runs (src/devices/actions.ts), against a simulated sysfs
// that reacts to driver writes like the kernel (test/fixtures/fake-sysfs.ts) and a recorded
// netlink: this machine has no SR-IOV NIC, no IOMMU and no RDMA device.
import test from 'ava';
import { promises as fs } from 'node:fs';
import { KnitError } from '../../src/base/errors.js';
import { runDeviceAction, type DeviceActionEnv } from '../../src/devices/actions.js';
import { rdmaMoveCommand, rdmaNetnsArg } from '../../src/devices/rdma.js';
import type { Sysfs } from '../../src/devices/sysfs.js';
import type { LinkInfo, Op, OpResult } from '../../src/base/ops.js';
import { createSriovNode, NODE, type FakeSysfs } from '../fixtures/fake-sysfs.js';

// VF0's netdev is ifindex 10 in the simulated sysfs.
const link = (name: string, over: Partial<LinkInfo> = {}): LinkInfo => ({
  index: 10, name, mtu: 1500, up: true, lowerUp: true, operstate: 'up', group: 0, ...over,
});

/** Netlink as a table of host links; link.set ops are recorded and applied to the table. */
function recordedNetlink(sysfs: Sysfs, links: LinkInfo[]) {
  const table = new Map(links.map((l) => [l.name, { ...l }]));
  const sent: Op[] = [];
  const env: DeviceActionEnv = {
    sysfs: () => sysfs,
    async runOps(netns, ops) {
      if (netns !== undefined) throw new Error('host only');
      return ops.map((op): OpResult => {
        const l = table.get(String((op as { link: unknown }).link));
        if (!l) throw Object.assign(new Error(`ENODEV: ${(op as { link: unknown }).link}`), { code: 'ENODEV' });
        if (op.op === 'link.get') return { link: { ...l } };
        if (op.op !== 'link.set') throw new Error(`unexpected ${op.op}`);
        sent.push(op);
        if (op.up !== undefined) l.up = op.up;
        if (op.mac !== undefined) l.mac = op.mac;
        if (op.mtu !== undefined) l.mtu = op.mtu;
        if (op.name !== undefined) {
          table.delete(l.name);
          l.name = op.name;
          table.set(op.name, l);
        }
        return {};
      });
    },
  };
  return { env, sent, table };
}

/** What sysfs shows when a netdev is renamed (and maybe got a new ifindex): net/<old> becomes
 * net/<new>. */
async function renameInSysfs(node: FakeSysfs, bdf: string, from: string, to: string, ifindex?: number) {
  const dir = node.kernel.path(`bus/pci/devices/${bdf}/net`);
  await fs.rename(`${dir}/${from}`, `${dir}/${to}`);
  await fs.rename(node.kernel.path(`class/net/${from}`), node.kernel.path(`class/net/${to}`));
  if (ifindex !== undefined) await fs.writeFile(`${dir}/${to}/ifindex`, `${ifindex}\n`);
}

const ret = { op: 'device.return' as const, pciAddress: NODE.vf(0), name: 'ens1f0v0', mac: NODE.vfMac(0), mtu: 1500, up: true };

test('device.return finds a VF the kernel returned as dev<ifindex> by its PCI address and restores name, MAC, MTU and up (simulated sysfs)', async (t) => {
  const node = await createSriovNode(t);
  await renameInSysfs(node, NODE.vf(0), 'ens1f0v0', 'dev17', 17);
  const { env, sent, table } = recordedNetlink(node.kernel, [link('dev17', { index: 17, mac: '02:00:00:00:00:99', mtu: 1400, up: false })]);
  await runDeviceAction(undefined, ret, env);
  t.deepEqual(sent, [
    { op: 'link.set', link: 'dev17', up: false },
    { op: 'link.set', link: 'dev17', name: 'ens1f0v0', mac: NODE.vfMac(0), mtu: 1500 },
    { op: 'link.set', link: 'ens1f0v0', up: true },
  ]);
  t.like(table.get('ens1f0v0'), { mac: NODE.vfMac(0), mtu: 1500, up: true });
});

test('device.return on a netdev already as recorded sends nothing; one that differs only in MTU gets just that (simulated sysfs)', async (t) => {
  const node = await createSriovNode(t);
  const same = recordedNetlink(node.kernel, [link('ens1f0v0', { mac: NODE.vfMac(0) })]);
  await runDeviceAction(undefined, ret, same.env);
  t.deepEqual(same.sent, []);
  const mtu = recordedNetlink(node.kernel, [link('ens1f0v0', { mac: NODE.vfMac(0), mtu: 9000, up: false })]);
  await runDeviceAction(undefined, { ...ret, up: false }, mtu.env);
  t.deepEqual(mtu.sent, [{ op: 'link.set', link: 'ens1f0v0', up: false }, { op: 'link.set', link: 'ens1f0v0', mtu: 1500 }]);
});

test('device.return refuses to rename over another interface, and says when the VF is not in the host (simulated sysfs)', async (t) => {
  const node = await createSriovNode(t);
  await renameInSysfs(node, NODE.vf(0), 'ens1f0v0', 'dev17');
  const taken = recordedNetlink(node.kernel, [link('dev17'), link('ens1f0v0', { index: 99 })]);
  const err = await t.throwsAsync(runDeviceAction(undefined, ret, taken.env), { instanceOf: KnitError });
  t.is(err?.code, 'FAILED_PRECONDITION');
  t.is(err?.message, `cannot rename dev17 (${NODE.vf(0)}) back to ens1f0v0: another interface named ens1f0v0 exists in the host netns`);
  t.deepEqual(taken.sent, []);

  // In a sandbox netns sysfs (mounted for the host netns) lists no netdev for it.
  await fs.rm(node.kernel.path(`bus/pci/devices/${NODE.vf(0)}/net`), { recursive: true });
  const away = await t.throwsAsync(runDeviceAction(undefined, ret, recordedNetlink(node.kernel, []).env), { instanceOf: KnitError });
  t.regex(away?.message ?? '', /has no netdev in the host netns: it is still in a sandbox's netns or its driver has none; ens1f0v0 cannot be given back yet/);
  const gone = await t.throwsAsync(runDeviceAction(undefined, { ...ret, pciAddress: '0000:3b:01.7' }, recordedNetlink(node.kernel, []).env), { instanceOf: KnitError });
  t.is(gone?.code, 'NOT_FOUND');
});

test('device.claim passes while the PCI device still has the planned netdev, and refuses otherwise (simulated sysfs)', async (t) => {
  const node = await createSriovNode(t);
  const { env } = recordedNetlink(node.kernel, []);
  await runDeviceAction(undefined, { op: 'device.claim', pciAddress: NODE.vf(0), netdev: 'ens1f0v0' }, recordedNetlink(node.kernel, [link('ens1f0v0')]).env);
  // Another interface took the name (a different ifindex): not ours.
  const impostor = await t.throwsAsync(
    runDeviceAction(undefined, { op: 'device.claim', pciAddress: NODE.vf(0), netdev: 'ens1f0v0' }, recordedNetlink(node.kernel, [link('ens1f0v0', { index: 77 })]).env),
    { instanceOf: KnitError },
  );
  t.is(impostor?.message, `ens1f0v0 in the host netns is ifindex 77, but the netdev ens1f0v0 of ${NODE.vf(0)} is ifindex 10: another device took its name`);
  await renameInSysfs(node, NODE.vf(0), 'ens1f0v0', 'other0');
  const err = await t.throwsAsync(runDeviceAction(undefined, { op: 'device.claim', pciAddress: NODE.vf(0), netdev: 'ens1f0v0' }, env), { instanceOf: KnitError });
  t.is(err?.message, `${NODE.vf(0)}: its netdev in the host netns is other0, not ens1f0v0 as when the plan was made`);
});

test('vfio.bind then vfio.restore leaves sysfs exactly as before; the netdev comes back for device.return (simulated sysfs)', async (t) => {
  const node = await createSriovNode(t);
  const before = await node.snapshot();
  const { env } = recordedNetlink(node.kernel, [link('ens1f0v0', { mac: NODE.vfMac(0) })]);
  await runDeviceAction(undefined, { op: 'vfio.bind', pciAddress: NODE.vf(0), originalDriver: 'mlx5_core', iommuGroup: 40 }, env);
  t.is(await node.kernel.linkName(`bus/pci/devices/${NODE.vf(0)}/driver`), 'vfio-pci');
  t.deepEqual(await node.kernel.list(`bus/pci/devices/${NODE.vf(0)}/net`), [], 'the netdev left with mlx5_core');
  await runDeviceAction(undefined, { op: 'vfio.restore', pciAddress: NODE.vf(0), originalDriver: 'mlx5_core' }, env);
  await runDeviceAction(undefined, ret, env);
  t.deepEqual(await node.snapshot(), before);
  // A second restore (recovery re-running the inverse) changes nothing.
  const writes = node.kernel.writes.length;
  await runDeviceAction(undefined, { op: 'vfio.restore', pciAddress: NODE.vf(0), originalDriver: 'mlx5_core' }, env);
  t.is(node.kernel.writes.length, writes);
});

test('vfio.bind refuses, before any write, a device whose driver or group changed since the plan (simulated sysfs)', async (t) => {
  const node = await createSriovNode(t);
  const { env } = recordedNetlink(node.kernel, []);
  const err = await t.throwsAsync(runDeviceAction(undefined, { op: 'vfio.bind', pciAddress: NODE.vf(0), originalDriver: 'ixgbevf', iommuGroup: 40 }, env), { instanceOf: KnitError });
  t.regex(err?.message ?? '', /is bound to mlx5_core, not ixgbevf as when the plan was made; not rebinding it/);
  t.deepEqual(node.kernel.writes, []);
  const group = await t.throwsAsync(runDeviceAction(undefined, { op: 'vfio.bind', pciAddress: NODE.vf(0), originalDriver: 'mlx5_core', iommuGroup: 7 }, env), { instanceOf: KnitError });
  t.regex(group?.message ?? '', /is in IOMMU group 40, not 7 as the Attach answer says/);
});

test('vf.checkMac reads the PF back until the VF shows the MAC (simulated PF: the driver applies it on the 3rd read)', async (t) => {
  let reads = 0;
  const env: DeviceActionEnv = {
    sysfs: () => { throw new Error('no sysfs'); },
    async runOps(_ns, ops) {
      t.deepEqual(ops, [{ op: 'link.get', link: 'ens1f0', vfs: true }]);
      reads++;
      const mac = reads >= 3 ? '02:AA:BB:CC:DD:01' : '00:00:00:00:00:00';
      return [{ link: link('ens1f0', { vfs: [{ vf: 1, mac, vlan: 0, qos: 0 }] }) }];
    },
  };
  await runDeviceAction(undefined, { op: 'vf.checkMac', link: 'ens1f0', vf: 1, mac: '02:aa:bb:cc:dd:01' }, env);
  t.is(reads, 3);
});

test('rdma.move runs rdma(8) inside the netns that holds the device, naming the target netns file through /var/run/netns/..', (t) => {
  t.is(rdmaNetnsArg('/run/netns/pod1'), '../../../../../run/netns/pod1');
  t.deepEqual(rdmaMoveCommand(undefined, 'mlx5_2', '/run/netns/pod1'), ['/usr/bin/rdma', ['dev', 'set', 'mlx5_2', 'netns', '../../../../../run/netns/pod1']]);
  t.deepEqual(rdmaMoveCommand('/run/netns/pod1', 'mlx5_2', '/proc/42/ns/net'), [
    '/usr/bin/nsenter', ['--net=/run/netns/pod1', '/usr/bin/rdma', 'dev', 'set', 'mlx5_2', 'netns', '../../../../../proc/42/ns/net'],
  ]);
  t.throws(() => rdmaNetnsArg('pod1'), { message: /absolute path/ });
});
