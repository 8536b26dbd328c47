// Scale: attach latency with 10, 100, 1,000 (...) of the contender's own sandboxes already
// attached. Background sandboxes are filled untimed (their netns made first), then `samples`
// fresh sandboxes per contender are attached and detached, alternating contenders as in the
// latency run. A daemon's VmRSS is read at every level. Background sandboxes stay attached
// to the end; the run's cleanup removes them with their netns.
import type { Entry, Lineup } from '../lib/lineup.js';
import type { Progress } from '../lib/progress.js';
import type { ScalePoint } from '../lib/results.js';
import { freshSandboxes, retireUsed } from '../lib/sandboxes.js';
import type { Sandbox } from '../lib/contender.js';
import type { World } from '../lib/world.js';
import { rssKiB } from '../lib/daemon.js';
import { attachDetach, rotate, timed } from './measure.js';

/** Background fills run this many attaches at once (untimed; only speeds the run up). */
const FILL_CONCURRENCY = 4;
/** Netns made per `ip -batch` exec while filling. */
const FILL_CHUNK = 100;

export async function runScale(
  world: World,
  lineup: Lineup,
  progress: Progress,
  opts: { levels: number[]; samples: number },
): Promise<{ levels: number[]; points: ScalePoint[] }> {
  lineup.beginPhase('scale');
  const levels = [...opts.levels].sort((a, b) => a - b);
  const points: ScalePoint[] = [];
  const background = new Map<string, Sandbox[]>();
  for (const level of levels) {
    const entries = lineup.network;
    progress.begin(`scale: filling to ${level} sandboxes each`, entries.length * level);
    for (const entry of entries) await fill(world, lineup, entry, level, background, (n) => progress.tick(entry.contender.name, n));
    progress.end();

    const byName = new Map<string, ScalePoint>();
    for (const entry of lineup.network) {
      const pid = entry.contender.daemonPid?.();
      const point: ScalePoint = { contender: entry.contender.name, level, attach: [], detach: [], errors: [] };
      if (pid !== undefined) point.rssKiB = await rssKiB(pid);
      byName.set(entry.contender.name, point);
      points.push(point);
    }
    progress.begin(`scale: ${opts.samples} samples at ${level}`, opts.samples);
    for (let s = 0; s < opts.samples; s++) {
      const order = rotate(lineup.network, s);
      const sandboxes = await freshSandboxes(world, order.map((e) => [e.source, 1]));
      for (const [i, entry] of order.entries()) {
        const out = await attachDetach(entry.contender, sandboxes[i][0]);
        await entry.contender.settle?.();
        entry.source.done(sandboxes[i][0]);
        const point = byName.get(entry.contender.name)!;
        if (out.error) {
          point.errors.push(out.error);
          lineup.failed(entry, out.error);
        } else {
          point.attach.push(out.attachMs!);
          point.detach.push(out.detachMs!);
        }
      }
      progress.tick();
    }
    await retireUsed(world, lineup.network.map((e) => e.source));
    progress.end();
  }
  return { levels, points };
}

/** Attach background sandboxes until `level` of this contender's are attached. */
async function fill(
  world: World,
  lineup: Lineup,
  entry: Entry,
  level: number,
  background: Map<string, Sandbox[]>,
  tick: (n: number) => void,
): Promise<void> {
  const attached = background.get(entry.contender.name) ?? [];
  background.set(entry.contender.name, attached);
  tick(attached.length);
  while (attached.length < level && lineup.entries.includes(entry)) {
    const [chunk] = await freshSandboxes(world, [[entry.source, Math.min(FILL_CHUNK, level - attached.length)]]);
    let next = 0;
    await Promise.all(
      Array.from({ length: FILL_CONCURRENCY }, async () => {
        while (next < chunk.length) {
          const sb = chunk[next++];
          try {
            await timed(() => entry.contender.attach(sb, 'runc'));
            attached.push(sb);
            tick(1);
          } catch (e) {
            lineup.failed(entry, `background attach ${sb.id}: ${(e as Error).message}`);
            if (!lineup.entries.includes(entry)) return;
          }
        }
      }),
    );
  }
}
