// The pod's interface a VM runtime builds on: knit's own veth (common/pod-veth.ts), or, on a
// CNI network, the veth the chain makes. What the chain will choose (the MAC, the addresses)
// is not known when the plan is made: the plan carries CHAIN_MAC where the MAC goes, and the
// hand-off is completed from the chain's result (src/cni-exec/result.ts), the way Kata's shim
// and virt-handler read the veth after CNI ADD today.
import { KnitError } from '../../src/base/errors.js';
import type { InterfaceInput, InterfacePlan } from '../../src/base/strategy.js';
import { planPodVeth, type PodVeth } from '../common/pod-veth.js';
import { isPreparedChain, planChain } from './index.js';

/** Stands for the chain-made veth's MAC until the chain has answered. */
export const CHAIN_MAC = 'cni:mac';

export function podSide(input: InterfaceInput): InterfacePlan & { veth: PodVeth } {
  if (input.network.mode !== 'cni') return planPodVeth(input);
  const p = input.prepared;
  if (!isPreparedChain(p)) throw new KnitError('INTERNAL', `interface ${input.iface.name}: a CNI plan needs prepare() to have read the conflist`);
  // The chain's MTU when its first plugin states one (bridge, ptp, macvlan take "mtu").
  const mtu = typeof p.list.plugins[0].mtu === 'number' ? p.list.plugins[0].mtu : 1500;
  return { ...planChain(input), veth: { hostName: '', podName: input.iface.name, mac: CHAIN_MAC, mtu } };
}

/** The address families the chain's IPAM hands out, from its configured ranges or subnet
 * (IPv4 when it says neither). */
export function chainFamilies(input: InterfaceInput): (4 | 6)[] {
  const p = input.prepared;
  if (!isPreparedChain(p)) return [4];
  const ipam = JSON.stringify(p.list.plugins[0].ipam ?? {});
  const subnets = [...ipam.matchAll(/"subnet":"([^"]+)"/g)].map((m) => m[1]);
  const families = new Set<4 | 6>(subnets.map((s) => (s.includes(':') ? 6 : 4)));
  return families.size ? [...families].sort() : [4];
}
