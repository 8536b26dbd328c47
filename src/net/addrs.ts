// Address reads.
import type { AddrInfo, LinkRef } from '../base/ops.js';
import type { NetHandle } from './handle.js';

/** Addresses of one link (or of all links), optionally of one family. */
export async function listAddrs(h: NetHandle, link?: LinkRef, family?: 4 | 6): Promise<AddrInfo[]> {
  const [r] = await h.run([{ op: 'addr.list', ...(link !== undefined ? { link } : {}), ...(family ? { family } : {}) }]);
  return r.addrs ?? [];
}
