// kata: the VM runs in (or, for host-tap, beside) the pod netns and the guest NIC is a
// virtio-net backed by a tap knit makes. binding.mode picks Kata's model: tcfilter (default),
// macvtap, or host-tap (Kata's DAN contract). See each model's file for what it builds.
import type { Strategy } from '../../src/base/strategy.js';
import { kataOptions } from './options.js';
import { planTcFilter } from './tcfilter.js';
import { planMacvtap } from './macvtap.js';
import { planHostTap } from './host-tap.js';
import { danVfioDevice } from './dan.js';
import { pickMacvtapIndex } from './macvtap-index.js';

export const kataStrategy: Strategy = {
  runtime: 'kata',
  // A macvtap's ifindex names its /dev/tap<ifindex> host-wide: picked where nothing holds it.
  async prepare(input, ctx) {
    return kataOptions(input).mode === 'macvtap' ? pickMacvtapIndex(input, ctx) : undefined;
  },
  vfio: { delivery: 'dan', entry: (pciAddress, guest) => ({ dan: danVfioDevice(pciAddress, guest) }) },
  planInterface(input) {
    const opts = kataOptions(input);
    switch (opts.mode) {
      case 'tcfilter':
        return planTcFilter(input, opts);
      case 'macvtap':
        return planMacvtap(input, opts);
      case 'host-tap':
        return planHostTap(input, opts);
    }
  },
};

export { DEFAULT_DAN_DIR, KATA_MODES } from './options.js';
