// "The link, or undefined if there is none": one RTM_GETLINK by name or index, through
// whatever runs ops (a NetHandle, core's action runner, a strategy's prepare context).
// Loads no addon, so every layer may use it.
import type { LinkInfo, LinkRef, Op, OpResult } from '../base/ops.js';

export type RunOps = (netns: string | undefined, ops: Op[]) => Promise<OpResult[]>;

export async function findLinkIn(runOps: RunOps, netns: string | undefined, link: LinkRef): Promise<LinkInfo | undefined> {
  try {
    const [r] = await runOps(netns, [{ op: 'link.get', link }]);
    return r.link;
  } catch (err) {
    if ((err as { code?: string }).code === 'ENODEV') return undefined;
    throw err;
  }
}
