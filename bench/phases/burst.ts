// Burst: N sandboxes attached at once (a node starting many pods together), then all detached
// at once, one contender at a time. Each call is timed from the burst's start, as its caller
// waits that long; the report gives p50/p99 of those and the wall time of the whole burst, and
// for the detach burst also the wall time until every sandbox's devices are gone. With several
// rounds (--burst-rounds) every contender bursts once per round, in a rotated order, and the
// walls reported are the medians.
import type { Lineup } from '../lib/lineup.js';
import type { Progress } from '../lib/progress.js';
import type { BurstResult } from '../lib/results.js';
import { freshSandboxes, retireUsed } from '../lib/sandboxes.js';
import { nowMs, summarize } from '../lib/stats.js';
import type { World } from '../lib/world.js';
import { goneAfter } from '../lib/gone.js';

export async function runBurst(world: World, lineup: Lineup, progress: Progress, opts: { size: number; rounds?: number }): Promise<BurstResult[]> {
  lineup.beginPhase('burst');
  const rounds = opts.rounds ?? 1;
  const entries = lineup.network;
  const results = entries.map((e): BurstResult => ({
    contender: e.contender.name, size: opts.size, attach: [], detach: [], attachWallMs: 0, detachWallMs: 0, attachWalls: [], detachWalls: [], errors: [],
  }));
  const gone: (number | undefined)[][] = entries.map(() => []);
  progress.begin(`burst (${opts.size} at once${rounds > 1 ? `, ${rounds} rounds` : ''})`, entries.length * rounds);
  for (let round = 0; round < rounds; round++) {
    // A contender goes first, then last, in turn: none always bursts on a machine just warmed.
    for (let k = 0; k < entries.length; k++) {
      const i = (round + k) % entries.length;
      gone[i]!.push(await burstOnce(world, entries[i]!, results[i]!, opts.size));
      progress.tick(entries[i]!.contender.name);
    }
  }
  const median = (xs: number[]) => summarize(xs).p50;
  results.forEach((r, i) => {
    r.attachWallMs = median(r.attachWalls!);
    r.detachWallMs = median(r.detachWalls!);
    if (gone[i]!.every((g) => g !== undefined)) r.goneWallMs = median(gone[i] as number[]);
    if (rounds === 1) {
      delete r.attachWalls;
      delete r.detachWalls;
    }
  });
  progress.end();
  return results;
}

/** One burst of one contender: its calls and walls go into r; answers its gone wall. */
async function burstOnce(world: World, entry: Lineup['network'][number], r: BurstResult, size: number): Promise<number | undefined> {
  const c = entry.contender;
  const [batch] = await freshSandboxes(world, [[entry.source, size]]);
  await c.prepare?.(size);
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
  r.attachWalls!.push(nowMs() - t0);
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
  r.detachWalls!.push(nowMs() - t0);
  const goneMs = await Promise.all(gone);
  await c.settle?.();
  for (const sb of batch) entry.source.done(sb);
  await retireUsed(world, [entry.source]);
  return goneMs.length && goneMs.every((g) => g !== undefined) ? Math.max(...(goneMs as number[])) : undefined;
}
