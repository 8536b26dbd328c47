// The plan's CNI steps, run by the daemon's action runner: `cni.add` runs the recorded chain's
// ADD and answers its result; `cni.del` (its inverse, also after a crash) runs DEL with the
// cached result. A plugin's failure keeps the plugin's name and CNI error code.
import type { CniChainAction, OpResult } from '../base/ops.js';
import { KnitError, CniCode } from '../base/errors.js';
import { identifyNetns, sameNetns, type NetnsId } from '../net/netns.js';
import { parseConflist } from './conflist.js';
import { addChain, delChain, type ChainEnv, type ChainRuntime } from './chain.js';
import { PluginError, type PluginLog } from './invoke.js';
import type { ChainSlots } from './slots.js';


/** The netns path, or '' once it is gone or is no longer the namespace the chain was added in:
 * plugins then release what lives outside it (IPAM leases, host rules) and skip the rest, as
 * the spec asks of DEL. */
function netnsForDel(path: string, expect?: NetnsId): string {
  try {
    const id = identifyNetns(path, { rejectHost: true });
    return !expect || sameNetns(id, expect) ? path : '';
  } catch {
    return '';
  }
}

/** What the daemon lends the chain: its log, the bound on chains at once, and the crash tests'
 * failpoint. */
export interface CniHooks {
  log?: PluginLog;
  beforeAdd?(n: number): void;
  slots?: ChainSlots;
}

export function runCniAction(a: CniChainAction, hooks: CniHooks = {}): Promise<OpResult | void> {
  return hooks.slots ? hooks.slots.run(() => runChain(a, hooks)) : runChain(a, hooks);
}

async function runChain(a: CniChainAction, hooks: CniHooks): Promise<OpResult | void> {
  const list = parseConflist(a.conflist, `network ${a.network}`);
  const { slots: _slots, ...lent } = hooks;
  const env: ChainEnv = { pluginDirs: a.pluginDirs, cacheDir: a.cacheDir, timeoutMs: a.timeoutMs, ...lent };
  const rt: ChainRuntime = { containerId: a.containerId, netns: a.netns, ifName: a.ifName, args: a.args, capabilityArgs: a.capabilityArgs };
  try {
    if (a.op === 'cni.add') return { cniResult: await addChain(list, rt, env) };
    await delChain(list, { ...rt, netns: netnsForDel(a.netns, a.netnsId) }, env);
  } catch (err) {
    if (!(err instanceof PluginError)) throw err;
    throw new KnitError('UNAVAILABLE', `network ${a.network}: ${err.message}${a.op === 'cni.add' ? ' (the chain was rolled back)' : ''}`, {
      cniCode: err.cniCode ?? (err.timedOut ? CniCode.tryAgainLater : CniCode.pluginNotAvailable), cause: err,
    });
  }
}
