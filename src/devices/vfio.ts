// Bind a PCI function (an SR-IOV VF) to vfio-pci for a VM, and give it back afterwards, through
// sysfs writes only (torvalds/linux Documentation/driver-api/vfio.rst and
// Documentation/ABI/testing/sysfs-bus-pci, driver_override):
//
//   bind:    driver_override <- "vfio-pci"; drivers/<orig>/unbind <- BDF; drivers_probe <- BDF
//   restore: drivers/vfio-pci/unbind <- BDF; driver_override <- "\n"; drivers/<orig>/bind <- BDF
//
// The override stays "vfio-pci" while the VM owns the device: if vfio-pci is ever unloaded or
// the device reprobed, the host driver cannot grab a function a VM was using. Restore clears it.
//
// Crash safety: the caller persists the original driver (beforeChange) before the first write;
// restoreFromVfio is idempotent and finishes from any state a crash can leave (override written
// but still bound, override written and unbound, bound to vfio-pci, already restored).
// Concurrency: the caller holds a per-device lock; two binds of one BDF must not interleave.
import { KnitError } from '../base/errors.js';
import { describePciFunction } from './inventory.js';
import { parseBdf } from './pci-address.js';
import type { Sysfs } from './sysfs.js';

export const VFIO_DRIVER = 'vfio-pci';
export const VFIO_CONTAINER_DEVICE = '/dev/vfio/vfio';

// ---- IOMMU groups ----
// IOMMU group viability: VFIO hands a VM a whole IOMMU group, so the kernel only lets a group
// be opened when no device in it is doing DMA under a host driver. Since Linux 5.19 the rule is
// "every device in the group is unbound or bound to a driver with driver_managed_dma": vfio-pci
// and its variant drivers (mlx5_vfio_pci, virtio_vfio_pci, xe-vfio-pci, ...), pci-stub, and
// pcieport (bridges do no DMA). torvalds/linux Documentation/driver-api/vfio.rst,
// drivers/pci/pci-stub.c, commit c7d469849747 "PCI: portdrv: Set driver_managed_dma".
const DMA_SAFE_DRIVERS = new Set(['vfio-pci', 'pci-stub', 'pcieport']);

/** May a device bound to this driver share an IOMMU group with a VFIO device? */
export function isDmaSafeDriver(driver: string | undefined): boolean {
  return driver === undefined || DMA_SAFE_DRIVERS.has(driver) || /vfio[-_]pci$/.test(driver);
}

export interface GroupMember {
  /** Device name in the group: a BDF for PCI devices. */
  device: string;
  driver?: string;
}

export async function iommuGroupMembers(sysfs: Sysfs, group: number): Promise<GroupMember[]> {
  const dir = `kernel/iommu_groups/${group}/devices`;
  const names = await sysfs.list(dir);
  return Promise.all(
    names.map(async (device) => {
      const driver = await sysfs.linkName(`${dir}/${device}/driver`);
      return driver ? { device, driver } : { device };
    }),
  );
}

/** Members other than `self` whose driver keeps the group from being used by VFIO. */
export async function groupBlockers(sysfs: Sysfs, group: number, self: string): Promise<GroupMember[]> {
  return (await iommuGroupMembers(sysfs, group)).filter((m) => m.device !== self && !isDmaSafeDriver(m.driver));
}

/** "vfio-noiommu" when the group is VFIO's no-IOMMU stand-in (then /dev/vfio/noiommu-N). */
export async function iommuGroupName(sysfs: Sysfs, group: number): Promise<string | undefined> {
  return (await sysfs.read(`kernel/iommu_groups/${group}/name`))?.trim();
}

// ---- binding ----

export interface VfioBinding {
  pciAddress: string;
  iommuGroup: number;
  /** The group's char device the VMM opens: /dev/vfio/<group>, or /dev/vfio/noiommu-<group>. */
  vfioDevice: string;
  /** Every VMM also needs the container device. */
  containerDevice: typeof VFIO_CONTAINER_DEVICE;
  /** Driver bound before knit touched the device; undefined = it was unbound. */
  originalDriver?: string;
  /** No IOMMU: VFIO's unsafe no-IOMMU mode (no DMA isolation). */
  noiommu: boolean;
}

