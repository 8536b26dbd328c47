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
import type { InterfaceInput, InterfacePlan } from '../../src/base/strategy.js';
import { planVethTap } from '../common/veth-tap.js';
import { libvirtInterfaceXml } from './libvirt.js';
import { checkDerivedNames, kubevirtTapName } from './names.js';
import type { KubevirtOptions } from './options.js';

export function planTapBinding(input: InterfaceInput, opts: KubevirtOptions): InterfacePlan {
  const tap = kubevirtTapName(input.iface.name, opts.index);
  checkDerivedNames(opts.index, [tap]);
  return planVethTap(input, {
    tap, queues: opts.queues, owner: opts.owner, group: opts.group, delivery: 'dhcp', runtime: 'kubevirt', model: 'tap',
    extra: (veth) => ({ libvirt: libvirtInterfaceXml(tap, veth.mac, veth.mtu, opts.queues) }),
  });
}
