// `npm run bench [-- --full ...]`: knit side by side with Debian's CNI plugins, the kernel floor
// (C rtnetlink and ip -batch) and an empty gRPC call. Writes bench/results/<timestamp>.json,
// latest.json, latest.md and latest.svg. Everything it creates carries the run's kb??? prefix
// and is removed at the end, on Ctrl-C and on failure.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, USAGE, type BenchOptions } from './lib/args.js';
import { CONTENDERS } from './contenders/index.js';
import { Lineup } from './lib/lineup.js';
import { Progress } from './lib/progress.js';
import type { BenchResults } from './lib/results.js';
import { sweepPrefix, World } from './lib/world.js';
import { runLatency } from './phases/latency.js';
import { runChurn } from './phases/churn.js';
import { runScale } from './phases/scale.js';
import { runVariants } from './phases/variants.js';
import { runBurst } from './phases/burst.js';
import { runSoak } from './phases/soak.js';
import { runBoot } from './phases/boot.js';
import { procMemory } from './lib/knit-process.js';
import { renderMarkdown } from './report/markdown.js';
import { renderSvg } from './report/svg.js';
import { renderSoakSvg } from './report/soak-svg.js';
import { floorName, ms, ratio } from './report/format.js';
import { summarize } from './lib/stats.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const log = (line: string) => process.stderr.write(`${line}\n`);

