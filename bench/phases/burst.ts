// Burst: N sandboxes attached at once (a node starting many pods together), then all detached
// at once, one contender at a time. Each call is timed from the burst's start, as its caller
// waits that long; the report gives p50/p99 of those and the wall time of the whole burst, and
// for the detach burst also the wall time until every sandbox's devices are gone.
import type { Lineup } from '../lib/lineup.js';
import type { Progress } from '../lib/progress.js';
import type { BurstResult } from '../lib/results.js';
import { freshSandboxes, retireUsed } from '../lib/sandboxes.js';
import { nowMs } from '../lib/stats.js';
import type { World } from '../lib/world.js';
import { goneAfter } from '../lib/gone.js';

export async function runBurst(world: World, lineup: Lineup, progress: Progress, opts: { size: number }): Promise<BurstResult[]> {
  lineup.beginPhase('burst');
  const results: BurstResult[] = [];
  progress.begin(`burst (${opts.size} at once)`, lineup.network.length);
  for (const entry of lineup.network) {
    const c = entry.contender;
    const r: BurstResult = { contender: c.name, size: opts.size, attach: [], detach: [], attachWallMs: 0, detachWallMs: 0, errors: [] };
    results.push(r);
    const [batch] = await freshSandboxes(world, [[entry.source, opts.size]]);
    await c.prepare?.(opts.size);
    const attached: typeof batch = [];
    let t0 = nowMs();
    await Promise.all(batch.map(async (sb) => {
      try {
        await c.attach(sb, 'runc');
        r.attach.push(nowMs() - t0);
        attached.push(sb);
      } catch (e) {
        r.errors.push(`attach: ${(e as Error).message}`);
      }
    }));
    r.attachWallMs = nowMs() - t0;
    t0 = nowMs();
    const gone: Promise<number | undefined>[] = [];
    await Promise.all(attached.map(async (sb) => {
      try {
        await c.detach(sb);
        r.detach.push(nowMs() - t0);
        gone.push(goneAfter(sb.netnsPath, t0));
      } catch (e) {
        r.errors.push(`detach: ${(e as Error).message}`);
      }
    }));
    r.detachWallMs = nowMs() - t0;
    const goneMs = await Promise.all(gone);
    if (goneMs.length && goneMs.every((g) => g !== undefined)) r.goneWallMs = Math.max(...(goneMs as number[]));
    await c.settle?.();
    for (const sb of batch) entry.source.done(sb);
    await retireUsed(world, [entry.source]);
    progress.tick(c.name);
  }
  progress.end();
  return results;
}
