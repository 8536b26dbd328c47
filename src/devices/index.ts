// src/devices: SR-IOV VF / RDMA NIC inventory, DRA attributes and parameters, device
// references, VFIO binding, and the VF state to restore. No netlink here: the PF-side VF ops
// and netdev moves are expressed as src/base/ops.ts ops for the strategies to run.
export { Sysfs } from './sysfs.js';
export { draDeviceName, bdfFromDraDeviceName, normalizeBdf, parseBdf } from './pci-address.js';
export {
  scanInventory, describeDevice, describePciFunction, readRdmaNetnsMode, primaryNetdev, isNetworkClass,
  type Inventory, type InventoryOptions, type PciNetDevice, type PciFunction, type NetdevInfo, type RdmaInfo, type RdmaNetnsMode,
} from './inventory.js';
export { deviceAttributes, type AttributeValue, type AttributeOptions } from './attributes.js';
export {
  parseDeviceParameters, hasPfSettings,
  type DeviceParameters, type DeviceRoute, type AttachMode, type VlanProto, type VfLinkState,
} from './params.js';
export { parseDeviceRef, resolveDevice, resolveVf, type DeviceRef, type DeviceRefInput, type ResolveOptions } from './reference.js';
export { isDmaSafeDriver, iommuGroupMembers, groupBlockers, type GroupMember } from './vfio.js';
export {
  bindToVfio, restoreFromVfio, VFIO_DRIVER, VFIO_CONTAINER_DEVICE,
  type VfioBinding, type VfioBindOptions, type BindIntent, type RestoreResult,
} from './vfio.js';
export {
  captureVfState, pfQueryOp, pfApplyOp, pfRestoreOp, netdevRestoreOps, type VfOriginalState,
} from './netdev-state.js';
