// runc: the container starts inside the netns, so the pod veth is all it needs.
import type { Strategy } from '../../src/base/strategy.js';
import { planPodVeth } from '../common/pod-veth.js';
import { BindingReader, interfaceIndex } from '../common/binding-options.js';

export const runcStrategy: Strategy = {
  runtime: 'runc',
  planInterface(input) {
    // The pod veth has no options: a binding key is a mistake (or meant for another runtime).
    void new BindingReader(interfaceIndex(input), input.iface, [], 'runc');
    const { veth: _veth, ...plan } = planPodVeth(input);
    return plan;
  },
};
