// The strategies this build offers, by runtime. Core picks one per request (AttachRequest.
// runtime); the options each reads from InterfaceRequest.binding are documented in its folder.
import type { RuntimeKind } from '../src/base/types.js';
import type { Strategy } from '../src/base/strategy.js';
import { runcStrategy } from './runc/index.js';
import { kataStrategy } from './kata/index.js';
import { kubevirtStrategy } from './kubevirt/index.js';
import { withDevices } from './with-devices/gate.js';
import { withCniChains } from './with-cni-chains/index.js';
import { withPodInterfaceBindings } from './with-pod-interface-bindings/index.js';

/** Every runtime also takes devices (SR-IOV VFs, NICs; runtimes/with-devices, loaded on first
 * use) on any interface, KubeVirt's binding on a pod interface already there
 * (runtimes/with-pod-interface-bindings) whatever the sandbox's runtime and network, and CNI
 * plugin chains (runtimes/with-cni-chains) on networks of mode "cni". */
export const strategies: Record<RuntimeKind, Strategy> = {
  runc: withDevices(withPodInterfaceBindings(withCniChains(runcStrategy))),
  kata: withDevices(withPodInterfaceBindings(withCniChains(kataStrategy))),
  kubevirt: withDevices(withPodInterfaceBindings(withCniChains(kubevirtStrategy))),
};

export { runcStrategy, kataStrategy, kubevirtStrategy };
