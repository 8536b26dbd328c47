// Kata's default model: the pod veth exactly as for runc (it keeps its addresses, as Kata
// leaves them), plus tap<N>_kata in the sandbox netns cross-connected to it by tc redirects.
// The guest takes the veth's MAC, because the network on the other side of the veth expects
// traffic from that MAC, and the veth's MTU, addresses, routes and neighbours.
import type { InterfaceInput, InterfacePlan } from '../../src/base/strategy.js';
import { planVethTap } from '../common/veth-tap.js';
import { kataTapName } from './names.js';
import type { KataOptions } from './options.js';

export function planTcFilter(input: InterfaceInput, opts: KataOptions): InterfacePlan {
  return planVethTap(input, { tap: kataTapName(opts.slot), queues: opts.queues, delivery: 'agent', runtime: 'kata', model: 'tcfilter' });
}
