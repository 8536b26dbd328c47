// bench/results/latest.md: the tables a reader compares (p50/p90/p99 and ratios vs CNI and
// vs the kernel floor), then churn, scale and the VM runtimes when the run had them.
import type { BenchResults, ChurnResult, SoakResult } from '../lib/results.js';
import { summarize } from '../lib/stats.js';
import { floorName, labelOf, ms, ratio } from './format.js';

/** p50 of the time until the devices were gone, or – when not measured. */
const goneP50 = (xs: number[] | undefined) => (xs?.length ? ms(summarize(xs).p50) : '–');

function table(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map((_, i) => (i === 0 ? '---' : '---:'))), ...rows.map(line)].join('\n');
}

function latencySection(r: BenchResults): string {
  const floor = floorName(r);
  const ref = (name: string | undefined, op: 'attach' | 'detach') => (name && r.latency[name]?.[op].length ? summarize(r.latency[name][op]).p50 : undefined);
  const rows = Object.entries(r.latency)
    .filter(([, s]) => s.attach.length > 0)
    .map(([name, s]) => {
      const a = summarize(s.attach);
      const d = summarize(s.detach);
      return [
        labelOf(r, name),
        String(a.n),
        ms(a.p50), ms(a.p90), ms(a.p99),
        ms(d.p50), ms(d.p90), ms(d.p99),
        ratio(a.p50, ref('cni', 'attach')), ratio(a.p50, ref(floor, 'attach')),
        ratio(d.p50, ref('cni', 'detach')), ratio(d.p50, ref(floor, 'detach')),
        goneP50(s.gone),
        String(s.errors.length),
      ];
    });
  const header = ['contender', 'n', 'attach p50', 'p90', 'p99', 'detach p50', 'p90', 'p99', 'attach ÷ CNI', 'attach ÷ floor', 'detach ÷ CNI', 'detach ÷ floor', 'devices gone p50', 'failed calls'];
  const o = r.run.options;
  return [
    '## Attach / detach latency (ms)',
    '',
    `${o.iterations} rounds after ${o.warmup} warm-up; each round every contender attaches and detaches one fresh netns, in rotating order. ` +
      `Ratios are p50 ÷ p50; floor = ${floor ? labelOf(r, floor) : 'none'}. ` +
      '"devices gone": from the start of the detach call until the sandbox netns holds only lo (the kernel has deleted the devices), whenever the call answered.',
    '',
    table(header, rows),
  ].join('\n');
}

function churnSection(churn: ChurnResult[], r: BenchResults): string {
  const best = new Map<string, ChurnResult>();
  for (const c of churn) {
    const rate = c.cycles / (c.seconds || 1);
    const prev = best.get(c.contender);
    if (!prev || rate > prev.cycles / (prev.seconds || 1)) best.set(c.contender, c);
  }
  const rows = [...best.values()].map((c) => {
    const rate = c.cycles / (c.seconds || 1);
    const levels = churn
      .filter((x) => x.contender === c.contender)
      .map((x) => `×${x.concurrency}: ${(x.cycles / (x.seconds || 1)).toFixed(1)}`)
      .join(', ');
    return [labelOf(r, c.contender), `×${c.concurrency}`, rate.toFixed(1), (2 * rate).toFixed(1), ms(summarize(c.attach).p50), ms(summarize(c.detach).p50), levels, String(c.errors.length)];
  });
  return [
    '## Churn (highest sustained rate)',
    '',
    `Back-to-back attach+detach cycles for ${r.run.options.churnSeconds} s per contender and concurrency (clock stopped while fresh netns are made between bursts); ops/s counts attaches and detaches.`,
    '',
    table(['contender', 'best concurrency', 'cycles/s', 'ops/s', 'attach p50 (ms)', 'detach p50 (ms)', 'cycles/s per concurrency', 'errors'], rows),
  ].join('\n');
}

function scaleSection(r: BenchResults): string {
  const rows = r.scale!.points
    .filter((p) => p.attach.length > 0)
    .map((p) => {
      const a = summarize(p.attach);
      const d = summarize(p.detach);
      return [labelOf(r, p.contender), String(p.level), String(a.n), ms(a.p50), ms(a.p90), ms(d.p50), p.rssKiB ? (p.rssKiB / 1024).toFixed(1) : '–'];
    });
  return [
    '## Scale (ms, with N sandboxes already attached)',
    '',
    table(['contender', 'attached', 'n', 'attach p50', 'attach p90', 'detach p50', 'daemon RSS (MiB)'], rows),
  ].join('\n');
}

