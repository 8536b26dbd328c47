// kubevirt: virt-launcher's libvirt opens a tap knit made in the launcher pod's netns
// (<target dev='tap0' managed='no'/>). binding.binding picks how tap0 reaches the network:
// masquerade (default), bridge, or tap (L2 pass-through); see each binding's file.
import type { Strategy } from '../../src/base/strategy.js';
import { KnitError } from '../../src/base/errors.js';
import { kubevirtOptions } from './options.js';
import { planTapBinding } from './tap.js';
import { planMasquerade } from './masquerade.js';
import { planBridgeBinding } from './bridge.js';
import { kubevirtTapName } from './names.js';
import { libvirtHostdevXml } from './libvirt.js';
import { planOnPodInterface, preparePodInterface } from './pod-interface.js';

export const kubevirtStrategy: Strategy = {
  runtime: 'kubevirt',
  vfio: { delivery: 'agent', entry: (pciAddress, guest) => ({ libvirt: { hostdev: libvirtHostdevXml(pciAddress, guest.name) } }) },
  async prepare(input, ctx) {
    const { logicNetwork } = kubevirtOptions(input);
    return logicNetwork ? preparePodInterface(input, ctx, logicNetwork) : undefined;
  },
  planInterface(input) {
    const opts = kubevirtOptions(input);
    if (opts.logicNetwork) return planOnPodInterface(input, opts);
    // Two interfaces must not derive the same tap name (eth1 and a short name at index 1).
    const tap = kubevirtTapName(input.iface.name, opts.index);
    const clash = input.request.interfaces.findIndex((x, i) => i !== opts.index && kubevirtTapName(x.name, i) === tap);
    if (clash >= 0) {
      throw KnitError.invalid(`interfaces[${opts.index}].name`, `its tap would be ${tap}, as interfaces[${clash}]'s (${input.request.interfaces[clash].name}) is`);
    }
    switch (opts.binding) {
      case 'tap':
        return planTapBinding(input, opts);
      case 'masquerade':
        return planMasquerade(input, opts);
      case 'bridge':
        return planBridgeBinding(input, opts);
    }
  },
};

export { KUBEVIRT_BINDINGS, LAUNCHER_UID } from './options.js';
