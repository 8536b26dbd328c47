// The main comparison: warm-up, then `iterations` rounds; in each round every contender
// attaches and detaches one fresh sandbox, in an order rotated every round, so drift on a
// shared machine (other load, netns teardown in the background) hits all contenders alike.
import type { Lineup } from '../lib/lineup.js';
import type { Progress } from '../lib/progress.js';
import type { LatencySamples } from '../lib/results.js';
import { freshSandboxes, retireUsed } from '../lib/sandboxes.js';
import type { World } from '../lib/world.js';
import { attachDetach, rotate } from './measure.js';

/** Delete used netns every this many rounds, so their count stays small. */
const RETIRE_EVERY = 25;

export async function runLatency(
  world: World,
  lineup: Lineup,
  progress: Progress,
  opts: { warmup: number; iterations: number },
): Promise<Record<string, LatencySamples>> {
  lineup.beginPhase('latency');
  const samples: Record<string, LatencySamples> = {};
  for (const e of lineup.entries) samples[e.contender.name] = { attach: [], detach: [], errors: [] };
  const rounds = opts.warmup + opts.iterations;
  progress.begin(`latency (${opts.warmup} warm-up + ${opts.iterations} rounds)`, rounds);
  for (let round = 0; round < rounds; round++) {
    const entries = rotate(lineup.entries, round);
    const sandboxes = await freshSandboxes(world, entries.map((e) => [e.source, 1]));
    for (const [i, entry] of entries.entries()) {
      const sb = sandboxes[i][0];
      const out = await attachDetach(entry.contender, sb);
      await entry.contender.settle?.();
      entry.source.done(sb);
      const s = samples[entry.contender.name];
      if (out.error) {
        s.errors.push(out.error);
        lineup.failed(entry, out.error);
      } else if (round >= opts.warmup) {
        s.attach.push(out.attachMs!);
        s.detach.push(out.detachMs!);
        if (out.goneMs !== undefined) (s.gone ??= []).push(out.goneMs);
      }
    }
    if ((round + 1) % RETIRE_EVERY === 0) await retireUsed(world, lineup.entries.map((e) => e.source));
    progress.tick(round < opts.warmup ? '(warm-up)' : '');
  }
  await retireUsed(world, lineup.entries.map((e) => e.source));
  progress.end();
  return samples;
}
