// Chains whose attachment knit no longer records: after a node's reboot /run (knit's records)
// is empty while the plugins' state on disk (host-local's leases, libcni's result cache) is not,
// and the runtime's DELs for the old pods find no record. Each such cached attachment is DEL'd
// from its cache entry (the list's config, CNI_ARGS and capability args as its ADD ran), as
// libcni's GC does for attachments no longer valid. Only for a cache dir knit alone writes.
import { parseConflist } from './conflist.js';
import { delChain, type ChainEnv } from './chain.js';
import { listCache } from './cache.js';
import { identifyNetns } from '../net/netns.js';

function liveNetns(path: string): boolean {
  try {
    identifyNetns(path, { rejectHost: true });
    return true;
  } catch {
    return false;
  }
}

export interface StaleSweep {
  deleted: string[];
  errors: string[];
}

/** `held`: "network/containerId/ifName" of every chain knit's records hold. */
export async function delStaleAttachments(cacheDir: string, held: Set<string>, env: Omit<ChainEnv, 'cacheDir'>): Promise<StaleSweep> {
  const out: StaleSweep = { deleted: [], errors: [] };
  for (const c of await listCache(cacheDir)) {
    if (!c.containerId || !c.ifName || !c.config) continue;
    const key = `${c.networkName}/${c.containerId}/${c.ifName}`;
    if (held.has(key)) continue;
    try {
      const list = parseConflist(Buffer.from(c.config, 'base64').toString('utf8'), `cached attachment ${key}`);
      // Its netns went with the reboot (or the pod): the plugins release what lives outside it.
      // One still there (knit's records lost, the pod running) gets its interface taken out too.
      const netns = c.netns && liveNetns(c.netns) ? c.netns : '';
      await delChain(list, { containerId: c.containerId, ifName: c.ifName, netns, args: c.cniArgs ?? [], capabilityArgs: c.capabilityArgs ?? {} }, { ...env, cacheDir });
      out.deleted.push(key);
    } catch (err) {
      out.errors.push(`${key}: ${(err as Error).message}`);
    }
  }
  return out;
}
