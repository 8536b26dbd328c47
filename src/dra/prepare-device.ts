// Prepare reads one allocated device and plans its slow changes, before anything changes: the
// PF-side VF settings (MAC, VLAN, spoofchk, trust, rates, link state), and for a claim meant for
// a VM the vfio-pci binding. What the netdev mode leaves for the attach (the move into the pod,
// addresses, routes) is not done here: the pod's netns does not exist yet. The refusals name
// the claim's config field or the device.
import { KnitError } from '../base/errors.js';
import type { Step } from '../base/plan.js';
import type { Op, ResultsOf } from '../base/ops.js';
import { hasPfSettings } from '../devices/params.js';
import { resolveDevice } from '../devices/reference.js';
import type { Sysfs } from '../devices/sysfs.js';
import { VFIO_CONTAINER_DEVICE } from '../devices/vfio.js';
import { captureNetdev, capturePfSide, checkVfioViable, pfSideSteps, vfioSteps, type PreparedDevice } from '../../runtimes/with-devices/index.js';
import type { ClaimDevice } from './claim.js';
import type { PreparedClaimDevice } from './claim-record.js';

export interface DeviceReadEnv {
  sysfs: Sysfs;
  runOps<const T extends readonly Op[]>(netns: string | undefined, ops: T): Promise<ResultsOf<T>>;
  /** This node's pool (its name). */
  pool: string;
}

export interface DevicePlan {
  device: PreparedClaimDevice;
  steps: Step[];
}

export async function planClaimDevice(env: DeviceReadEnv, d: ClaimDevice, field: string): Promise<DevicePlan> {
  if (d.pool !== env.pool) {
    throw new KnitError('NOT_FOUND', `device ${d.device} is in pool ${d.pool}, not this node's pool ${env.pool}: the claim was allocated to another node`);
  }
  const ref = { by: 'claim' as const, pool: d.pool, device: d.device, parameters: d.parameters };
  const dev = await resolveDevice(env.sysfs, ref, { field, pool: env.pool });
  const prepared: PreparedDevice = { index: 0, ref, pciAddress: dev.pciAddress, draName: dev.name, kind: dev.kind, sysfsRoot: env.sysfs.root };
  if (dev.driver) prepared.driver = dev.driver;
  if (dev.vf) prepared.vf = { pfPciAddress: dev.vf.pfPciAddress, index: dev.vf.index, ...(dev.vf.pfName ? { pfName: dev.vf.pfName } : {}) };
  await captureNetdev(env, dev, prepared, field);
  if (hasPfSettings(d.parameters)) await capturePfSide(env, dev, prepared, `${field}.parameters`);

  const out: PreparedClaimDevice = {
    request: d.request, pool: d.pool, device: d.device, pciAddress: dev.pciAddress, mode: d.parameters.mode, parameters: d.parameters, charDevices: [],
  };
  if (prepared.netdev) out.netdev = prepared.netdev.name;
  let steps: Step[];
  if (d.parameters.mode === 'vfio') {
    await checkVfioViable(env.sysfs, dev, prepared, field);
    steps = vfioSteps(prepared);
    out.charDevices = [`/dev/vfio/${prepared.iommuGroup}`, VFIO_CONTAINER_DEVICE];
  } else {
    if (!prepared.netdev) {
      throw new KnitError('FAILED_PRECONDITION', `${dev.pciAddress} has no netdev in the host netns (${dev.driver ? `bound to ${dev.driver}` : 'no driver'}): netdev mode moves a netdev; use mode "vfio"`);
    }
    steps = pfSideSteps(prepared);
    // Both RDMA netns modes: the container needs the char devices (the RDMA device itself moves at the attach).
    if (dev.rdma) out.charDevices = dev.rdma.charDevices;
  }
  return { device: out, steps };
}
