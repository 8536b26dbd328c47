// The parts of a device attachment's hand-off (src/base/handoff.ts) that netdev and vfio mode
// share: the DRA claim result the device came from (pool, device name, driver), and the RDMA
// device with the char devices the container needs in both netns modes. The whole hand-off is
// built by netdev.ts and vfio.ts.
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