export interface BindIntent {
  pciAddress: string;
  originalDriver?: string;
}

export interface VfioBindOptions {
  /**
   * Awaited once, before the first sysfs write, only when something is about to change.
   * Persist the intent here: it is what restoreFromVfio needs after a crash. If a record
   * already holds an intent for this device (a retry after a crash), keep the first one: a
   * device left unbound by the crash reports no original driver the second time.
   */
  beforeChange?: (intent: BindIntent) => Promise<void> | void;
}

const dev = (bdf: string) => `bus/pci/devices/${bdf}`;
const failed = (message: string) => new KnitError('FAILED_PRECONDITION', message, { field: 'pciAddress' });

/** Bind `bdf` to vfio-pci, refusing (before any write) when its IOMMU group is not viable. */
export async function bindToVfio(sysfs: Sysfs, pciAddress: string, opts: VfioBindOptions = {}): Promise<VfioBinding> {
  const bdf = parseBdf(pciAddress, 'pciAddress');
  const fn = await describePciFunction(sysfs, bdf);
  if (!fn) throw new KnitError('NOT_FOUND', `pciAddress: no PCI device ${bdf} on this node`, { field: 'pciAddress' });

  let noiommu = false;
  if (fn.iommuGroup === undefined) {
    // No group before binding: only VFIO's no-IOMMU mode can make one (it does so at probe).
    noiommu = (await sysfs.read('module/vfio/parameters/enable_unsafe_noiommu_mode'))?.trim() === 'Y';
    if (!noiommu) {
      throw failed(
        `${bdf} has no IOMMU group: enable the IOMMU (intel_iommu=on or amd_iommu=on) or, without isolation, vfio's enable_unsafe_noiommu_mode`,
      );
    }
  } else {
    const blockers = await groupBlockers(sysfs, fn.iommuGroup, bdf);
    if (blockers.length) {
      const list = blockers.map((b) => `${b.device} (bound to ${b.driver})`).join(', ');
      throw failed(
        `IOMMU group ${fn.iommuGroup} of ${bdf} is not viable for VFIO: ${list} ${blockers.length > 1 ? 'are' : 'is'} in the same group ` +
          `under a host driver; every device in the group must be unbound or bound to vfio-pci, pci-stub or pcieport`,
      );
    }
  }

  if (fn.driver === VFIO_DRIVER) return binding(sysfs, bdf, VFIO_DRIVER, noiommu);
  if (!(await sysfs.exists(`bus/pci/drivers/${VFIO_DRIVER}`))) {
    throw failed(`${bdf}: the vfio-pci driver is not loaded (modprobe vfio-pci)`);
  }
  if (fn.driverOverride !== undefined && fn.driverOverride !== VFIO_DRIVER) {
    throw failed(`${bdf}: driver_override is already ${JSON.stringify(fn.driverOverride)}, set by someone else; not changing it`);
  }

  const intent: BindIntent = fn.driver ? { pciAddress: bdf, originalDriver: fn.driver } : { pciAddress: bdf };
  await opts.beforeChange?.(intent);
  try {
    await sysfs.write(`${dev(bdf)}/driver_override`, VFIO_DRIVER);
    if (fn.driver) await sysfs.write(`bus/pci/drivers/${fn.driver}/unbind`, bdf);
    await sysfs.write('bus/pci/drivers_probe', bdf);
    const now = await sysfs.linkName(`${dev(bdf)}/driver`);
    if (now !== VFIO_DRIVER) {
      throw failed(`${bdf}: after drivers_probe the device is ${now ? `bound to ${now}` : 'unbound'}, not bound to vfio-pci`);
    }
  } catch (err) {
    // Put the device back now if we still can; the persisted intent covers the rest.
    try {
      await restoreFromVfio(sysfs, bdf, fn.driver);
    } catch (undoErr) {
      if (err instanceof Error) err.message += ` (restoring ${fn.driver ?? 'no driver'} also failed: ${(undoErr as Error).message})`;
    }
    throw err;
  }
  return binding(sysfs, bdf, fn.driver, noiommu);
}

