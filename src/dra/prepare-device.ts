// Prepare reads one allocated device and plans its slow changes, before anything changes: the
// PF-side VF settings (MAC, VLAN, spoofchk, trust, rates, link state), and for a claim meant for
// a VM the vfio-pci binding. What the netdev mode leaves for the attach (the move into the pod,
// addresses, routes) is not done here: the pod's netns does not exist yet. A refusal names the
// field its value came from: the allocation result for the device and what this node finds of
// it, the opaque config entry for a parameter; the node's own state (a driver not loaded) is
// said of the node.
import { KnitError } from '../base/errors.js';
import type { Step } from '../base/plan.js';
import type { Op, ResultsOf } from '../base/ops.js';
import { hasPfSettings } from '../devices/params.js';
import { resolveDevice } from '../devices/reference.js';
import type { Sysfs } from '../devices/sysfs.js';
import { VFIO_CONTAINER_DEVICE } from '../devices/vfio.js';
import { captureNetdev, capturePfSide, checkVfioViable, pfSideSteps, vfioSteps, type DeviceFields, type PreparedDevice } from '../../runtimes/with-devices/index.js';
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

/** The fields of a claim's device: its allocation result, and the config entry of each parameter. */
export function claimDeviceFields(d: ClaimDevice): DeviceFields {
  return {
    device: `${d.resultField}.device`,
    parameter: (key) => d.parameterFields[key] ?? `status.allocation.devices.config (no entry for request ${d.request} sets ${key})`,
  };
}

export async function planClaimDevice(env: DeviceReadEnv, d: ClaimDevice): Promise<DevicePlan> {
  const fields = claimDeviceFields(d);
  if (d.pool !== env.pool) {
    throw new KnitError('NOT_FOUND', `${d.resultField}.pool: ${JSON.stringify(d.pool)} is not this node's pool ${JSON.stringify(env.pool)}: the claim was allocated to another node`, { field: `${d.resultField}.pool` });
  }
  const ref = { by: 'claim' as const, pool: d.pool, device: d.device, parameters: d.parameters };
  const dev = await resolveDevice(env.sysfs, ref, { field: d.resultField, pool: env.pool });
  const prepared: PreparedDevice = { index: 0, ref, pciAddress: dev.pciAddress, draName: dev.name, kind: dev.kind, sysfsRoot: env.sysfs.root };
  if (dev.driver) prepared.driver = dev.driver;
  if (dev.vf) prepared.vf = { pfPciAddress: dev.vf.pfPciAddress, index: dev.vf.index, ...(dev.vf.pfName ? { pfName: dev.vf.pfName } : {}) };
  await captureNetdev(env, dev, prepared, fields.device);
  if (hasPfSettings(d.parameters)) await capturePfSide(env, dev, prepared, fields);

  const out: PreparedClaimDevice = {
    request: d.request, pool: d.pool, device: d.device, pciAddress: dev.pciAddress, mode: d.parameters.mode, parameters: d.parameters, charDevices: [],
    resultField: d.resultField, parameterFields: d.parameterFields,
  };
  if (prepared.netdev) out.netdev = prepared.netdev.name;
  let steps: Step[];
  if (d.parameters.mode === 'vfio') {
    await checkVfioViable(env.sysfs, dev, prepared, fields);
    steps = vfioSteps(prepared);
    out.charDevices = [`/dev/vfio/${prepared.iommuGroup}`, VFIO_CONTAINER_DEVICE];
  } else {
    if (!prepared.netdev) {
      const mode = d.parameterFields.mode ? `${d.parameterFields.mode} "netdev"` : 'mode "netdev" (no config entry sets mode)';
      throw new KnitError('FAILED_PRECONDITION', `${fields.device}: ${dev.pciAddress} has no netdev in the host netns (${dev.driver ? `bound to ${dev.driver}` : 'no driver'}); ${mode} moves a netdev: use mode "vfio"`, { field: fields.device });
    }
    steps = pfSideSteps(prepared);
    // Both RDMA netns modes: the container needs the char devices (the RDMA device itself moves at the attach).
    if (dev.rdma) out.charDevices = dev.rdma.charDevices;
  }
  return { device: out, steps };
}
