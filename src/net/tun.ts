// tun/tap devices made inside the handle's netns.
import type { NetHandle } from './handle.js';
import type { TunAddOp } from '../base/ops.js';

export interface TapMade {
  index: number;
  /** The queue fds when returnFds was set: the caller owns them (close or pass them on). */
  fds: number[];
}

/** Creates a tun/tap; on failure nothing is left behind. */
export async function createTun(h: NetHandle, spec: Omit<TunAddOp, 'op'>): Promise<TapMade> {
  const [r] = await h.run([{ op: 'tun.add', ...spec }]);
  return { index: r.index ?? 0, fds: r.fds ?? [] };
}
