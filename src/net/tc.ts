// tc reads, and the Kata veth<->tap splice as ops.
import type { FilterInfo, LinkRef, Op, QdiscInfo } from '../base/ops.js';
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

/** Ops that make every packet arriving on a leave through b and vice versa: an ingress qdisc
 * on each and a u32 match-all filter redirecting to the other (Kata's tcfilter model). */
export function spliceOps(a: LinkRef, b: LinkRef): Op[] {
  return [
    { op: 'qdisc.add', link: a, kind: 'ingress' },
    { op: 'filter.add', link: a, parent: 'ingress', redirectTo: b },
    { op: 'qdisc.add', link: b, kind: 'ingress' },
    { op: 'filter.add', link: b, parent: 'ingress', redirectTo: a },
  ];
}
