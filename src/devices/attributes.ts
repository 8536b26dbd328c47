// ResourceSlice attributes for one inventory device, named like dranet's (`dra.net/ifName`,
// `pciAddress`, `sriov`, `rdma`, ...; kubernetes-sigs/dranet pkg/apis/attributes.go) plus the
// standard `resource.kubernetes.io/pcieRoot` and `pciBusID`, so DeviceClass selectors written
// for dranet keep working. knit adds what VF and VFIO users select on: pfName, pfPciAddress,
// vfIndex, iommuGroup, driver.
//
// Differences from dranet, on purpose: pciVendor/pciDevice are hex IDs ("15b3"), not pci.ids
// names (knit ships no pci.ids); functions bound to vfio-pci are published (dranet hides them)
// because knit can hand them to a VM.
import type { PciNetDevice } from './inventory.js';
import { primaryNetdev } from './inventory.js';

/** What a DRA DeviceAttribute can hold (int, bool, string). */
export type AttributeValue = string | number | boolean;

export interface AttributeOptions {
  /** Attribute domain; default "dra.net" (dranet's). */
  prefix?: string;
}

export function deviceAttributes(dev: PciNetDevice, opts: AttributeOptions = {}): Record<string, AttributeValue> {
  const p = (opts.prefix ?? 'dra.net') + '/';
  const a: Record<string, AttributeValue> = {};
  const put = (key: string, value: AttributeValue | undefined) => {
    if (value !== undefined) a[key] = value;
  };

  put(`${p}pciAddress`, dev.pciAddress);
  put(`${p}pciVendor`, dev.vendorId);
  put(`${p}pciDevice`, dev.deviceId);
  put(`${p}pciSubsystem`, dev.subsystemDeviceId);
  put(`${p}numaNode`, dev.numaNode);

  const netdev = primaryNetdev(dev);
  if (netdev) {
    put(`${p}ifName`, netdev.name);
    put(`${p}mac`, netdev.mac);
    put(`${p}mtu`, netdev.mtu);
    put(`${p}state`, netdev.operstate);
  }

  // dranet: sriov = PF with sriov_totalvfs > 0; sriovVfs only on such PFs; isSriovVf only when true.
  put(`${p}sriov`, dev.kind === 'pf');
  if (dev.sriov) put(`${p}sriovVfs`, dev.sriov.numVfs);
  if (dev.vf) {
    put(`${p}isSriovVf`, true);
    put(`${p}vfIndex`, dev.vf.index);
    put(`${p}pfPciAddress`, dev.vf.pfPciAddress);
    put(`${p}pfName`, dev.vf.pfName);
  }
  put(`${p}virtual`, false); // every inventory device is a PCI function

  put(`${p}rdma`, dev.rdma !== undefined);
  put(`${p}rdmaDevice`, dev.rdma?.device);

  put(`${p}iommuGroup`, dev.iommuGroup);
  put(`${p}driver`, dev.driver);

  put('resource.kubernetes.io/pciBusID', dev.pciAddress);
  put('resource.kubernetes.io/pcieRoot', dev.pcieRoot);
  return a;
}