async function binding(sysfs: Sysfs, bdf: string, originalDriver: string | undefined, noiommu: boolean): Promise<VfioBinding> {
  const groupText = await sysfs.linkName(`${dev(bdf)}/iommu_group`);
  if (groupText === undefined || !/^\d+$/.test(groupText)) throw failed(`${bdf}: bound to vfio-pci but has no IOMMU group`);
  const group = Number(groupText);
  const isNoiommu = noiommu || (await iommuGroupName(sysfs, group)) === 'vfio-noiommu';
  const b: VfioBinding = {
    pciAddress: bdf,
    iommuGroup: group,
    vfioDevice: isNoiommu ? `/dev/vfio/noiommu-${group}` : `/dev/vfio/${group}`,
    containerDevice: VFIO_CONTAINER_DEVICE,
    noiommu: isNoiommu,
  };
  if (originalDriver) b.originalDriver = originalDriver;
  return b;
}

export interface RestoreResult {
  pciAddress: string;
  /** Driver bound now (the original one), undefined if the device was originally unbound. */
  driver?: string;
  /** false when the device was already in its original state. */
  changed: boolean;
}

/**
 * Give `bdf` back to `originalDriver` (undefined: leave it unbound). Idempotent; completes from
 * any state bindToVfio can leave behind. Refuses to touch a device some third driver now owns.
 * The VF's netdev reappears when the driver probes; its name may differ from the original
 * (udev naming), so the caller renames it from the record.
 */
export async function restoreFromVfio(sysfs: Sysfs, pciAddress: string, originalDriver: string | undefined): Promise<RestoreResult> {
  const bdf = parseBdf(pciAddress, 'pciAddress');
  const fn = await describePciFunction(sysfs, bdf);
  if (!fn) throw new KnitError('NOT_FOUND', `pciAddress: no PCI device ${bdf} on this node (VFs disabled?)`, { field: 'pciAddress' });
  const result = (changed: boolean): RestoreResult => (originalDriver ? { pciAddress: bdf, driver: originalDriver, changed } : { pciAddress: bdf, changed });
  // It was on vfio-pci before knit: nothing of ours to undo.
  if (originalDriver === VFIO_DRIVER) return result(false);

  let changed = false;
  if (fn.driver === VFIO_DRIVER) {
    await sysfs.write(`bus/pci/drivers/${VFIO_DRIVER}/unbind`, bdf);
    changed = true;
  } else if (fn.driver !== undefined && fn.driver !== originalDriver) {
    throw failed(`${bdf} is bound to ${fn.driver}, neither vfio-pci nor its original driver ${originalDriver ?? '(none)'}; not touching it`);
  }
  if (fn.driverOverride === VFIO_DRIVER) {
    // "\n" clears the override (drivers/base/driver.c driver_set_override).
    await sysfs.write(`${dev(bdf)}/driver_override`, '\n');
    changed = true;
  }
  if (originalDriver && (await sysfs.linkName(`${dev(bdf)}/driver`)) !== originalDriver) {
    if (!(await sysfs.exists(`bus/pci/drivers/${originalDriver}`))) {
      throw failed(`${bdf}: its original driver ${originalDriver} is not loaded; load it and restore again (the device is unbound, override cleared)`);
    }
    await sysfs.write(`bus/pci/drivers/${originalDriver}/bind`, bdf);
    changed = true;
    const now = await sysfs.linkName(`${dev(bdf)}/driver`);
    if (now !== originalDriver) throw failed(`${bdf}: binding ${originalDriver} left it ${now ? `bound to ${now}` : 'unbound'}`);
  }
  return result(changed);
}
