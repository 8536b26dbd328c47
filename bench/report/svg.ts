// bench/results/latest.svg, written by hand (no chart dependency): the attach and detach
// latency distributions per contender on one shared log axis (every sample as a dot, box
// p25–p75, p50 line, whiskers p10–p90, p99 diamond), then the churn rates and the scale curve
// when the run had them.
import type { BenchResults } from '../lib/results.js';
import { percentile, summarize } from '../lib/stats.js';
import { color, labelOf, ms } from './format.js';

const WIDTH = 960;
const LEFT = 190; // label column
const RIGHT = 110; // room for the p50 value
const ROW = 34;
const FONT = 'font-family="Helvetica, Arial, sans-serif"';

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const f1 = (v: number) => v.toFixed(1);

function text(x: number, y: number, s: string, attrs = ''): string {
  const size = attrs.includes('font-size') ? '' : ' font-size="12"';
  return `<text x="${f1(x)}" y="${f1(y)}" ${FONT}${size} ${attrs}>${esc(s)}</text>`;
}

/** A log10 axis: decade bounds around [lo, hi] mapped onto [x0, x1]. */
class LogAxis {
  readonly lo: number;
  readonly hi: number;
  constructor(min: number, max: number, readonly x0: number, readonly x1: number) {
    this.lo = Math.floor(Math.log10(Math.max(min, 1e-4)));
    this.hi = Math.max(this.lo + 1, Math.ceil(Math.log10(Math.max(max, 1e-4))));
  }
  at(v: number): number {
    const l = Math.log10(Math.max(v, 10 ** this.lo));
    return this.x0 + ((l - this.lo) / (this.hi - this.lo)) * (this.x1 - this.x0);
  }
  /** Decade ticks, labelled, and 2/5 minor ticks. */
  ticks(): Array<{ v: number; major: boolean }> {
    const out: Array<{ v: number; major: boolean }> = [];
    for (let e = this.lo; e <= this.hi; e++) {
      out.push({ v: 10 ** e, major: true });
      if (e < this.hi) out.push({ v: 2 * 10 ** e, major: false }, { v: 5 * 10 ** e, major: false });
    }
    return out;
  }
}

const tickLabel = (v: number) => (v >= 1 ? String(Math.round(v)) : String(Number(v.toPrecision(1))));

/** Vertical grid lines + labels for a horizontal log axis, along [top, bottom]. */
function xGrid(axis: LogAxis, top: number, bottom: number, unit: string): string[] {
  const out: string[] = [];
  for (const t of axis.ticks()) {
    const x = axis.at(t.v);
    out.push(`<line x1="${f1(x)}" y1="${f1(top)}" x2="${f1(x)}" y2="${f1(bottom)}" stroke="${t.major ? '#ccc' : '#eee'}"/>`);
    if (t.major || axis.hi - axis.lo <= 2) out.push(text(x, bottom + 14, tickLabel(t.v), `text-anchor="middle" fill="#555" font-size="11"`));
  }
  out.push(text(axis.x1, bottom + 28, unit, `text-anchor="end" fill="#555" font-size="11"`));
  return out;
}

/** Deterministic jitter in [-1, 1] so the chart is the same for the same data. */
function jitter(i: number): number {
  const x = Math.sin(i * 12.9898) * 43758.5453;
  return (x - Math.floor(x)) * 2 - 1;
}

const TITLES = {
  attach: 'Attach latency',
  detach: 'Detach latency',
  gone: 'Detach until the devices are gone from the kernel (call start → sandbox netns holds only lo)',
} as const;

