// Churn: attach/detach cycles back to back for a fixed time, one contender at a time, at each
// concurrency level; the report keeps the level with the most cycles per second as that
// contender's highest sustained rate. Every cycle gets a fresh netns, as a new pod would: they
// are made in bursts of BURST per worker with the clock stopped, and only the time spent
// cycling counts.
import type { Entry, Lineup } from '../lib/lineup.js';
import type { Progress } from '../lib/progress.js';
import type { ChurnResult } from '../lib/results.js';
import { freshSandboxes, retireUsed } from '../lib/sandboxes.js';
import { nowMs } from '../lib/stats.js';
import type { World } from '../lib/world.js';
import { attachDetach } from './measure.js';

/** Cycles per worker between two clock-stopped netns refills. */
const BURST = 25;

export async function runChurn(
  world: World,
  lineup: Lineup,
  progress: Progress,
  opts: { seconds: number; concurrency: number[] },
): Promise<ChurnResult[]> {
  lineup.beginPhase('churn');
  const results: ChurnResult[] = [];
  const plan = lineup.entries.flatMap((e) =>
    [...new Set(opts.concurrency.map((c) => Math.min(c, e.contender.maxConcurrency)))].map((c) => [e, c] as const),
  );
  progress.begin(`churn (${opts.seconds} s per contender and concurrency)`, plan.length);
  for (const [entry, concurrency] of plan) {
    if (!lineup.entries.includes(entry)) continue; // dropped meanwhile
    results.push(await churnOne(world, lineup, entry, concurrency, opts.seconds, (d) => progress.tick(d, 0)));
    progress.tick(`${entry.contender.name} ×${concurrency}`);
    await retireUsed(world, [entry.source]);
  }
  progress.end();
  return results;
}

async function churnOne(
  world: World,
  lineup: Lineup,
  entry: Entry,
  concurrency: number,
  seconds: number,
  status: (detail: string) => void,
): Promise<ChurnResult> {
  const result: ChurnResult = { contender: entry.contender.name, concurrency, seconds: 0, cycles: 0, errors: [], attach: [], detach: [] };
  const limitMs = seconds * 1000;
  let timedMs = 0;
  while (timedMs < limitMs && result.errors.length < 5 && lineup.entries.includes(entry)) {
    // a burst: fresh netns for every cycle, made (and later deleted) with the clock stopped
    const [batch] = await freshSandboxes(world, [[entry.source, concurrency * BURST]]);
    const t0 = nowMs();
    await Promise.all(
      Array.from({ length: concurrency }, async (_, w) => {
        for (const sb of batch.slice(w * BURST, (w + 1) * BURST)) {
          if (timedMs + (nowMs() - t0) >= limitMs || result.errors.length >= 5) break;
          const out = await attachDetach(entry.contender, sb, 'runc', false);
          if (out.error) {
            result.errors.push(out.error);
            lineup.failed(entry, out.error);
            continue;
          }
          result.cycles++;
          result.attach.push(out.attachMs!);
          result.detach.push(out.detachMs!);
          if (result.cycles % 20 === 0) status(`${entry.contender.name} ×${concurrency}: ${result.cycles} cycles`);
        }
      }),
    );
    timedMs += nowMs() - t0;
    for (const sb of batch) entry.source.done(sb);
    await retireUsed(world, [entry.source]);
  }
  result.seconds = timedMs / 1000;
  return result;
}