function variantsSection(r: BenchResults): string {
  const floor = floorName(r);
  const p50 = (xs: number[] | undefined) => (xs?.length ? summarize(xs).p50 : undefined);
  const floorOf = (flavor: string, op: 'attach' | 'detach') => p50(r.variants!.find((v) => v.contender === floor && v.flavor === flavor && !v.skipped)?.[op]);
  const rows = r.variants!.map((v) => {
    if (v.skipped) return [labelOf(r, v.contender), v.flavor, '–', '–', '–', '–', '–', '–', '–', '–', '–', `skipped: ${v.skipped}`];
    const a = summarize(v.attach);
    const d = summarize(v.detach);
    const runc = r.latency[v.contender];
    return [
      labelOf(r, v.contender), v.flavor, String(a.n), ms(a.p50), ms(a.p99), ms(d.p50), goneP50(v.gone),
      ratio(a.p50, p50(runc?.attach)), ratio(d.p50, p50(runc?.detach)),
      ratio(a.p50, floorOf(v.flavor, 'attach')), ratio(d.p50, floorOf(v.flavor, 'detach')), '',
    ];
  });
  const header = ['contender', 'flavor', 'n', 'attach p50', 'attach p99', 'detach p50', 'devices gone p50', 'attach ÷ own runc', 'detach ÷ own runc', 'attach ÷ floor', 'detach ÷ floor', 'note'];
  return [
    '## VM runtimes (ms)',
    '',
    `"own runc" is the same contender's runc p50 in this run's latency table; floor = the same flavor on ${floor ? labelOf(r, floor) : 'no floor'} (veth + tap + a redirect each way).`,
    '',
    table(header, rows),
  ].join('\n');
}

