// The VM runtimes' attaches (Kata veth+tap with tc redirect, KubeVirt tap binding), for the
// contenders that can do them (knit, and the C floor doing the same kernel work): fresh sandbox, attach, detach, as in the latency
// run. A flavor whose first attach fails is recorded as skipped with the reason.
import type { Flavor } from '../lib/contender.js';
import type { Lineup } from '../lib/lineup.js';
import type { Progress } from '../lib/progress.js';
import type { VariantResult } from '../lib/results.js';
import { freshSandboxes, retireUsed } from '../lib/sandboxes.js';
import type { World } from '../lib/world.js';
import { attachDetach } from './measure.js';

const VM_FLAVORS: Flavor[] = ['kata-tcfilter', 'kubevirt-tap'];

export async function runVariants(world: World, lineup: Lineup, progress: Progress, opts: { iterations: number }): Promise<VariantResult[]> {
  lineup.beginPhase('vm runtimes');
  const results: VariantResult[] = [];
  const plan = lineup.network.flatMap((e) => VM_FLAVORS.filter((f) => e.contender.flavors.includes(f)).map((f) => [e, f] as const));
  if (plan.length === 0) return results;
  progress.begin('vm runtimes', plan.length * opts.iterations);
  for (const [entry, flavor] of plan) {
    const r: VariantResult = { contender: entry.contender.name, flavor, attach: [], detach: [] };
    results.push(r);
    for (let i = 0; i < opts.iterations; i++) {
      const [[sb]] = await freshSandboxes(world, [[entry.source, 1]]);
      const out = await attachDetach(entry.contender, sb, flavor);
      await entry.contender.settle?.();
      entry.source.done(sb);
      if (out.error) {
        r.skipped = out.error;
        progress.note(`${entry.contender.name} ${flavor}: skipped (${out.error})`);
        progress.tick('', opts.iterations - i);
        break;
      }
      r.attach.push(out.attachMs!);
      r.detach.push(out.detachMs!);
      if (out.goneMs !== undefined) (r.gone ??= []).push(out.goneMs);
      progress.tick(`${entry.contender.name} ${flavor}`);
    }
    await retireUsed(world, [entry.source]);
  }
  progress.end();
  return results;
}
