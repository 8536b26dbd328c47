// bench/results/latest-soak.svg, written by hand like latest.svg: each daemon's resident
// memory (VmRSS, solid; its anonymous part, dashed) over the soak's attach/detach cycles, on
// linear axes from 0 MiB, with the last third (where a plateau must show) shaded.
import type { BenchResults } from '../lib/results.js';
import { color } from './format.js';

const WIDTH = 960;
const HEIGHT = 420;
const [LEFT, RIGHT, TOP, BOTTOM] = [70, 200, 50, 60];
const FONT = 'font-family="Helvetica, Arial, sans-serif"';
const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const f1 = (v: number) => v.toFixed(1);
const text = (x: number, y: number, s: string, attrs = '') => `<text x="${f1(x)}" y="${f1(y)}" ${FONT} font-size="12" ${attrs}>${esc(s)}</text>`;

/** A round step for about `n` ticks over [0, max]. */
function step(max: number, n: number): number {
  const raw = max / n;
  const mag = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? raw;
}

export function renderSoakSvg(r: BenchResults): string {
  const soak = (r.soak ?? []).filter((s) => s.cycles.length > 1);
  const maxCycles = Math.max(1, ...soak.flatMap((s) => s.cycles));
  const maxMiB = Math.max(1, ...soak.flatMap((s) => s.rssKiB.map((k) => k / 1024))) * 1.1;
  const x = (c: number) => LEFT + (c / maxCycles) * (WIDTH - LEFT - RIGHT);
  const y = (mib: number) => HEIGHT - BOTTOM - (mib / maxMiB) * (HEIGHT - TOP - BOTTOM);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    text(LEFT, 24, `Daemon memory over attach/detach cycles (${r.run.prefix}, ${r.run.startedAt.slice(0, 16)}Z): RSS solid, its anonymous part dashed`, 'font-size="14" font-weight="bold"'),
    `<rect x="${f1(x((maxCycles * 2) / 3))}" y="${TOP}" width="${f1(x(maxCycles) - x((maxCycles * 2) / 3))}" height="${HEIGHT - TOP - BOTTOM}" fill="#f3f3f3"/>`,
  ];
  const ys = step(maxMiB, 8);
  for (let v = 0; v <= maxMiB; v += ys) {
    out.push(`<line x1="${LEFT}" y1="${f1(y(v))}" x2="${WIDTH - RIGHT}" y2="${f1(y(v))}" stroke="#e2e2e2"/>`, text(LEFT - 6, y(v) + 4, String(v), 'text-anchor="end" fill="#555" font-size="11"'));
  }
  const xs = step(maxCycles, 6);
  for (let c = 0; c <= maxCycles; c += xs) out.push(text(x(c), HEIGHT - BOTTOM + 16, String(c), 'text-anchor="middle" fill="#555" font-size="11"'));
  out.push(text(LEFT - 50, TOP - 10, 'MiB', 'fill="#555" font-size="11"'), text(WIDTH - RIGHT, HEIGHT - BOTTOM + 34, 'cycles', 'text-anchor="end" fill="#555" font-size="11"'));
  out.push(`<rect x="${LEFT}" y="${TOP}" width="${WIDTH - LEFT - RIGHT}" height="${HEIGHT - TOP - BOTTOM}" fill="none" stroke="#999"/>`);
  soak.forEach((s, i) => {
    const c = color(s.contender);
    const line = (vals: number[], dash: string) =>
      `<polyline fill="none" stroke="${c}" stroke-width="1.8" ${dash} points="${s.cycles.map((cy, j) => `${f1(x(cy))},${f1(y(vals[j]! / 1024))}`).join(' ')}"/>`;
    out.push(line(s.rssKiB, ''), line(s.rssAnonKiB, 'stroke-dasharray="5,4"'));
    const last = s.rssKiB[s.rssKiB.length - 1]! / 1024;
    out.push(text(WIDTH - RIGHT + 8, TOP + 14 + i * 18, `${s.contender}: ${last.toFixed(1)} MiB`, `fill="${c}"`));
  });
  out.push('</svg>');
  return out.join('\n');
}
