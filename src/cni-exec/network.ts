// A CNI network as a whole, for start-up and NodeStatus: the chain's plugins exist and speak
// the list's cniVersion (VERSION), and the chain's STATUS where the plugins define it.
import type { NetworkSpec } from '../base/strategy.js';
import { loadConflist } from './conflist.js';
import { gcChain, negotiateVersions, statusChain } from './chain.js';

const envOf = (net: NetworkSpec) => ({ pluginDirs: net.cni!.pluginDirs, cacheDir: net.cni!.cacheDir, timeoutMs: net.cni!.timeoutMs });

/** Throws, naming the plugin, when the chain cannot run here. */
export async function ensureChain(net: NetworkSpec): Promise<void> {
  await negotiateVersions(await loadConflist(net.cni!), envOf(net));
}

/** The chain's STATUS in one sentence; problem set when it is not ready. */
export async function chainStatus(net: NetworkSpec): Promise<{ status: string; problem?: string }> {
  let list;
  try {
    list = await loadConflist(net.cni!);
  } catch (err) {
    return { status: 'conflist unusable', problem: (err as Error).message };
  }
  const s = await statusChain(list, envOf(net));
  if (!s.supported) return { status: `STATUS not supported: the chain's cniVersion ${list.cniVersion} is below 1.1.0, where CNI defines STATUS` };
  return s.problem ? { status: 'not ready', problem: s.problem } : { status: 'ready' };
}

/** knit's GC for a CNI network: libcni's GC with the attachments knit's records still hold;
 * cached attachments of the network that none holds (a runtime's before a migration, or a
 * crash's) are DEL'd. */
export async function gcNetwork(net: NetworkSpec, valid: { containerId: string; ifName: string }[]) {
  return gcChain(await loadConflist(net.cni!), valid, envOf(net));
}
