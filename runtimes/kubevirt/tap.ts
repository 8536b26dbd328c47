// KubeVirt "tap" binding: knit plays the CNI of a binding plugin with domainAttachmentType
// "tap" (the "zero code plugin": KubeVirt only writes <interface type='ethernet'> with
// <target dev='tap0' managed='no'/> and the pod MAC, and expects the device ready).
//
// What joins tap0 to the network is ours to choose. knit uses Kata's tcfilter cross-connect:
// the pod veth exactly as for runc, tap0 beside it, and a u32/mirred redirect each way. It
// needs no bridge, no learning and no NAT, the guest takes the veth's MAC and addresses (the
// veth keeps them too, silenced by the redirect, so the pod netns still shows the pod IP), and
// it is what KubeVirt's own bridge and masquerade bindings are not: plain L2 pass-through.
// KubeVirt's managedTap flavour (bridge + tap + dummy) is the bridge binding here.
import type { InterfaceInput, InterfacePlan } from '../types.js';
import { aliasTag } from '../../src/core/names.js';
import { planPodVeth } from '../common/pod-veth.js';
import { planTap } from '../common/tap.js';
import { planRedirect } from '../common/tc-redirect.js';
import { guestConfigFrom, splitPodL3 } from '../common/guest-config.js';
import { tapHandoff } from '../common/handoff.js';
import { libvirtInterfaceXml } from './libvirt.js';
import { checkDerivedNames, kubevirtTapName } from './names.js';
import type { KubevirtOptions } from './options.js';

export function planTapBinding(input: InterfaceInput, opts: KubevirtOptions): InterfacePlan {
  const ns = input.netnsPath;
  const tap = kubevirtTapName(input.iface.name, opts.index);
  checkDerivedNames(opts.index, [tap]);
  const { veth, ...pod } = planPodVeth(input);
  const { l3 } = splitPodL3(pod.steps, ns, veth.podName);
  const guest = guestConfigFrom(l3, pod.ips, {
    name: input.iface.name, mac: veth.mac, mtu: veth.mtu, dns: input.request.dns, delivery: 'dhcp',
  });
  const steps = [
    ...pod.steps,
    ...planTap({
      netns: ns, name: tap, queues: opts.queues, owner: opts.owner, group: opts.group, mtu: veth.mtu,
      alias: aliasTag(input.sandboxId, input.iface.name),
    }),
    ...planRedirect(ns, veth.podName, tap),
  ];
  const handoff = tapHandoff({
    runtime: 'kubevirt', model: 'tap', name: tap, netns: ns, queues: opts.queues, owner: opts.owner, group: opts.group,
    mac: veth.mac, mtu: veth.mtu, podIpsOn: 'pod+guest', guest,
    libvirt: libvirtInterfaceXml(tap, veth.mac, veth.mtu, opts.queues),
  });
  return {
    steps,
    interfaces: [...pod.interfaces, { name: tap, kind: 'tap', mtu: veth.mtu, sandbox: ns, handoff }],
    ips: pod.ips,
    routes: pod.routes,
  };
}
