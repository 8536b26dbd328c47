// The device path (SR-IOV, RDMA, VFIO: this folder, src/devices and the device actions) loads
// the first time a node uses it: the first interface with a device (a DRA claim's attach is one),
// or the first device action (a start-up repair of a recorded device attachment runs them). A
// node that never attaches a device never loads it: a daemon must stay small (bench/README.md,
// "Memory"). Across this line only types are imported.
import { KnitError } from '../../src/base/errors.js';
import type { DeviceAction } from '../../src/base/ops.js';
import type { InterfaceInput, PrepareContext, Strategy } from '../../src/base/strategy.js';
import type { DeviceActionEnv } from '../../src/devices/actions.js';

type DevicePath = typeof import('./index.js');

let loaded: DevicePath | undefined;
let loading: Promise<DevicePath> | undefined;
const loadDevicePath = () => (loading ??= import('./index.js').then((m) => (loaded = m)));

/** `inner` for interfaces without a device; the device strategy for those with one. Devices
 * come in front of each runtime's strategy, so a request can mix a pod veth and devices. */
export function withDevices(inner: Strategy): Strategy {
  return {
    runtime: inner.runtime,
    ...(inner.vfio && { vfio: inner.vfio }),
    async prepare(input: InterfaceInput, ctx: PrepareContext) {
      if (input.iface.device) return (await loadDevicePath()).prepareDevice(input, ctx);
      return inner.prepare?.(input, ctx);
    },
    planInterface(input: InterfaceInput) {
      if (!input.iface.device) return inner.planInterface(input);
      // prepare() loaded the device path and read the device; without it there is nothing to plan from.
      const d = input.prepared;
      if (!loaded?.isPreparedDevice(d)) {
        throw new KnitError('INTERNAL', `interface ${input.iface.name}: a device plan needs prepare() to have read the device first`);
      }
      return loaded.planDevice(input, d, inner.vfio);
    },
  };
}

/** A device action of a plan (src/devices/actions.ts); runOps: its netlink batches. */
export async function runDeviceAction(netns: string | undefined, a: DeviceAction, runOps: DeviceActionEnv['runOps']): Promise<void> {
  const devices = await loadDevicePath();
  return devices.runDeviceAction(netns, a, devices.defaultDeviceEnv(runOps));
}
