// A pod veth whose addresses belong to a VM guest rather than to the pod: the same host side
// as runc (bridge port, or host routes in routed mode), the pod end up but without addresses
// or routes, and the L3 it would have had returned as the guest's configuration. Used where
// the guest's NIC sits on the pod end's L2 segment (Kata macvtap, KubeVirt bridge binding),
// so an address left on the pod end would answer ARP for the guest's IP.
import type { Allocation, InterfaceInput, InterfacePlan } from '../../src/base/strategy.js';
import { podMac } from '../../src/base/names.js';
import { planPodVeth, type PodVeth } from './pod-veth.js';
import { guestConfigFrom, guestDns, splitPodL3 } from './guest-config.js';
import type { GuestConfig } from '../../src/base/handoff.js';

/** The MAC the network knows this interface by (what runc would give the pod end). */
export function guestMac(input: InterfaceInput): string {
  const v4 = input.addresses.find((a: Allocation) => a.family === 4);
  return input.iface.mac ?? podMac(v4?.address, input.sandboxId, input.iface.name);
}

/** A second, stable, locally administered MAC for the pod end when the guest takes the first. */
export function lowerMac(input: InterfaceInput): string {
  return podMac(undefined, input.sandboxId, `${input.iface.name}/lower`);
}

export function planGuestVeth(
  input: InterfaceInput,
  pod: { name: string; mac: string },
  delivery: GuestConfig['delivery'],
): InterfacePlan & { veth: PodVeth; guest: GuestConfig } {
  const plan = planPodVeth({ ...input, iface: { ...input.iface, name: pod.name, mac: pod.mac } });
  const { kept, l3 } = splitPodL3(plan.steps, input.netnsPath, pod.name);
  const guest = guestConfigFrom(l3, plan.ips, {
    name: input.iface.name, mac: guestMac(input), mtu: plan.veth.mtu, dns: guestDns(input), delivery,
  });
  return { ...plan, steps: kept, guest };
}
