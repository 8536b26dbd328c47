// What a device attachment tells its consumers (ResultInterface.handoff):
//   - networkData: KEP-4817's ResourceClaim.status.devices[].networkData — interfaceName, ips
//     (CIDRs), hardwareAddress — for the DRA driver to publish as is;
//   - draDevice: the claim result it came from (pool, device name, driver);
//   - rdma: the RDMA device and the char devices the container needs in both netns modes;
//   - vfio: the PCI address, IOMMU group and the /dev/vfio nodes a VMM opens, the guest's L3,
//     and per runtime the entry it reads: Kata's DAN "vfio" device (runtime-rs dan.rs:
//     {type: "vfio", pci_device_id}) and KubeVirt/libvirt's <hostdev> (managed='no': knit
//     already bound the function to vfio-pci).
import type { RuntimeKind } from '../../src/base/types.js';
import { VFIO_CONTAINER_DEVICE } from '../../src/devices/vfio.js';
import type { GuestConfig, NetworkData, VfioHandoff } from '../../src/base/handoff.js';
import { danDevice } from '../kata/dan.js';
import type { PreparedDevice } from './prepared-device.js';

export function draDevice(d: PreparedDevice): Record<string, string> {
  const out: Record<string, string> = { device: d.draName };
  if (d.ref.by === 'claim') {
    out.pool = d.ref.pool;
    if (d.ref.driver) out.driver = d.ref.driver;
  }
  return out;
}

export function rdmaHandoff(d: PreparedDevice, moved: boolean): Record<string, unknown> | undefined {
  if (!d.rdma) return undefined;
  return { device: d.rdma.device, charDevices: d.rdma.charDevices, netnsMode: d.rdma.netnsMode ?? 'unknown', moved };
}

/** <hostdev> for libvirt: the function by address, left bound by knit (managed='no'). */
export function libvirtHostdevXml(bdf: string, alias: string): string {
  const [domain, bus, slotFn] = bdf.split(':');
  const [slot, fn] = slotFn!.split('.');
  return [
    "<hostdev mode='subsystem' type='pci' managed='no'>",
    `  <source><address domain='0x${domain}' bus='0x${bus}' slot='0x${slot}' function='0x${fn}'/></source>`,
    `  <alias name='ua-${alias}'/>`,
    '</hostdev>',
  ].join('\n');
}

export function vfioHandoff(
  runtime: RuntimeKind,
  d: PreparedDevice,
  guest: GuestConfig,
  networkData: NetworkData,
): VfioHandoff {
  const group = d.iommuGroup!;
  const out: VfioHandoff = {
    runtime,
    model: 'vfio',
    pciAddress: d.pciAddress,
    iommuGroup: group,
    vfioDevice: `/dev/vfio/${group}`,
    containerDevice: VFIO_CONTAINER_DEVICE,
    originalDriver: d.driver ?? null,
    mac: guest.mac,
    mtu: guest.mtu,
    podIpsOn: 'guest',
    guest,
    networkData,
    draDevice: draDevice(d),
  };
  if (runtime === 'kata') {
    const entry = danDevice('', 0, guest);
    out.dan = { name: entry.name, guest_mac: entry.guest_mac, device: { type: 'vfio', pci_device_id: d.pciAddress }, network_info: entry.network_info };
  }
  if (runtime === 'kubevirt') out.libvirt = { hostdev: libvirtHostdevXml(d.pciAddress, guest.name) };
  return out;
}
