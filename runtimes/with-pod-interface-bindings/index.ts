// Interfaces that bind a pod interface already there: KubeVirt's binding CNI, which Multus
// calls after the network's own CNI with the cni-arg logicNetworkName (binding.logicNetwork).
// Such an interface makes no pod interface and takes no address; it is KubeVirt's tap on the
// pod interface of that network (runtimes/kubevirt/pod-interface.ts), whoever made it: another
// plugin, or knit itself as the sandbox's eth0. So it is planned the same way whatever runtime
// the sandbox was attached with (a launcher pod whose eth0 knit made is a runc sandbox: its
// first ADD carries no KubeVirt setting) and whatever the mode of the network it names (it uses
// none). Its steps, records, repair and check are those of any other interface.
import type { InterfaceInput, PrepareContext, Strategy } from '../../src/base/strategy.js';
import type { InterfaceRequest } from '../../src/base/types.js';
import { kubevirtStrategy } from '../kubevirt/index.js';

/** The interface binds an existing pod interface (KubeVirt's cni-arg logicNetworkName). */
export const bindsPodInterface = (iface: InterfaceRequest): boolean => iface.binding?.logicNetwork !== undefined;

/** `inner` for every other interface. */
export function withPodInterfaceBindings(inner: Strategy): Strategy {
  return {
    runtime: inner.runtime,
    ...(inner.vfio && { vfio: inner.vfio }),
    async prepare(input: InterfaceInput, ctx: PrepareContext) {
      return bindsPodInterface(input.iface) ? kubevirtStrategy.prepare!(input, ctx) : inner.prepare?.(input, ctx);
    },
    planInterface(input: InterfaceInput) {
      return bindsPodInterface(input.iface) ? kubevirtStrategy.planInterface(input) : inner.planInterface(input);
    },
  };
}
