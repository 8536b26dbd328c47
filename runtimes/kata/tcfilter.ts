// Kata's default model: the pod veth exactly as for runc (it keeps its addresses, as Kata
// leaves them), plus tap<N>_kata in the sandbox netns cross-connected to it by tc redirects.
// The guest takes the veth's MAC, because the network on the other side of the veth expects
// traffic from that MAC, and the veth's MTU, addresses, routes and neighbours.
import type { InterfaceInput, InterfacePlan } from '../types.js';
import { aliasTag } from '../../src/core/names.js';
import { planPodVeth } from '../common/pod-veth.js';
import { planTap } from '../common/tap.js';
import { planRedirect } from '../common/tc-redirect.js';
import { guestConfigFrom, splitPodL3 } from '../common/guest-config.js';
import { tapHandoff } from '../common/handoff.js';
import { kataTapName } from './names.js';
import type { KataOptions } from './options.js';

export function planTcFilter(input: InterfaceInput, opts: KataOptions): InterfacePlan {
  const ns = input.netnsPath;
  const { veth, ...pod } = planPodVeth(input);
  const tap = kataTapName(opts.index);
  const { l3 } = splitPodL3(pod.steps, ns, veth.podName);
  const guest = guestConfigFrom(l3, pod.ips, {
    name: input.iface.name, mac: veth.mac, mtu: veth.mtu, dns: input.request.dns, delivery: 'agent',
  });
  const steps = [
    ...pod.steps,
    ...planTap({ netns: ns, name: tap, queues: opts.queues, mtu: veth.mtu, alias: aliasTag(input.sandboxId, input.iface.name) }),
    ...planRedirect(ns, veth.podName, tap),
  ];
  const handoff = tapHandoff({
    runtime: 'kata', model: 'tcfilter', name: tap, netns: ns, queues: opts.queues,
    mac: veth.mac, mtu: veth.mtu, podIpsOn: 'pod+guest', guest,
  });
  return {
    steps,
    interfaces: [...pod.interfaces, { name: tap, kind: 'tap', mtu: veth.mtu, sandbox: ns, handoff }],
    ips: pod.ips,
    routes: pod.routes,
  };
}
