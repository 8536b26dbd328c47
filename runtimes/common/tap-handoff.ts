// ResultInterface.handoff for VM runtimes (src/base/handoff.ts TapHandoff): everything a
// launcher needs to plug the device knit made into its VMM, and the guest configuration to
// deliver. The TUNSETIFF flags are derived from the queue count, so no caller can get them wrong.
import type { TapHandoff } from '../../src/base/handoff.js';
import { tapFlags } from './tap.js';

export function tapHandoff(h: Omit<TapHandoff, 'device' | 'flags' | 'flagsValue' | 'persist'> & { device?: TapHandoff['device'] }): TapHandoff {
  return { device: 'tap', persist: true, ...tapFlags(h.queues), ...h };
}
