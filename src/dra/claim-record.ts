// knit's own record of a prepared claim: what it changed and how to undo it, written (fsync'd)
// before the first change. Unprepare works from this record alone, so it restores the node
// also when the claim is already gone from the API; start-up repair rolls back a claim whose
// Prepare a crash interrupted (the kubelet prepares it again).
import type { Step } from '../base/plan.js';
import type { AttachMode, DeviceParameters } from '../devices/params.js';

export const CLAIM_RECORD_VERSION = 1;

export interface PreparedClaimDevice {
  request: string;
  pool: string;
  /** The DRA device name (pci-DDDD-BB-DD-F). */
  device: string;
  pciAddress: string;
  mode: AttachMode;
  parameters: DeviceParameters;
  /** Its netdev's host name when prepared (none: bound to vfio-pci or another non-net driver). */
  netdev?: string;
  /** Char devices in the claim's CDI spec for this device. */
  charDevices: string[];
  /** The CDI device ID the kubelet passes on; absent when the device needs no char device. */
  cdiId?: string;
  /** status.allocation.devices.results[N] that named it, and the config field of each
   * parameter: an attach refusal about the device names these (absent in older records). */
  resultField?: string;
  parameterFields?: Partial<Record<keyof DeviceParameters, string>>;
}

export interface ClaimRecord {
  version: typeof CLAIM_RECORD_VERSION;
  uid: string;
  namespace: string;
  name: string;
  /** preparing: the steps may have run in part (start-up rolls them back); prepared: all ran;
   * unpreparing: their inverses may have run in part (start-up finishes them); interrupted: a
   * crash stopped its Prepare and start-up rolled it back: kept (without steps) so the pod's
   * attach waits for the kubelet's retry instead of going ahead without the device. */
  state: 'preparing' | 'prepared' | 'unpreparing' | 'interrupted';
  podUids: string[];
  devices: PreparedClaimDevice[];
  steps: Step[];
  preparedAt: string;
}

export const claimWhat = (r: { namespace: string; name: string }) => `claim ${r.namespace}/${r.name}`;