async function main(): Promise<number> {
  let opts: BenchOptions;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (e) {
    log((e as Error).message);
    return 2;
  }
  if (opts.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (opts.report) {
    const r = JSON.parse(readFileSync(opts.report, 'utf8')) as BenchResults;
    writeResults(r, opts.outDir ?? path.join(repoRoot, 'bench', 'results'), false);
    return 0;
  }
  if (process.getuid?.() !== 0) {
    log('bench: needs root (it creates netns, veths and bridges)');
    return 1;
  }
  if (opts.cleanup) {
    await sweepPrefix(opts.cleanup, log);
    return 0;
  }
  const unknown = (opts.only ?? []).filter((n) => !CONTENDERS.some((c) => c.name === n));
  if (unknown.length) {
    log(`--only: unknown contender ${unknown.join(', ')} (know ${CONTENDERS.map((c) => c.name).join(', ')})`);
    return 2;
  }

  const world = await World.create();
  const progress = new Progress();
  const lineup = new Lineup(world, progress);
  world.onCleanup('contenders', () => lineup.teardown());
  let interrupted = false;
  let cleaning: Promise<void> | undefined;
  const cleanupOnce = (say: (l: string) => void) => (cleaning ??= world.cleanup(say));
  const abort = (why: string, code: number) => {
    if (interrupted) return;
    interrupted = true;
    log(`\nbench: ${why}: cleaning up ${world.prefix}*`);
    void cleanupOnce(log).finally(() => process.exit(code));
  };
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(sig, () => abort(sig, 130));
  process.on('uncaughtException', (e) => abort(`uncaught ${e.stack ?? e}`, 1));
  process.on('unhandledRejection', (e) => abort(`unhandled rejection ${(e as Error)?.stack ?? e}`, 1));

  const startedAt = new Date();
  log(`bench: run ${world.prefix} (${opts.full ? 'full' : 'quick'}); scratch ${world.scratch}`);
  try {
    for (const c of CONTENDERS) if (opts.only ? opts.only.includes(c.name) : !c.optIn) await lineup.add(c.make(), c.tag);
    if (lineup.entries.length === 0) throw new Error('no contender could be set up');
    const recordRss = (key: 'idle' | 'afterLatency') => {
      for (const { contender, info } of lineup.entries) {
        const pid = contender.daemonPid?.();
        const m = pid === undefined ? undefined : procMemory(pid);
        if (m) (info.rssKiB ??= {})[key] = Math.round(m.rss / 1024);
      }
    };
    recordRss('idle');

    const results: BenchResults = {
      version: 1,
      run: {
        prefix: world.prefix,
        mode: opts.full ? 'full' : 'quick',
        startedAt: startedAt.toISOString(),
        finishedAt: '',
        host: { kernel: os.release(), cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model ?? '?', node: process.version, loadavg: os.loadavg() },
        options: { ...opts },
      },
      contenders: lineup.infos,
      latency: await runLatency(world, lineup, progress, opts),
    };
    recordRss('afterLatency');
    if (opts.full && !interrupted) {
      results.churn = await runChurn(world, lineup, progress, { seconds: opts.churnSeconds, concurrency: opts.churnConcurrency });
      results.variants = await runVariants(world, lineup, progress, { iterations: opts.variantIterations });
      if (opts.burst > 0) results.burst = await runBurst(world, lineup, progress, { size: opts.burst, rounds: opts.burstRounds });
    }
    if (!opts.full && opts.burstGiven && opts.burst > 0 && !interrupted) results.burst = await runBurst(world, lineup, progress, { size: opts.burst, rounds: opts.burstRounds });
    // Before the scale phase, whose 1,000 sandboxes per contender stay attached to the end: a
    // node's boot is measured on a host without thousands of other links.
    const bootPods = opts.bootPods ?? (opts.full ? 110 : 0);
    if (bootPods > 0 && !interrupted) results.boot = await runBoot(world, progress, { pods: bootPods });
    if (opts.full && !interrupted) results.scale = await runScale(world, lineup, progress, { levels: opts.scaleLevels, samples: opts.scaleSamples });
    const soakCycles = opts.soakCycles ?? (opts.full ? 3000 : 0);
    if (soakCycles > 0 && !interrupted) results.soak = await runSoak(world, lineup, progress, { cycles: soakCycles, concurrency: opts.soakConcurrency });
    results.run.finishedAt = new Date().toISOString();
    if (interrupted) return 130;
    writeResults(results, opts.outDir ?? path.join(repoRoot, 'bench', 'results'));
    printSummary(results);
    return 0;
  } finally {
    if (!interrupted) progress.begin('cleanup');
    await cleanupOnce((l) => progress.note(l)); // on a signal: waits for the cleanup already running
    if (!interrupted) progress.end();
  }
}

function writeResults(r: BenchResults, dir: string, withStamped = true): void {
  mkdirSync(dir, { recursive: true });
  const stamp = r.run.startedAt.replace(/[:.]/g, '-');
  const json = JSON.stringify(r, null, 1);
  if (withStamped) writeFileSync(path.join(dir, `${stamp}.json`), json);
  writeFileSync(path.join(dir, 'latest.json'), json);
  writeFileSync(path.join(dir, 'latest.md'), renderMarkdown(r));
  writeFileSync(path.join(dir, 'latest.svg'), renderSvg(r));
  if (r.soak?.length) writeFileSync(path.join(dir, 'latest-soak.svg'), renderSoakSvg(r));
  log(`bench: wrote ${withStamped ? `${path.join(dir, `${stamp}.json`)}, ` : ''}latest.json, latest.md, latest.svg${r.soak?.length ? ', latest-soak.svg' : ''} in ${dir}`);
}

/** A compact table on stdout: p50s and the ratios (the markdown has p90/p99). */
function printSummary(r: BenchResults): void {
  const floor = floorName(r);
  const p50 = (name: string | undefined, op: 'attach' | 'detach') =>
    name && r.latency[name]?.[op].length ? summarize(r.latency[name][op]).p50 : undefined;
  const rows = [['contender', 'attach p50', 'p99', 'detach p50', 'p99', 'attach ÷CNI', '÷floor']];
  for (const [name, s] of Object.entries(r.latency)) {
    if (!s.attach.length) continue;
    const a = summarize(s.attach);
    const d = summarize(s.detach);
    rows.push([name, ms(a.p50), ms(a.p99), ms(d.p50), ms(d.p99), ratio(a.p50, p50('cni', 'attach')), ratio(a.p50, p50(floor, 'attach'))]);
  }
  const widths = rows[0].map((_, i) => Math.max(...rows.map((row) => row[i].length)));
  for (const row of rows) console.log(row.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  '));
  for (const c of r.contenders.filter((x) => x.skipped)) console.log(`${c.name}: not run (${c.skipped})`);
  for (const c of r.contenders) for (const d of c.dropped ?? []) console.log(`${c.name}: ${d}`);
  console.log('(ms; p90, detach ratios, churn and scale in latest.md)');
}

main().then(
  (code) => process.exit(code),
  (e) => {
    log(`bench: ${(e as Error).stack ?? e}`);
    process.exit(1);
  },
);
