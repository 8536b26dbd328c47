// Neighbour reads: the ARP/NDP cache and proxy entries together (NeighInfo.proxy tells them apart).
import type { LinkRef, NeighInfo } from '../base/ops.js';
import type { NetHandle } from './handle.js';

export async function listNeighs(h: NetHandle, link?: LinkRef, family?: 4 | 6): Promise<NeighInfo[]> {
  const [r] = await h.run([{ op: 'neigh.list', ...(link !== undefined ? { link } : {}), ...(family ? { family } : {}) }]);
  return r.neighs ?? [];
}
