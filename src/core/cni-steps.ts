// Where a plan's CNI steps meet core: after the steps ran, each chain ADD's result becomes
// its interface's part of the answer; `knit check` adds each chain's CHECK.
import type { OpResult } from '../base/ops.js';
import type { Step } from '../base/plan.js';
import type { InterfacePart } from '../base/strategy.js';
import { chainPart } from '../cni-exec/result.js';
import { parseConflist } from '../cni-exec/conflist.js';
import { checkChain, pluginConfig } from '../cni-exec/chain.js';
import type { PluginLog } from '../cni-exec/invoke.js';

/** True when the plan runs a CNI chain, whose result is known only once it ran. */
export function hasChain(steps: Step[]): boolean {
  return steps.some((s) => s.do.op === 'cni.add');
}

export function withChainParts(parts: InterfacePart[], steps: Step[], outcomes: OpResult[]): InterfacePart[] {
  let out = parts;
  steps.forEach((s, i) => {
    const cni = outcomes[i]?.cniResult;
    if (s.do.op !== 'cni.add' || !cni) return;
    const ifName = s.do.ifName;
    out = out.map((p) => (p.ifname === ifName ? chainPart(p, cni) : p));
  });
  return out;
}

/** CNI CHECK of every chain a record's plan ran, one sentence per problem. */
export async function checkChains(steps: Step[], log?: PluginLog): Promise<string[]> {
  const problems: string[] = [];
  for (const s of steps) {
    if (s.do.op !== 'cni.add') continue;
    const a = s.do;
    const list = parseConflist(a.conflist, `network ${a.network}`);
    const rt = { containerId: a.containerId, netns: a.netns, ifName: a.ifName, args: a.args, capabilityArgs: a.capabilityArgs };
    const found = await checkChain(list, rt, { pluginDirs: a.pluginDirs, cacheDir: a.cacheDir, timeoutMs: a.timeoutMs, log });
    problems.push(...found.map((p) => `CNI CHECK of network ${a.network}: ${p}`));
  }
  return problems;
}

/** What `knit plan` shows: a chain's step as one step per plugin, each with the configuration
 * it will receive (prevResult comes from the plugin before it at run time). */
export interface DisplayStep { description: string; netns?: string; op: unknown; undo?: unknown }

export function displaySteps(steps: Step[]): DisplayStep[] {
  return steps.flatMap((s): DisplayStep[] => {
    if (s.do.op !== 'cni.add') return [{ description: s.description, netns: s.netns, op: s.do, undo: s.undo }];
    const a = s.do;
    const list = parseConflist(a.conflist, `network ${a.network}`);
    return list.plugins.map((plugin, n) => {
      const config = pluginConfig(list, plugin, undefined, a.capabilityArgs);
      const exec = { containerId: a.containerId, netns: a.netns, ifName: a.ifName, args: a.args };
      return {
        description: `CNI ADD ${n + 1}/${list.plugins.length}: plugin ${plugin.type} of chain ${list.name} for ${a.ifName} (network ${a.network})`,
        op: { op: 'cni.plugin.add', plugin: plugin.type, config, ...exec },
        undo: { op: 'cni.plugin.del', plugin: plugin.type, config, ...exec, note: 'DEL runs in reverse order with the cached result' },
      };
    });
  });
}

/** The chain attachments knit's records hold on one network: CNI GC's valid attachments. */
export function chainAttachments(records: Iterable<{ steps: Step[] }>, network: string): { containerId: string; ifName: string }[] {
  const out: { containerId: string; ifName: string }[] = [];
  for (const r of records) for (const s of r.steps) if (s.do.op === 'cni.add' && s.do.network === network) out.push({ containerId: s.do.containerId, ifName: s.do.ifName });
  return out;
}
