// A persistent tap a VMM opens by name later. The opener must ask TUNSETIFF for the same
// IFF_MULTI_QUEUE setting the device was made with, else the kernel answers EINVAL (libvirt's
// "Unable to create tap device tap0: Invalid argument", kubevirt#4227), so the hand-off spells
// the flags out, as names and as the number.
import type { Step } from '../../src/base/plan.js';
import type { LinkRef } from '../../src/base/ops.js';
import { retireLink } from '../../src/net/retire.js';

/** linux/if_tun.h */
export const IFF_TAP = 0x0002;
export const IFF_MULTI_QUEUE = 0x0100;
export const IFF_NO_PI = 0x1000;
export const IFF_VNET_HDR = 0x4000;

/** The kernel takes up to 256 queues (MAX_TAP_QUEUES), but the fd hand-off passes every queue
 * in one SCM_RIGHTS message, which carries at most 253 fds (SCM_MAX_FD). */
export const MAX_QUEUES = 253;

export type TapFlags = { flags: string; flagsValue: number };

/** The TUNSETIFF flags knit's tun.add uses, which a launcher must repeat: one queue means a
 * single-queue device (as runtime-rs and KubeVirt do), more means IFF_MULTI_QUEUE. */
export function tapFlags(queues: number, vnetHdr = true): TapFlags {
  const names = ['IFF_TAP', 'IFF_NO_PI'];
  let value = IFF_TAP | IFF_NO_PI;
  if (vnetHdr) {
    names.push('IFF_VNET_HDR');
    value |= IFF_VNET_HDR;
  }
  if (queues > 1) {
    names.push('IFF_MULTI_QUEUE');
    value |= IFF_MULTI_QUEUE;
  }
  return { flags: names.join('|'), flagsValue: value };
}

export interface TapSpec {
  /** Netns path; undefined = the host. */
  netns?: string;
  name: string;
  queues: number;
  owner?: number;
  group?: number;
  mtu: number;
  alias: string;
  mac?: string;
  master?: LinkRef;
}

/** Creates the tap, then gives it what tun.add cannot carry (MTU, alias, MAC, master) and
 * brings it up. Detach retires it (down, renamed, in the reap group) instead of deleting it:
 * a delete waits for an RCU grace period. A sandbox tap has no host peer, so the reaper
 * deletes the group inside its netns. */
export function planTap(spec: TapSpec): Step[] {
  const where = spec.netns ? 'sandbox' : 'host';
  return [
    {
      description: `create tap ${spec.name} (${where}, ${spec.queues} queue${spec.queues > 1 ? 's' : ''})`,
      ...(spec.netns ? { netns: spec.netns } : {}),
      do: {
        op: 'tun.add', name: spec.name, mode: 'tap', queues: spec.queues, vnetHdr: true, persist: true,
        ...(spec.owner !== undefined ? { owner: spec.owner } : {}),
        ...(spec.group !== undefined ? { group: spec.group } : {}),
      },
      undo: { op: 'link.del', link: spec.name },
      retire: retireLink(spec.name),
      ...(spec.netns ? { reapInNetns: true as const } : {}),
    },
    {
      description: `configure and bring up tap ${spec.name}`,
      ...(spec.netns ? { netns: spec.netns } : {}),
      do: {
        op: 'link.set', link: spec.name, mtu: spec.mtu, alias: spec.alias, up: true,
        ...(spec.mac ? { mac: spec.mac } : {}),
        ...(spec.master !== undefined ? { master: spec.master } : {}),
      },
    },
  ];
}