function distributionPanel(r: BenchResults, op: keyof typeof TITLES, axis: LogAxis, top: number): { svg: string[]; height: number } {
  const names = Object.keys(r.latency).filter((n) => (r.latency[n][op]?.length ?? 0) > 0);
  const out: string[] = [text(16, top + 16, TITLES[op], 'font-size="15" font-weight="bold"')];
  const plotTop = top + 28;
  const plotBottom = plotTop + names.length * ROW;
  out.push(...xGrid(axis, plotTop, plotBottom, 'ms (log scale)'));
  names.forEach((name, row) => {
    const samples = r.latency[name][op] ?? [];
    const s = summarize(samples);
    const cy = plotTop + row * ROW + ROW / 2;
    const c = color(name);
    out.push(text(LEFT - 10, cy + 4, labelOf(r, name), 'text-anchor="end"'));
    samples.forEach((v, i) => {
      const y = cy + jitter(i + 1) * (ROW * 0.32);
      out.push(`<circle cx="${f1(axis.at(v))}" cy="${f1(y)}" r="1.6" fill="${c}" fill-opacity="0.5"/>`);
    });
    const sorted = [...samples].sort((a, b) => a - b);
    const [x10, x25, x50, x75, x90, x99] = [10, 25, 50, 75, 90, 99].map((p) => axis.at(percentile(sorted, p)));
    const h = ROW * 0.5;
    out.push(`<line x1="${f1(x10)}" y1="${f1(cy)}" x2="${f1(x25)}" y2="${f1(cy)}" stroke="${c}" stroke-width="1.5"/>`);
    out.push(`<line x1="${f1(x75)}" y1="${f1(cy)}" x2="${f1(x90)}" y2="${f1(cy)}" stroke="${c}" stroke-width="1.5"/>`);
    out.push(`<rect x="${f1(x25)}" y="${f1(cy - h / 2)}" width="${f1(Math.max(1, x75 - x25))}" height="${f1(h)}" fill="${c}" fill-opacity="0.18" stroke="${c}" stroke-width="1.5"/>`);
    out.push(`<line x1="${f1(x50)}" y1="${f1(cy - h / 2 - 2)}" x2="${f1(x50)}" y2="${f1(cy + h / 2 + 2)}" stroke="${c}" stroke-width="3"/>`);
    out.push(`<path d="M${f1(x99)},${f1(cy - 5)} l5,5 l-5,5 l-5,-5 z" fill="${c}"/>`);
    out.push(text(WIDTH - RIGHT + 12, cy + 4, `p50 ${ms(s.p50)} ms`, `fill="${c}"`));
  });
  out.push(`<rect x="${LEFT}" y="${f1(plotTop)}" width="${WIDTH - LEFT - RIGHT}" height="${f1(plotBottom - plotTop)}" fill="none" stroke="#999"/>`);
  return { svg: out, height: plotBottom - top + 36 };
}

function churnPanel(r: BenchResults, top: number): { svg: string[]; height: number } {
  const best = new Map<string, number>();
  for (const c of r.churn ?? []) best.set(c.contender, Math.max(best.get(c.contender) ?? 0, c.cycles / (c.seconds || 1)));
  const names = [...best.keys()];
  const out: string[] = [text(16, top + 16, 'Churn: attach+detach cycles per second (best concurrency, log scale)', 'font-size="15" font-weight="bold"')];
  const plotTop = top + 28;
  const plotBottom = plotTop + names.length * ROW;
  const values = [...best.values()].filter((v) => v > 0);
  const axis = new LogAxis(Math.min(...values), Math.max(...values), LEFT, WIDTH - RIGHT);
  out.push(...xGrid(axis, plotTop, plotBottom, 'cycles/s'));
  names.forEach((name, row) => {
    const cy = plotTop + row * ROW + ROW / 2;
    const v = best.get(name)!;
    out.push(text(LEFT - 10, cy + 4, labelOf(r, name), 'text-anchor="end"'));
    out.push(`<rect x="${LEFT}" y="${f1(cy - ROW * 0.3)}" width="${f1(Math.max(1, axis.at(v) - LEFT))}" height="${f1(ROW * 0.6)}" fill="${color(name)}" fill-opacity="0.75"/>`);
    out.push(text(WIDTH - RIGHT + 12, cy + 4, `${v.toFixed(1)}/s`, `fill="${color(name)}"`));
  });
  return { svg: out, height: plotBottom - top + 36 };
}

