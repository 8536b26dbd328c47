// Reading a V8 .cpuprofile (node --cpu-prof): self time by where the sampled frame's code
// lives (grpc-js, Node's http2, protobufjs, knit's own folders, V8 and GC), optionally only
// for samples inside a window of the monotonic clock, so a warm-up can be left out.
import { readFileSync } from 'node:fs';

interface CallFrame { functionName: string; url: string; lineNumber: number }
interface ProfileNode { id: number; callFrame: CallFrame }
interface CpuProfile { nodes: ProfileNode[]; startTime: number; samples: number[]; timeDeltas: number[] }

export interface ProfileSummary {
  /** Sampled time in the window that was not idle, µs. */
  busyUs: number;
  /** Self time by where the code lives, µs, largest first. */
  byArea: [string, number][];
  /** Self time by function, µs, largest first. */
  byFunction: [string, number][];
}

/** Where a frame's code lives, in the words the bench README uses. */
function areaOf(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (functionName === '(garbage collector)') return 'V8: garbage collection';
  if (functionName === '(program)') return 'V8 and native code (program)';
  if (!url) return `native: ${functionName || '(anonymous)'}`;
  for (const pkg of ['@grpc/grpc-js', '@grpc/proto-loader', 'protobufjs', 'zod', 'pino', 'yaml']) {
    if (url.includes(`/node_modules/${pkg}/`)) return pkg;
  }
  const own = /\/build\/(src|runtimes|bench)\/([^/]+)/.exec(url);
  if (own) return `knit: ${own[1]}/${own[2].replace(/\.js$/, '')}`;
  const internal = /^node:(?:internal\/)?([a-z_0-9]+)/.exec(url);
  if (internal) return `node: ${internal[1]}`;
  return url.split('/').slice(-2).join('/');
}

/** Summarises file; with a window [fromUs, toUs] of the monotonic clock (process.hrtime in µs)
 * only samples taken inside it count. */
export function summariseProfile(file: string, window?: { fromUs: number; toUs: number }): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const frames = new Map(profile.nodes.map((n) => [n.id, n.callFrame]));
  const areas = new Map<string, number>();
  const functions = new Map<string, number>();
  let busyUs = 0;
  let at = profile.startTime;
  profile.samples.forEach((id, i) => {
    const delta = profile.timeDeltas[i] ?? 0;
    at += delta;
    if (window && (at < window.fromUs || at > window.toUs)) return;
    const frame = frames.get(id);
    if (!frame || frame.functionName === '(idle)') return;
    busyUs += delta;
    const area = areaOf(frame);
    areas.set(area, (areas.get(area) ?? 0) + delta);
    const fn = `${frame.functionName || '(anonymous)'} (${area}${frame.url ? `:${frame.lineNumber + 1}` : ''})`;
    functions.set(fn, (functions.get(fn) ?? 0) + delta);
  });
  const sorted = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]);
  return { busyUs, byArea: sorted(areas), byFunction: sorted(functions) };
}

/** The summary as text, per call when calls is given. */
export function formatSummary(s: ProfileSummary, calls: number, top = 15): string {
  const per = (us: number) => `${(us / calls).toFixed(1).padStart(7)} µs`;
  const share = (us: number) => `${((100 * us) / (s.busyUs || 1)).toFixed(1).padStart(5)}%`;
  return [
    `busy ${per(s.busyUs)} per call (${calls} calls)`,
    'by area:',
    ...s.byArea.slice(0, top).map(([k, v]) => `  ${per(v)} ${share(v)}  ${k}`),
    'by function (self):',
    ...s.byFunction.slice(0, top).map(([k, v]) => `  ${per(v)} ${share(v)}  ${k}`),
  ].join('\n');
}
