// vfio mode: the PCI function goes to a VM whole. Nothing enters the sandbox netns; knit sets
// the PF side (the guest owns the VF, so its MAC and VLAN can only be set from the PF), binds
// the function to vfio-pci and answers with what the VMM opens (/dev/vfio/<group> and
// /dev/vfio/vfio), what the guest should configure, and the VM runtime's own entry for the
// device (Strategy.vfio: Kata's DAN "vfio" device, libvirt's <hostdev>).
//
//   PF side       vf.set on the PF (+ MAC read-back)      undo: vf.set with the recorded values
//   claim         (when it has a netdev) still <name>     undo: device.return — the netdev comes
//                                                           back when the driver rebinds; udev may
//                                                           name it anew, so find it by address
//   bind          driver_override + drivers_probe         undo: unbind, clear the override,
//                                                           bind the recorded driver
import type { Step } from '../../src/base/plan.js';
import type { VfioBindAction, VfioRestoreAction } from '../../src/base/ops.js';
import { guestConfigFrom, guestDns } from '../common/guest-config.js';
import type { InterfaceInput, InterfacePlan, VfioGuest } from '../../src/base/strategy.js';
import { draDevice } from './handoff.js';
import { VFIO_CONTAINER_DEVICE } from '../../src/devices/vfio.js';
import type { GuestConfig, NetworkData, VfioHandoff } from '../../src/base/handoff.js';
import type { RuntimeKind } from '../../src/base/types.js';
import { deviceL3 } from './l3.js';
import { claimStep } from './netdev.js';
import { pfSideSteps } from './pf-side.js';
import type { PreparedDevice } from './prepared-device.js';

/** The PF side, the netdev's claim (its inverse gives it back after the rebind) and the bind. */
export function vfioSteps(d: PreparedDevice): Step[] {
  const root = d.sysfsRoot === '/sys' ? {} : { sysfsRoot: d.sysfsRoot };
  const driver = d.driver ? { originalDriver: d.driver } : {};
  const bind: VfioBindAction = { op: 'vfio.bind', pciAddress: d.pciAddress, iommuGroup: d.iommuGroup!, ...driver, ...root };
  const restore: VfioRestoreAction = { op: 'vfio.restore', pciAddress: d.pciAddress, ...driver, ...root };
  return [
    ...pfSideSteps(d),
    ...(d.netdev ? [claimStep(d)] : []),
    { description: `bind ${d.pciAddress} to vfio-pci (IOMMU group ${d.iommuGroup})`, do: bind, undo: restore },
  ];
}

export function planVfio(input: InterfaceInput, d: PreparedDevice, vm: VfioGuest | undefined): InterfacePlan {
  const p = d.ref.parameters;
  const steps = vfioSteps(d);

  // The L3 a netdev would get, handed to the guest instead of configured anywhere by knit.
  const name = input.iface.name;
  const l3 = deviceL3(input, d, name);
  const mac = p.mac ?? d.vf?.pfSide?.mac ?? d.netdev?.mac ?? '';
  const guest = guestConfigFrom([...l3.addressSteps, ...l3.routeSteps], l3.ips, {
    name,
    mac: mac === '00:00:00:00:00:00' ? (d.netdev?.mac ?? '') : mac,
    mtu: p.mtu ?? input.iface.mtu ?? d.netdev?.mtu ?? 1500,
    dns: guestDns(input),
    delivery: vm?.delivery ?? 'agent',
  });
  const networkData = { interfaceName: name, ips: l3.ips.map((ip) => ip.address), hardwareAddress: guest.mac };
  return {
    steps,
    interfaces: [
      {
        name,
        kind: 'vfio',
        ...(guest.mac ? { mac: guest.mac } : {}),
        mtu: guest.mtu,
        pciId: d.pciAddress,
        handoff: vfioHandoff(input.request.runtime, d, guest, networkData, vm),
      },
    ],
    ips: l3.ips,
    routes: l3.routes,
  };
}

function vfioHandoff(
  runtime: RuntimeKind,
  d: PreparedDevice,
  guest: GuestConfig,
  networkData: NetworkData,
  vm: VfioGuest | undefined,
): VfioHandoff {
  const group = d.iommuGroup!;
  return {
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
    ...vm?.entry(d.pciAddress, guest),
  };
}
