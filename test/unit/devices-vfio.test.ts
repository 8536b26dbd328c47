// VFIO bind/restore through sysfs writes, against a fake sysfs whose simulated kernel moves
// the driver links the way the real one does. No IOMMU or SR-IOV hardware on this machine.
import test from 'ava';
import { KnitError } from '../../src/base/errors.js';
import { bindToVfio, restoreFromVfio, type BindIntent } from '../../src/devices/vfio.js';
import { createSriovNode, NODE, SimulatedCrash } from '../fixtures/fake-sysfs.js';

const vf0 = NODE.vf(0);
const vf0Dir = `devices/pci0000:3a/${NODE.bridge}/${vf0}`;

test('bind to vfio-pci and restore leaves the tree exactly as before (simulated sysfs)', async (t) => {
  const node = await createSriovNode(t, { vfs: 3 });
  const { kernel } = node;
  const before = await node.snapshot();

  const intents: { intent: BindIntent; writesSoFar: number }[] = [];
  const binding = await bindToVfio(kernel, vf0, { beforeChange: (intent) => void intents.push({ intent, writesSoFar: kernel.writes.length }) });
  t.deepEqual(binding, {
    pciAddress: vf0,
    iommuGroup: 40,
    vfioDevice: '/dev/vfio/40',
    containerDevice: '/dev/vfio/vfio',
    originalDriver: 'mlx5_core',
    noiommu: false,
  });
  t.deepEqual(intents, [{ intent: { pciAddress: vf0, originalDriver: 'mlx5_core' }, writesSoFar: 0 }], 'intent is persisted before the first write');
  t.deepEqual(kernel.writes, [
    { file: `bus/pci/devices/${vf0}/driver_override`, value: 'vfio-pci' },
    { file: 'bus/pci/drivers/mlx5_core/unbind', value: vf0 },
    { file: 'bus/pci/drivers_probe', value: vf0 },
  ]);

  // What the tree says now, read directly rather than through knit.
  const bound = await node.snapshot();
  t.is(bound[`${vf0Dir}/driver`], 'l ../../../../bus/pci/drivers/vfio-pci');
  t.is(bound[`${vf0Dir}/driver_override`], 'f vfio-pci\n');
  t.true(`bus/pci/drivers/vfio-pci/${vf0}` in bound);
  t.false(`bus/pci/drivers/mlx5_core/${vf0}` in bound);
  t.false(`${vf0Dir}/net` in bound, 'the VF netdev is gone with its driver');
  t.false('class/net/ens1f0v0' in bound);
  t.false('class/infiniband/mlx5_2' in bound);
  t.is(bound['bus/pci/drivers/mlx5_core/unbind'], 'f ', 'write-only attributes keep no content');

  kernel.writes.length = 0;
  t.deepEqual(await restoreFromVfio(kernel, vf0, binding.originalDriver), { pciAddress: vf0, driver: 'mlx5_core', changed: true });
  t.deepEqual(kernel.writes, [
    { file: 'bus/pci/drivers/vfio-pci/unbind', value: vf0 },
    { file: `bus/pci/devices/${vf0}/driver_override`, value: '\n' },
    { file: 'bus/pci/drivers/mlx5_core/bind', value: vf0 },
  ]);
  t.deepEqual(await node.snapshot(), before);

  kernel.writes.length = 0;
  t.deepEqual(await restoreFromVfio(kernel, vf0, 'mlx5_core'), { pciAddress: vf0, driver: 'mlx5_core', changed: false }, 'restore is idempotent');
  t.deepEqual(kernel.writes, []);
});

test('binding an already bound VF changes nothing and reports vfio-pci as what it found (simulated sysfs)', async (t) => {
  const { kernel } = await createSriovNode(t, { vfs: 1 });
  await bindToVfio(kernel, vf0);
  kernel.writes.length = 0;
  let called = false;
  const again = await bindToVfio(kernel, vf0, { beforeChange: () => void (called = true) });
  t.is(again.vfioDevice, '/dev/vfio/40');
  t.is(again.originalDriver, 'vfio-pci');
  t.false(called, 'nothing changes, so no intent to persist');
  t.deepEqual(kernel.writes, []);
  // Restoring "to vfio-pci" leaves a device that was on vfio-pci before knit alone.
  t.deepEqual(await restoreFromVfio(kernel, vf0, 'vfio-pci'), { pciAddress: vf0, driver: 'vfio-pci', changed: false });
  t.deepEqual(kernel.writes, []);
});

test('a group shared with a PCIe root port (pcieport) is viable (simulated sysfs)', async (t) => {
  const node = await createSriovNode(t, { vfs: 2 });
  const before = await node.snapshot();
  const b = await bindToVfio(node.kernel, NODE.vf(1));
  t.is(b.vfioDevice, '/dev/vfio/41');
  await restoreFromVfio(node.kernel, NODE.vf(1), b.originalDriver);
  t.deepEqual(await node.snapshot(), before);
});

test('a non-viable IOMMU group is refused before any write, naming the other device (simulated sysfs)', async (t) => {
  const node = await createSriovNode(t, { vfs: 3 });
  const before = await node.snapshot();
  const err = await t.throwsAsync(bindToVfio(node.kernel, NODE.vf(2)), { instanceOf: KnitError });
  t.is(err?.code, 'FAILED_PRECONDITION');
  t.is(
    err?.message,
    `IOMMU group 43 of ${NODE.vf(2)} is not viable for VFIO: ${NODE.port2} (bound to mlx5_core) is in the same group under a host driver; ` +
      'every device in the group must be unbound or bound to vfio-pci, pci-stub or pcieport',
  );
  t.deepEqual(node.kernel.writes, []);
  t.deepEqual(await node.snapshot(), before);

  // Once the other device leaves its host driver the group becomes viable.
  await node.kernel.write('bus/pci/drivers/mlx5_core/unbind', NODE.port2);
  const b = await bindToVfio(node.kernel, NODE.vf(2));
  t.is(b.vfioDevice, '/dev/vfio/43');
});