function burstSection(r: BenchResults): string {
  const floor = floorName(r);
  const wall = (name: string | undefined) => r.burst!.find((b) => b.contender === name)?.attachWallMs;
  const rows = r.burst!.map((b) => {
    const a = summarize(b.attach.length ? b.attach : [NaN]);
    const d = summarize(b.detach.length ? b.detach : [NaN]);
    return [
      labelOf(r, b.contender), String(b.size), ms(a.p50), ms(a.p99), ms(b.attachWallMs), ratio(b.attachWallMs, wall(floor)), ratio(b.attachWallMs, wall('cni')), ratio(b.attachWallMs, wall('grpc-addon')),
      ms(d.p50), ms(d.p99), ms(b.detachWallMs), b.goneWallMs === undefined ? '–' : ms(b.goneWallMs), String(b.errors.length),
    ];
  });
  return [
    '## Burst (ms)',
    '',
    `${r.burst![0]?.size ?? 0} sandboxes attached at once, then detached at once, one contender at a time${(r.burst![0]?.attachWalls?.length ?? 1) > 1 ? `, ${r.burst![0]!.attachWalls!.length} rounds in a rotated order (walls: the median of the rounds; each round's in the JSON)` : ''}. Each call is timed from the start of its burst; wall = the whole burst; ratios are wall ÷ wall. "gone" = from the detach burst's start until every sandbox's devices were gone from the kernel.`,
    '',
    table(['contender', 'n', 'attach p50', 'attach p99', 'attach wall', 'wall ÷ floor', 'wall ÷ CNI', 'wall ÷ grpc-addon', 'detach p50', 'detach p99', 'detach wall', 'gone wall', 'failed calls'], rows),
  ].join('\n');
}

const mib = (kib: number | undefined) => (kib === undefined ? '–' : (kib / 1024).toFixed(1));

/** The last third of a soak: its mean and its slope (least squares, MiB per 1,000 cycles). */
export function soakTail(s: SoakResult): { mean: number; slope: number; max: number } {
  const from = Math.floor((s.cycles.length * 2) / 3);
  const xs = s.cycles.slice(from);
  const ys = s.rssKiB.slice(from).map((k) => k / 1024);
  const mx = xs.reduce((a, b) => a + b, 0) / xs.length;
  const my = ys.reduce((a, b) => a + b, 0) / ys.length;
  const sxx = xs.reduce((a, x) => a + (x - mx) ** 2, 0);
  const slope = sxx ? (xs.reduce((a, x, i) => a + (x - mx) * (ys[i]! - my), 0) / sxx) * 1000 : 0;
  return { mean: my, slope, max: Math.max(...s.rssKiB) / 1024 };
}

/** The boot phase's own rows: its "knit-cni" is the shim, not the contender of that name (knit
 * on a CNI chain). */
const BOOT_LABELS: Record<string, string> = {
  'knit-cni': 'knit-cni (the shim), knit\'s daemon starting',
  cni: 'CNI bridge+host-local',
};

function bootSection(r: BenchResults): string {
  const rows = r.boot!.map((b) => {
    const add = summarize(b.addMs.length ? b.addMs : [NaN]);
    const pod = summarize(b.podMs.length ? b.podMs : [NaN]);
    return [BOOT_LABELS[b.contender] ?? b.contender, String(b.pods), ms(b.wallMs), b.daemonReadyMs === undefined ? '–' : ms(b.daemonReadyMs), String(b.retries), ms(add.p50), ms(add.p99), ms(pod.p50), ms(pod.p99), String(b.errors.length)];
  });
  const wall = (name: string) => r.boot!.find((b) => b.contender === name)?.wallMs;
  return [
    '## Boot (ms)',
    '',
    `${r.boot![0]?.pods ?? 0} pods' CNI ADDs at once: through knit-cni with knit's daemon started at the same moment (an ADD before it is ready waits in the shim, up to its daemonWaitSeconds; one answered "try again later", code 11, is retried after 10 s, as the kubelet retries a failed sandbox), and through the bridge plugin. Wall = until every pod had its network (knit ÷ bridge ${ratio(wall('knit-cni'), wall('cni'))}); "per ADD" is each successful exec alone (a shim's wait for the daemon included), "per pod" from the start with its retries.`,
    '',
    table(['contender', 'pods', 'wall', 'daemon ready', 'retried ADDs', 'per ADD p50', 'p99', 'per pod p50', 'p99', 'failed'], rows),
  ].join('\n');
}

function memorySection(r: BenchResults): string {
  const daemons = r.contenders.filter((c) => c.rssKiB);
  const scaleRss = (name: string) => (r.scale?.points ?? []).filter((p) => p.contender === name && p.rssKiB).map((p) => `${p.level}: ${mib(p.rssKiB)}`).join(', ') || '–';
  const rows = daemons.map((c) => {
    const s = r.soak?.find((x) => x.contender === c.name);
    const tail = s && s.cycles.length > 2 ? soakTail(s) : undefined;
    return [
      labelOf(r, c.name), mib(c.rssKiB?.idle), mib(c.rssKiB?.afterLatency), scaleRss(c.name),
      s ? mib(s.rssKiB[0]) : '–', tail ? tail.max.toFixed(1) : '–', tail ? tail.mean.toFixed(1) : '–', tail ? `${tail.slope >= 0 ? '+' : ''}${tail.slope.toFixed(2)}` : '–',
      s ? `${s.cycles[s.cycles.length - 1]} at ×${s.concurrency}` : '–',
    ];
  });
  return [
    '## Memory (daemon RSS, MiB)',
    '',
    'VmRSS of each contender\'s daemon process from /proc: idle (after setup and one probe attach), after the latency run, at each scale level, and over the soak\'s cycles (start, highest, mean and slope of the last third in MiB per 1,000 cycles). Chart: [latest-soak.svg](latest-soak.svg).',
    '',
    table(['contender', 'idle', 'after latency', 'scale (attached: RSS)', 'soak start', 'soak max', 'last third mean', 'slope', 'soak cycles'], rows),
  ].join('\n');
}

export function renderMarkdown(r: BenchResults): string {
  const h = r.run.host;
  const parts = [
    `# knit bench — ${r.run.startedAt} (${r.run.mode})`,
    '',
    `Kernel ${h.kernel}, ${h.cpus} × ${h.cpuModel}, Node ${h.node}, load average at start ${h.loadavg.map((l) => l.toFixed(2)).join(' ')}. ` +
      `Run prefix \`${r.run.prefix}\`. The machine may be shared: compare ratios within this run, not absolute numbers across runs.`,
    '',
    latencySection(r),
  ];
  const skipped = r.contenders.filter((c) => c.skipped);
  if (skipped.length) parts.push('', 'Not in this run:', '', ...skipped.map((c) => `- ${c.label}: ${c.skipped}`));
  const failures = [
    ...Object.entries(r.latency).flatMap(([name, s]) => s.errors.map((e) => `latency, ${labelOf(r, name)}: ${e}`)),
    ...(r.churn ?? []).flatMap((c) => c.errors.map((e) => `churn ×${c.concurrency}, ${labelOf(r, c.contender)}: ${e}`)),
    ...(r.scale?.points ?? []).flatMap((p) => p.errors.map((e) => `scale ${p.level}, ${labelOf(r, p.contender)}: ${e}`)),
    ...(r.soak ?? []).flatMap((s) => s.errors.map((e) => `soak, ${labelOf(r, s.contender)}: ${e}`)),
    ...(r.boot ?? []).flatMap((b) => b.errors.map((e) => `boot, ${labelOf(r, b.contender)}: ${e}`)),
  ];
  if (failures.length) {
    // first few, shortened: the JSON has them all
    parts.push('', `Failed calls (${failures.length}; not in the figures):`, '', ...failures.slice(0, 10).map((f) => `- ${f.length > 300 ? `${f.slice(0, 300)}…` : f}`));
  }
  const dropped = r.contenders.filter((c) => c.dropped?.length);
  if (dropped.length) parts.push('', 'Left a phase early:', '', ...dropped.flatMap((c) => c.dropped!.map((d) => `- ${c.label}: ${d}`)));
  if (r.churn?.length) parts.push('', churnSection(r.churn, r));
  if (r.scale?.points.length) parts.push('', scaleSection(r));
  if (r.variants?.length) parts.push('', variantsSection(r));
  if (r.burst?.length) parts.push('', burstSection(r));
  if (r.boot?.length) parts.push('', bootSection(r));
  if (r.contenders.some((c) => c.rssKiB)) parts.push('', memorySection(r));
  parts.push('', 'Chart: [latest.svg](latest.svg). Raw samples: the run\'s JSON next to this file.', '');
  return parts.join('\n');
}
