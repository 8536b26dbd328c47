// One CDI spec per prepared claim (cncf-tags/container-device-interface SPEC.md): the char
// devices a container or a VM launcher needs for the claim's devices — /dev/vfio/<group> and
// /dev/vfio/vfio for a device bound to vfio-pci, /dev/infiniband/uverbsN and rdma_cm for an
// RDMA NIC. The kubelet hands the IDs to the runtime (CRI ContainerConfig.CDIDevices), which
// reads the spec from the CDI directory and adds the device nodes.
//
// cdiVersion 0.5.0: the oldest that allows a device name starting with a digit (a claim UID
// does); deviceNodes with only `path` need nothing newer, and containerd 1.7 reads it.
import { createHash } from 'node:crypto';
import path from 'node:path';
import type { Step } from '../base/plan.js';

export const CDI_VERSION = '0.5.0';
/** The CDI class of knit's devices: IDs read "<driver>/net=<claim uid>-<device>". */
export const CDI_CLASS = 'net';

export interface CdiDevice {
  /** The DRA device name. */
  device: string;
  /** Host paths of the char devices, also their paths in the container. */
  charDevices: string[];
}

export const cdiKind = (driver: string) => `${driver}/${CDI_CLASS}`;
export const cdiDeviceName = (claimUid: string, device: string) => `${claimUid}-${device}`;
export const cdiDeviceId = (driver: string, claimUid: string, device: string) => `${cdiKind(driver)}=${cdiDeviceName(claimUid, device)}`;
/** knit's file for a claim: only names of this form are ever written or removed. */
export const cdiSpecPath = (dir: string, driver: string, claimUid: string) => path.join(dir, `${driver}-${claimUid}.json`);

/** A device node: `path` in the container; `hostPath` (CDI 0.5.0) only when the runtime finds
 * the host's /dev somewhere other than /dev (config dra.devRoot). */
const deviceNode = (p: string, devRoot: string) => (devRoot === '/' ? { path: p } : { path: p, hostPath: path.join(devRoot, p) });

export function cdiSpec(driver: string, claimUid: string, devices: CdiDevice[], devRoot = '/'): object {
  return {
    cdiVersion: CDI_VERSION,
    kind: cdiKind(driver),
    devices: devices.map((d) => ({
      name: cdiDeviceName(claimUid, d.device),
      containerEdits: { deviceNodes: d.charDevices.map((p) => deviceNode(p, devRoot)) },
    })),
  };
}

/** Writing the claim's spec, as a journaled step whose inverse removes exactly what knit wrote. */
export function cdiSpecStep(dir: string, driver: string, claimUid: string, devices: CdiDevice[], devRoot = '/'): Step {
  const file = cdiSpecPath(dir, driver, claimUid);
  const content = `${JSON.stringify(cdiSpec(driver, claimUid, devices, devRoot), null, 2)}\n`;
  const sha256 = createHash('sha256').update(content).digest('hex');
  return {
    description: `CDI spec ${file} for ${devices.map((d) => d.device).join(', ')}`,
    do: { op: 'file.write', path: file, content, mode: 0o644, within: dir, withinKey: 'dra.cdiDir' },
    undo: { op: 'file.remove', path: file, ignoreMissing: true, sha256 },
  };
}
