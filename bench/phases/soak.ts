// Soak: the resident memory of each contender that runs a daemon, sampled from /proc while it
// does `cycles` attach/detach cycles back to back at `concurrency`, one contender at a time.
// Every cycle gets a fresh netns, made in bursts with the daemon idle between them, as in churn.
// What a node agent must show here is a plateau: memory that stops growing (bench/README.md,
// "Memory").
import type { Lineup } from '../lib/lineup.js';
import type { Progress } from '../lib/progress.js';
import type { SoakResult } from '../lib/results.js';
import { freshSandboxes, retireUsed } from '../lib/sandboxes.js';
import { nowMs } from '../lib/stats.js';
import type { World } from '../lib/world.js';
import { procMemory } from '../lib/knit-process.js';
import { attachDetach } from './measure.js';

/** Cycles per worker between two netns refills. */
const BURST = 25;

export async function runSoak(
  world: World,
  lineup: Lineup,
  progress: Progress,
  opts: { cycles: number; concurrency: number; samples?: number },
): Promise<SoakResult[]> {
  lineup.beginPhase('soak');
  const results: SoakResult[] = [];
  const entries = lineup.network.filter((e) => e.contender.daemonPid?.() !== undefined);
  const every = Math.max(1, Math.round(opts.cycles / (opts.samples ?? 60)));
  progress.begin(`soak (${opts.cycles} cycles at ×${opts.concurrency}, RSS every ${every})`, entries.length);
  for (const entry of entries) {
    const c = entry.contender;
    const pid = c.daemonPid!()!;
    const concurrency = Math.min(opts.concurrency, c.maxConcurrency);
    const r: SoakResult = { contender: c.name, concurrency, cycles: [], rssKiB: [], rssAnonKiB: [], seconds: 0, errors: [] };
    results.push(r);
    const sample = (done: number) => {
      const m = procMemory(pid);
      if (!m) return;
      r.cycles.push(done);
      r.rssKiB.push(Math.round(m.rss / 1024));
      r.rssAnonKiB.push(Math.round(m.rssAnon / 1024));
    };
    sample(0);
    let done = 0;
    let nextSample = every;
    let busyMs = 0;
    while (done < opts.cycles && r.errors.length < 5 && lineup.entries.includes(entry)) {
      const [batch] = await freshSandboxes(world, [[entry.source, Math.min(concurrency * BURST, opts.cycles - done)]]);
      const t0 = nowMs();
      let next = 0;
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (next < batch.length && r.errors.length < 5) {
            const sb = batch[next++];
            const out = await attachDetach(c, sb, 'runc', false);
            if (out.error) {
              r.errors.push(out.error);
              lineup.failed(entry, out.error);
              continue;
            }
            done++;
            if (done >= nextSample) {
              sample(done);
              nextSample += every;
            }
          }
        }),
      );
      busyMs += nowMs() - t0;
      for (const sb of batch) entry.source.done(sb);
      await retireUsed(world, [entry.source]);
      progress.tick(c.name, 0);
    }
    r.seconds = busyMs / 1000;
    await c.settle?.();
    await new Promise((res) => setTimeout(res, 2000)); // what the daemon does once the calls stop
    sample(done);
    progress.tick(c.name);
  }
  progress.end();
  return results;
}
