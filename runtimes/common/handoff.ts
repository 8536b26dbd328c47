// ResultInterface.handoff for VM runtimes: everything a launcher needs to plug the device knit
// made into its VMM, and the guest configuration to deliver. Plain JSON (it goes into the
// record and over the wire).
import type { GuestConfig } from './guest-config.js';
import { tapFlags } from './tap.js';

export type VmHandoffFields = {
  runtime: 'kata' | 'kubevirt';
  /** kata: tcfilter | macvtap | host-tap; kubevirt: tap | masquerade | bridge */
  model: string;
  device: 'tap' | 'macvtap';
  /** Device name, in `netns`. */
  name: string;
  /** Netns path holding the device; null = the host (the daemon's netns). */
  netns: string | null;
  /** Queue pairs: open the device this many times (one fd per queue). */
  queues: number;
  /** TUNSETIFF flags the opener must use, by name and as a number. */
  flags: string;
  flagsValue: number;
  /** The device outlives its fds (TUNSETPERSIST): open it by name. */
  persist: boolean;
  owner?: number;
  group?: number;
  /** The guest NIC's MAC (not the tap's own). */
  mac: string;
  mtu: number;
  /** Where the pod's addresses live: on the pod's veth, in the guest, or both (Kata tcfilter
   * keeps them on the veth, where ingress redirection keeps them silent). */
  podIpsOn: 'pod' | 'guest' | 'pod+guest';
  guest: GuestConfig;
};

/** The common fields plus per-model extras (DAN path, libvirt XML, NAT details). */
export type VmHandoff = VmHandoffFields & Record<string, unknown>;

export function tapHandoff(
  h: Omit<VmHandoffFields, 'device' | 'flags' | 'flagsValue' | 'persist'> & { device?: VmHandoffFields['device'] } & Record<string, unknown>,
): VmHandoff {
  return { device: 'tap', persist: true, ...tapFlags(h.queues), ...h };
}