// The bind makes three writes; a crash can land before any of them, or after the last.
for (const crashAt of [0, 1, 2, 3]) {
  test(`restore after a crash before bind write ${crashAt} completes and leaves the tree as before (simulated sysfs)`, async (t) => {
    const node = await createSriovNode(t, { vfs: 1 });
    const { kernel } = node;
    const before = await node.snapshot();
    let journal: BindIntent | undefined;
    let writes = 0;
    kernel.crashBefore = () => writes++ === crashAt;
    const bind = bindToVfio(kernel, vf0, { beforeChange: (i) => void (journal = i) });
    if (crashAt < 3) {
      await t.throwsAsync(bind, { instanceOf: SimulatedCrash });
      const mid = await node.snapshot();
      if (crashAt >= 1) t.is(mid[`${vf0Dir}/driver_override`], 'f vfio-pci\n', 'crashed with the override written');
      if (crashAt === 2) t.false(`${vf0Dir}/driver` in mid, 'crashed with the VF unbound');
    } else {
      await bind;
    }
    t.deepEqual(journal, { pciAddress: vf0, originalDriver: 'mlx5_core' });

    kernel.restartDaemon();
    const r = await restoreFromVfio(kernel, vf0, journal!.originalDriver);
    t.is(r.changed, crashAt > 0);
    t.deepEqual(await node.snapshot(), before);
  });
}

test('a vfio-pci probe failure is rolled back at once (simulated sysfs)', async (t) => {
  const node = await createSriovNode(t, { vfs: 1 });
  const before = await node.snapshot();
  node.kernel.failingProbes.add('vfio-pci');
  const err = await t.throwsAsync(bindToVfio(node.kernel, vf0), { instanceOf: KnitError });
  t.is(err?.code, 'FAILED_PRECONDITION');
  t.regex(err?.message ?? '', /after drivers_probe the device is unbound, not bound to vfio-pci/);
  t.deepEqual(await node.snapshot(), before);
});

test('missing vfio-pci, missing IOMMU and a foreign driver_override are refused without writes (simulated sysfs)', async (t) => {
  const noVfio = await createSriovNode(t, { vfs: 1, vfioLoaded: false });
  const e1 = await t.throwsAsync(bindToVfio(noVfio.kernel, vf0), { instanceOf: KnitError });
  t.regex(e1?.message ?? '', /vfio-pci driver is not loaded \(modprobe vfio-pci\)/);
  t.deepEqual(noVfio.kernel.writes, []);

  const noGroup = await createSriovNode(t, { vfs: 1 });
  await noGroup.kernel.write(`bus/pci/devices/${vf0}/driver_override`, 'pci-stub');
  noGroup.kernel.writes.length = 0;
  const e2 = await t.throwsAsync(bindToVfio(noGroup.kernel, vf0), { instanceOf: KnitError });
  t.regex(e2?.message ?? '', /driver_override is already "pci-stub", set by someone else/);
  t.deepEqual(noGroup.kernel.writes, []);

  const e3 = await t.throwsAsync(bindToVfio(noGroup.kernel, '0000:3b:01.6'), { instanceOf: KnitError });
  t.is(e3?.code, 'NOT_FOUND');
  const e4 = await t.throwsAsync(bindToVfio(noGroup.kernel, 'not-a-bdf'), { instanceOf: KnitError });
  t.is(e4?.code, 'INVALID_ARGUMENT');
  t.is(e4?.details.field, 'pciAddress');
});

test('without an IOMMU: refused unless vfio no-IOMMU mode is on, then /dev/vfio/noiommu-N (simulated sysfs)', async (t) => {
  const node = await createSriovNode(t, { vfs: 1, noiommu: true });
  const before = await node.snapshot();
  const b = await bindToVfio(node.kernel, vf0);
  t.true(b.noiommu);
  t.regex(b.vfioDevice, /^\/dev\/vfio\/noiommu-\d+$/);
  t.is(b.vfioDevice, `/dev/vfio/noiommu-${b.iommuGroup}`);
  await restoreFromVfio(node.kernel, vf0, b.originalDriver);
  t.deepEqual(await node.snapshot(), before);

  // Same tree with no-IOMMU mode off: no group, no VFIO.
  await node.kernel.write('module/vfio/parameters/enable_unsafe_noiommu_mode', 'N\n');
  const err = await t.throwsAsync(bindToVfio(node.kernel, vf0), { instanceOf: KnitError });
  t.is(err?.code, 'FAILED_PRECONDITION');
  t.regex(err?.message ?? '', /has no IOMMU group: enable the IOMMU/);
});

test('restore refuses a device a third driver now owns (simulated sysfs)', async (t) => {
  const { kernel } = await createSriovNode(t, { vfs: 1 });
  await kernel.write('bus/pci/drivers/mlx5_core/unbind', vf0);
  await kernel.write(`bus/pci/devices/${vf0}/driver_override`, 'pci-stub');
  await kernel.write('bus/pci/drivers_probe', vf0);
  kernel.writes.length = 0;
  const err = await t.throwsAsync(restoreFromVfio(kernel, vf0, 'mlx5_core'), { instanceOf: KnitError });
  t.is(err?.code, 'FAILED_PRECONDITION');
  t.regex(err?.message ?? '', /is bound to pci-stub, neither vfio-pci nor its original driver mlx5_core; not touching it/);
  t.deepEqual(kernel.writes, []);
});
