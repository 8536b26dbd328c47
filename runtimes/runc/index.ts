// runc: the container starts inside the netns, so the pod veth is all it needs.
import type { Strategy } from '../../src/base/strategy.js';
import { planPodVeth } from '../common/pod-veth.js';

export const runcStrategy: Strategy = {
  runtime: 'runc',
  planInterface(input) {
    const { veth: _veth, ...plan } = planPodVeth(input);
    return plan;
  },
};
