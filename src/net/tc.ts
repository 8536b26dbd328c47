// tc reads: the qdiscs and filters on a link.
import type { FilterInfo, LinkRef, QdiscInfo } from '../base/ops.js';
import type { NetHandle } from './handle.js';

export async function listQdiscs(h: NetHandle, link?: LinkRef): Promise<QdiscInfo[]> {
  const [r] = await h.run([{ op: 'qdisc.list', ...(link !== undefined ? { link } : {}) }]);
  return r.qdiscs ?? [];
}

/** Filters on one hook; redirect filters report their target ifindex in redirectTo. */
export async function listFilters(h: NetHandle, link: LinkRef, parent: 'ingress' | 'egress' = 'ingress'): Promise<FilterInfo[]> {
  const [r] = await h.run([{ op: 'filter.list', link, parent }]);
  return r.filters ?? [];
}

