// Devices in an Attach: an interface whose request carries `device` (a PCI address, a host
// netdev name, or a DRA claim result with its parameters) gets an existing device instead of
// a veth or tap — an SR-IOV VF or NIC moved into the sandbox netns (mode "netdev"), or bound to
// vfio-pci for a VM (mode "vfio"). The strategies reach this through gate.ts, which loads it on
// first use; the DRA driver imports it directly.
import type { InterfaceInput, InterfacePlan, VfioGuest } from '../../src/base/strategy.js';
import { planNetdev } from './netdev.js';
import type { PreparedDevice } from './prepared-device.js';
import { planVfio } from './vfio.js';

/** The plan for an interface whose device prepare() read. */
export function planDevice(input: InterfaceInput, d: PreparedDevice, vm?: VfioGuest): InterfacePlan {
  return d.ref.parameters.mode === 'vfio' ? planVfio(input, d, vm) : planNetdev(input, d);
}

export { prepareDevice, captureNetdev, capturePfSide, checkVfioViable, type DeviceFields } from './prepare.js';
export { pfSideSteps } from './pf-side.js';
export { planNetdev, HOST_NETNS } from './netdev.js';
export { planVfio, vfioSteps } from './vfio.js';
export { isPreparedDevice, type PreparedDevice } from './prepared-device.js';
export { runDeviceAction, defaultDeviceEnv } from '../../src/devices/actions.js';
