// IOMMU group viability: VFIO hands a VM a whole IOMMU group, so the kernel only lets a group
// be opened when no device in it is doing DMA under a host driver. Since Linux 5.19 the rule is
// "every device in the group is unbound or bound to a driver with driver_managed_dma": vfio-pci
// and its variant drivers (mlx5_vfio_pci, virtio_vfio_pci, xe-vfio-pci, ...), pci-stub, and
// pcieport (bridges do no DMA). torvalds/linux Documentation/driver-api/vfio.rst,
// drivers/pci/pci-stub.c, commit c7d469849747 "PCI: portdrv: Set driver_managed_dma".
import type { Sysfs } from './sysfs.js';

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
