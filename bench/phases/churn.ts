// Churn: attach/detach cycles back to back for a fixed time, one contender at a time, at each
// concurrency level (workers each cycling their own netns); the report keeps the level with
// the most cycles per second as that contender's highest sustained rate.
import type { Entry, Lineup } from '../lib/lineup.js';
import type { Progress } from '../lib/progress.js';
import type { ChurnResult } from '../lib/results.js';
import { freshSandboxes, retireUsed } from '../lib/sandboxes.js';
import { nowMs } from '../lib/stats.js';
import type { World } from '../lib/world.js';
import { attachDetach } from './measure.js';

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
  // each worker reuses one netns: after a detach it is empty again, as a restarted pod's would be
  const [workers] = await freshSandboxes(world, [[entry.source, concurrency]]);
  const t0 = nowMs();
  const deadline = t0 + seconds * 1000;
  await Promise.all(
    workers.map(async (base) => {
      for (let cycle = 0; nowMs() < deadline && result.errors.length < 5; cycle++) {
        const out = await attachDetach(entry.contender, { ...base, id: `${base.id}-${cycle}` });
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
  result.seconds = (nowMs() - t0) / 1000;
  for (const w of workers) entry.source.done(w);
  return result;
}
