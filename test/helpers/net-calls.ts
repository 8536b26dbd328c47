// Calls of src/net that knit itself never makes, for the kernel tests that check an op through
// knit beside `ip`/`tc`: each runs one op on a NetHandle and answers what that op returns.
// Production sends these ops inside plans and batches (src/core/executor.ts), not one by one.
import type { AddrInfo, FilterInfo, LinkInfo, LinkRef, NeighInfo, QdiscInfo, RouteInfo, TunAddOp, VfInfo } from '../../src/base/ops.js';
import type { NetHandle } from '../../src/net/handle.js';
import { findLinkIn } from '../../src/net/find-link.js';
import { identifyNetns, NetnsError } from '../../src/net/netns.js';

/** The link, or undefined when there is none by that name/index in the handle's netns. */
export function findLink(h: NetHandle, link: LinkRef): Promise<LinkInfo | undefined> {
  return findLinkIn((_, ops) => h.run(ops), undefined, link);
}

/** The link; a KernelError (ENODEV) when it is missing. */
export async function getLink(h: NetHandle, link: LinkRef): Promise<LinkInfo> {
  const [r] = await h.run([{ op: 'link.get', link }]);
  return r.link!;
}

/** Every link of the handle's netns, optionally only of one kind ("veth", "bridge", ...). */
export async function listLinks(h: NetHandle, kind?: string): Promise<LinkInfo[]> {
  const [r] = await h.run([{ op: 'link.list', ...(kind ? { kind } : {}) }]);
  return r.links ?? [];
}

/** Addresses of one link (or of all links), optionally of one family. */
export async function listAddrs(h: NetHandle, link?: LinkRef, family?: 4 | 6): Promise<AddrInfo[]> {
  const [r] = await h.run([{ op: 'addr.list', ...(link !== undefined ? { link } : {}), ...(family ? { family } : {}) }]);
  return r.addrs ?? [];
}

/** Routes of one table (default: main), optionally of one family. Cached clones excluded. */
export async function listRoutes(h: NetHandle, opts: { family?: 4 | 6; table?: number } = {}): Promise<RouteInfo[]> {
  const [r] = await h.run([{ op: 'route.list', ...opts }]);
  return r.routes ?? [];
}

/** The ARP/NDP cache and proxy entries together (NeighInfo.proxy tells them apart). */
export async function listNeighs(h: NetHandle, link?: LinkRef, family?: 4 | 6): Promise<NeighInfo[]> {
  const [r] = await h.run([{ op: 'neigh.list', ...(link !== undefined ? { link } : {}), ...(family ? { family } : {}) }]);
  return r.neighs ?? [];
}

export async function listQdiscs(h: NetHandle, link?: LinkRef): Promise<QdiscInfo[]> {
  const [r] = await h.run([{ op: 'qdisc.list', ...(link !== undefined ? { link } : {}) }]);
  return r.qdiscs ?? [];
}

/** Filters on one hook; redirect filters report their target ifindex in redirectTo. */
export async function listFilters(h: NetHandle, link: LinkRef, parent: 'ingress' | 'egress' = 'ingress'): Promise<FilterInfo[]> {
  const [r] = await h.run([{ op: 'filter.list', link, parent }]);
  return r.filters ?? [];
}

/** The PF's VFs as it reports them (empty for a link without SR-IOV). */
export async function listVfs(h: NetHandle, pf: LinkRef): Promise<VfInfo[]> {
  const [r] = await h.run([{ op: 'link.get', link: pf, vfs: true }]);
  return r.link?.vfs ?? [];
}

/** A sysctl of the handle's netns (/proc/sys/net is per namespace). */
export async function getSysctl(h: NetHandle, key: string): Promise<string> {
  const [r] = await h.run([{ op: 'sysctl.get', key }]);
  return r.value ?? '';
}

export async function setSysctl(h: NetHandle, key: string, value: string): Promise<void> {
  await h.run([{ op: 'sysctl.set', key, value }]);
}

/** Creates a tun/tap in the handle's netns; on failure nothing is left behind. `fds`: the
 * queue fds when returnFds was set, owned by the caller. */
export async function createTun(h: NetHandle, spec: Omit<TunAddOp, 'op'>): Promise<{ index: number; fds: number[] }> {
  const [r] = await h.run([{ op: 'tun.add', ...spec }]);
  return { index: r.index ?? 0, fds: r.fds ?? [] };
}

/** True when `file` exists and is a network namespace; false when missing or another kind. */
export function isNetns(file: string): boolean {
  try {
    identifyNetns(file);
    return true;
  } catch (err) {
    if (err instanceof NetnsError && (err.reason === 'missing' || err.reason === 'not-netns')) return false;
    throw err;
  }
}
