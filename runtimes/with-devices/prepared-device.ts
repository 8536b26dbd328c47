// What prepare() reads before a device plan is made, and the plan is made from: the device's
// original state, captured before anything changes (as sriov-cni keeps its OrigVfState).
// It is plain JSON: its values end up in the journaled steps' inverses, so recovery restores
// exactly what was there without asking the kernel what "original" was.
import type { DeviceRef } from '../../src/devices/reference.js';
import type { RdmaNetnsMode } from '../../src/devices/inventory.js';
import type { VfInfo } from '../../src/base/ops.js';

export interface PreparedDevice {
  /** interfaces[i] of the request, for error fields. */
  index: number;
  ref: DeviceRef;
  pciAddress: string;
  /** DRA device name (pci-DDDD-BB-DD-F). */
  draName: string;
  kind: 'pf' | 'vf' | 'nic';
  /** Driver bound before knit touched the device; undefined = unbound. */
  driver?: string;
  /** The device's netdev in the host netns, as it was. Absent when it has none (vfio-pci). */
  netdev?: { name: string; mac?: string; mtu: number; up: boolean };
  /** VFs: the PF, this VF's index, and the PF's view of it (read only when the request sets
   * PF-side settings; then pfName is the PF's netdev). */
  vf?: { pfPciAddress: string; pfName?: string; index: number; pfSide?: VfInfo };
  rdma?: { device: string; charDevices: string[]; netnsMode?: RdmaNetnsMode };
  /** vfio mode: the IOMMU group the device is in (and stays in once bound). */
  iommuGroup?: number;
  /** Where sysfs was read; recorded in device actions that touch it. */
  sysfsRoot: string;
}

export function isPreparedDevice(v: unknown): v is PreparedDevice {
  return typeof v === 'object' && v !== null && typeof (v as PreparedDevice).pciAddress === 'string' && 'ref' in v;
}
