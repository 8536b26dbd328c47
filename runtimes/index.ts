// The strategies this build offers, by runtime. Core picks one per request (AttachRequest.
// runtime); the options each reads from InterfaceRequest.binding are documented in its folder.
import type { RuntimeKind } from '../src/base/types.js';
import type { Strategy } from '../src/base/strategy.js';
import { runcStrategy } from './runc/index.js';
import { kataStrategy } from './kata/index.js';
import { kubevirtStrategy } from './kubevirt/index.js';
import { withDevices } from './with-devices/gate.js';
import { withCniChains } from './with-cni-chains/index.js';

/** Every runtime also takes devices (SR-IOV VFs, NICs; runtimes/with-devices, loaded on first
 * use) on any interface, and CNI plugin chains (runtimes/with-cni-chains) on networks of mode "cni". */
export const strategies: Record<RuntimeKind, Strategy> = {
  runc: withDevices(withCniChains(runcStrategy)),
  kata: withDevices(withCniChains(kataStrategy)),
  kubevirt: withDevices(withCniChains(kubevirtStrategy)),
};

export { runcStrategy, kataStrategy, kubevirtStrategy };
