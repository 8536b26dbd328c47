// Devices in an Attach: an interface whose request carries `device` (a PCI address, a host
// netdev name, or a DRA claim result with its parameters) gets an existing device instead of
// a veth or tap — an SR-IOV VF or NIC moved into the sandbox netns (mode "netdev"), or bound to
// vfio-pci for a VM (mode "vfio"). withDevices() puts this in front of each runtime's strategy,
// so a request can mix a pod veth and devices; the other interfaces go to the runtime as before.
import { KnitError } from '../../src/base/errors.js';
import type { InterfaceInput, InterfacePlan, PrepareContext, Strategy, VfioGuest } from '../../src/base/strategy.js';
import { planNetdev } from './netdev.js';
import { prepareDevice } from './prepare.js';
import { isPreparedDevice } from './prepared-device.js';
import { planVfio } from './vfio.js';

function planDevice(input: InterfaceInput, vm?: VfioGuest): InterfacePlan {
  const d = input.prepared;
  if (!isPreparedDevice(d)) {
    throw new KnitError('INTERNAL', `interface ${input.iface.name}: a device plan needs prepare() to have read the device first`);
  }
  return d.ref.parameters.mode === 'vfio' ? planVfio(input, d, vm) : planNetdev(input, d);
}

/** `inner` for interfaces without a device; the device strategy for those with one. */
export function withDevices(inner: Strategy): Strategy {
  return {
    runtime: inner.runtime,
    ...(inner.vfio && { vfio: inner.vfio }),
    async prepare(input: InterfaceInput, ctx: PrepareContext) {
      if (input.iface.device) return prepareDevice(input, ctx);
      return inner.prepare?.(input, ctx);
    },
    planInterface(input: InterfaceInput) {
      return input.iface.device ? planDevice(input, inner.vfio) : inner.planInterface(input);
    },
  };
}

export { prepareDevice, captureNetdev, capturePfSide, checkVfioViable } from './prepare.js';
export { pfSideSteps } from './pf-side.js';
export { planNetdev, HOST_NETNS } from './netdev.js';
export { planVfio, vfioSteps } from './vfio.js';
export type { PreparedDevice } from './prepared-device.js';
