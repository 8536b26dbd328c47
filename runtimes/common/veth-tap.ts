// The pod veth exactly as for runc (or the one a CNI chain made), plus a tap beside it in the sandbox netns, cross-connected
// by a u32/mirred redirect each way: Kata's tcfilter model and knit's KubeVirt tap binding.
// The guest takes the veth's MAC (the network behind the veth expects it), MTU, addresses,
// routes and neighbours; the veth keeps its addresses too, silenced by the redirect.
import type { InterfaceInput, InterfacePlan } from '../../src/base/strategy.js';
import { aliasTag } from '../../src/base/names.js';
import type { PodVeth } from './pod-veth.js';
import { podSide } from '../with-cni-chains/pod-side.js';
import { planTap } from './tap.js';
import { planRedirect } from './tc-redirect.js';
import { guestConfigFrom, guestDns, splitPodL3 } from './guest-config.js';
import type { GuestConfig, TapHandoff, TapModel } from '../../src/base/handoff.js';
import { tapHandoff } from './tap-handoff.js';

export interface VethTapOptions {
  tap: string;
  queues: number;
  owner?: number;
  group?: number;
  /** How the guest learns its config: Kata's agent, or the launcher's DHCP. */
  delivery: GuestConfig['delivery'];
  runtime: 'kata' | 'kubevirt';
  model: TapModel;
  /** Runtime-specific hand-off fields (libvirt XML, ...), from the veth once it is known. */
  extra?: (veth: PodVeth) => Partial<TapHandoff>;
}

export function planVethTap(input: InterfaceInput, o: VethTapOptions): InterfacePlan {
  const ns = input.netnsPath;
  const { veth, ...pod } = podSide(input);
  const { l3 } = splitPodL3(pod.steps, ns, veth.podName);
  const guest = guestConfigFrom(l3, pod.ips, {
    name: input.iface.name, mac: veth.mac, mtu: veth.mtu, dns: guestDns(input), delivery: o.delivery,
  });
  const steps = [
    ...pod.steps,
    ...planTap({
      netns: ns, name: o.tap, queues: o.queues, owner: o.owner, group: o.group, mtu: veth.mtu,
      alias: aliasTag(input.sandboxId, input.iface.name),
    }),
    ...planRedirect(ns, veth.podName, o.tap),
  ];
  const handoff = tapHandoff({
    runtime: o.runtime, model: o.model, name: o.tap, netns: ns, queues: o.queues,
    ...(o.owner !== undefined ? { owner: o.owner } : {}),
    ...(o.group !== undefined ? { group: o.group } : {}),
    mac: veth.mac, mtu: veth.mtu, podIpsOn: 'pod+guest', guest, ...o.extra?.(veth),
  });
  return {
    steps,
    interfaces: [...pod.interfaces, { name: o.tap, kind: 'tap', mtu: veth.mtu, sandbox: ns, handoff }],
    ips: pod.ips,
    routes: pod.routes,
  };
}
