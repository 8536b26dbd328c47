// Link look-ups by name or index (never a full dump on the hot path).
import type { LinkInfo, LinkRef } from '../base/ops.js';
import type { NetHandle } from './handle.js';
import { findLinkIn } from './find-link.js';

/** The link, or undefined when there is none by that name/index in the handle's netns. */
export function findLink(h: NetHandle, link: LinkRef): Promise<LinkInfo | undefined> {
  return findLinkIn((_, ops) => h.run(ops), undefined, link);
}

/** The link; a KernelError (ENODEV) when it is missing. */
export async function getLink(h: NetHandle, link: LinkRef): Promise<LinkInfo> {
  const [r] = await h.run([{ op: 'link.get', link }]);
  return r.link!;
}

/** Every link of the handle's netns, optionally only of one kind ("veth", "bridge", ...). A
 * dump: for inventory and GC, not for the attach path. */
export async function listLinks(h: NetHandle, kind?: string): Promise<LinkInfo[]> {
  const [r] = await h.run([{ op: 'link.list', ...(kind ? { kind } : {}) }]);
  return r.links ?? [];
}