function scalePanel(r: BenchResults, top: number): { svg: string[]; height: number } {
  const points = r.scale!.points.filter((p) => p.attach.length > 0);
  const names = [...new Set(points.map((p) => p.contender))];
  const height = 320;
  const out: string[] = [text(16, top + 16, 'Scale: attach latency with N sandboxes already attached (p50, whisker to p90)', 'font-size="15" font-weight="bold"')];
  const plotTop = top + 46;
  const plotBottom = plotTop + height - 70;
  const levels = r.scale!.levels;
  const xAxis = new LogAxis(Math.min(...levels), Math.max(...levels), LEFT + 24, WIDTH - RIGHT - 24); // inset: end points off the frame
  const stats = points.map((p) => ({ p, s: summarize(p.attach) }));
  const yLo = Math.floor(Math.log10(Math.min(...stats.map((x) => x.s.p50))));
  const yHi = Math.max(yLo + 1, Math.ceil(Math.log10(Math.max(...stats.map((x) => x.s.p90)))));
  const y = (v: number) => plotBottom - ((Math.log10(v) - yLo) / (yHi - yLo)) * (plotBottom - plotTop);
  for (const level of levels) {
    const x = xAxis.at(level);
    out.push(`<line x1="${f1(x)}" y1="${f1(plotTop)}" x2="${f1(x)}" y2="${f1(plotBottom)}" stroke="#ddd"/>`);
    out.push(text(x, plotBottom + 14, String(level), 'text-anchor="middle" fill="#555" font-size="11"'));
  }
  out.push(text(WIDTH - RIGHT, plotBottom + 28, 'sandboxes already attached (log scale)', 'text-anchor="end" fill="#555" font-size="11"'));
  for (let e = yLo; e <= yHi; e++) {
    out.push(`<line x1="${LEFT}" y1="${f1(y(10 ** e))}" x2="${WIDTH - RIGHT}" y2="${f1(y(10 ** e))}" stroke="#ccc"/>`);
    out.push(text(LEFT - 6, y(10 ** e) + 4, `${tickLabel(10 ** e)} ms`, 'text-anchor="end" fill="#555" font-size="11"'));
  }
  names.forEach((name, i) => {
    const mine = stats.filter((x) => x.p.contender === name).sort((a, b) => a.p.level - b.p.level);
    const c = color(name);
    out.push(`<polyline fill="none" stroke="${c}" stroke-width="2" points="${mine.map((x) => `${f1(xAxis.at(x.p.level))},${f1(y(x.s.p50))}`).join(' ')}"/>`);
    for (const x of mine) {
      const px = xAxis.at(x.p.level);
      out.push(`<line x1="${f1(px)}" y1="${f1(y(x.s.p50))}" x2="${f1(px)}" y2="${f1(y(x.s.p90))}" stroke="${c}"/>`);
      out.push(`<circle cx="${f1(px)}" cy="${f1(y(x.s.p50))}" r="3.5" fill="${c}"/>`);
      if (x.p.rssKiB) out.push(text(px + 6, y(x.s.p50) + 14, `RSS ${(x.p.rssKiB / 1024).toFixed(0)} MiB`, `fill="${c}" font-size="10"`));
    }
    const lx = LEFT + i * 180; // legend: one row between the title and the plot
    out.push(`<rect x="${lx}" y="${f1(top + 29)}" width="14" height="4" fill="${c}"/>`);
    out.push(text(lx + 20, top + 35, labelOf(r, name), `fill="${c}" font-size="11"`));
  });
  out.push(`<rect x="${LEFT}" y="${f1(plotTop)}" width="${WIDTH - LEFT - RIGHT}" height="${f1(plotBottom - plotTop)}" fill="none" stroke="#999"/>`);
  return { svg: out, height };
}

export function renderSvg(r: BenchResults): string {
  const all = Object.values(r.latency).flatMap((s) => [...s.attach, ...s.detach, ...(s.gone ?? [])]);
  const body: string[] = [];
  let y = 10;
  body.push(text(16, y + 18, `knit bench — ${r.run.startedAt} (${r.run.mode}, ${r.run.options.iterations} rounds, run ${r.run.prefix})`, 'font-size="16" font-weight="bold"'));
  body.push(text(16, y + 36, 'dots: every sample · box: p25–p75 · thick line: p50 · whiskers: p10–p90 · diamond: p99', 'fill="#555" font-size="11"'));
  y += 48;
  if (all.length) {
    const axis = new LogAxis(Math.min(...all), Math.max(...all), LEFT, WIDTH - RIGHT);
    for (const op of ['attach', 'detach', 'gone'] as const) {
      if (op === 'gone' && !Object.values(r.latency).some((s) => s.gone?.length)) continue;
      const p = distributionPanel(r, op, axis, y);
      body.push(...p.svg);
      y += p.height;
    }
  }
  if (r.churn?.length) {
    const p = churnPanel(r, y);
    body.push(...p.svg);
    y += p.height;
  }
  if (r.scale?.points.some((p) => p.attach.length)) {
    const p = scalePanel(r, y);
    body.push(...p.svg);
    y += p.height;
  }
  const height = Math.ceil(y + 10);
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}">`,
    `<rect width="${WIDTH}" height="${height}" fill="#fff"/>`,
    ...body,
    '</svg>',
    '',
  ].join('\n');
}
