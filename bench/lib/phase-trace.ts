// Where one attach or detach spends its time inside the daemon, step by step: a module the
// daemon's node preloads (--import), which wraps the manager's attach/detach, the record
// store's writes, the action runner's batches and the gRPC handlers, and writes per-step p50s
// (start offset and duration within the call) to $KNIT_PHASE_TRACE_OUT every second and at
// exit. For sequential calls only (the latency phase): concurrent calls would share a trace.
//   KNIT_PHASE_TRACE_OUT=/tmp/phases.json \
//   KNIT_BENCH_DAEMON_NODE_ARGS="--import ./build/bench/lib/phase-trace.js" npm run bench -- --only knit
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { SandboxManager } from '../../src/core/manager.js';
import { RecordStore } from '../../src/store/record-store.js';
import { DaemonActionRunner } from '../../src/daemon/action-runner.js';
import { native } from '../../src/net/native.js';

type Fn = (...args: unknown[]) => unknown;
interface Mark { step: string; at: number; ms: number }

const out = process.env.KNIT_PHASE_TRACE_OUT ?? '/tmp/knit-phase-trace.json';
/** Per call kind (e.g. "attach"), the steps of every finished call. */
const calls = new Map<string, Mark[][]>();
let current: { kind: string; t0: number; marks: Mark[]; done?: boolean } | undefined;

function wrap(target: object, name: string, step: (args: unknown[]) => string | undefined): void {
  const proto = target as Record<string, Fn>;
  const original = proto[name];
  proto[name] = function (this: unknown, ...args: unknown[]) {
    const started = performance.now();
    const label = step(args);
    const note = () => {
      // Work a call set off after it answered (the reaper's delete) is not the call's.
      if (current && !current.done && label) current.marks.push({ step: label, at: started - current.t0, ms: performance.now() - started });
    };
    const r = original.apply(this, args);
    if (r instanceof Promise) return r.finally(note);
    note();
    return r;
  };
}

function wrapCall(kind: string): void {
  const proto = SandboxManager.prototype as unknown as Record<string, Fn>;
  const original = proto[kind];
  proto[kind] = function (this: unknown, ...args: unknown[]) {
    const t0 = performance.now();
    const trace: NonNullable<typeof current> = { kind, t0, marks: [] };
    current = trace;
    return (original.apply(this, args) as Promise<unknown>).finally(() => {
      trace.marks.push({ step: `${kind} (whole, in core)`, at: 0, ms: performance.now() - t0 });
      trace.done = true;
      const list = calls.get(kind) ?? [];
      list.push(trace.marks);
      calls.set(kind, list);
    });
  };
}

wrapCall('attach');
wrapCall('detach');
wrap(SandboxManager.prototype, 'admitAndAllocate', () => 'admission and IPAM');
wrap(SandboxManager.prototype, 'buildPlan', () => 'plan');
// A record's JSON out and back (put, or prepare ahead of the kernel batch), then its file.
wrap(RecordStore.prototype, 'serialize', () => 'record serialize');
wrap(RecordStore.prototype, 'write', () => 'record write');
wrap(RecordStore.prototype, 'remove', () => 'record removal');
wrap(DaemonActionRunner.prototype, 'runOps', (args) => (args[0] === undefined ? 'host netns batch' : 'pod netns batch'));
wrap(DaemonActionRunner.prototype, 'netnsUsable', () => 'netns identity check');
wrap(DaemonActionRunner.prototype, 'runHostAction', (args) => `host action ${(args[1] as { op?: string })?.op ?? ''}`.trim());
// A CNI plugin's exec as the addon times it: spawn, the plugin's run, its exit.
wrap(native as object, 'spawnAndWait', (args) => `plugin exec ${String(args[0]).split('/').pop()}`);

// The gRPC handler as grpc-js calls it: decode → validation → core → wire encode → callback.
const grpc = createRequire(import.meta.url)('@grpc/grpc-js') as { Server: { prototype: Record<string, Fn> } };
const addService = grpc.Server.prototype.addService;
grpc.Server.prototype.addService = function (this: unknown, service: unknown, impl: unknown) {
  const timed: Record<string, Fn> = {};
  for (const [method, handler] of Object.entries(impl as Record<string, Fn>)) {
    const kind = method === 'Attach' ? 'attach' : method === 'Detach' ? 'detach' : undefined;
    timed[method] = !kind ? handler : function (this: unknown, call: unknown, callback: unknown) {
      const started = performance.now();
      return handler.call(this, call, (...answer: unknown[]) => {
        const last = calls.get(kind)?.at(-1);
        last?.push({ step: `${kind} (whole, gRPC handler)`, at: 0, ms: performance.now() - started });
        (callback as Fn)(...answer);
      });
    };
  }
  return addService.call(this, service, timed);
};

const p50 = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)] ?? 0;

/** Steps numbered by occurrence ("record write #2"), p50 of start and duration over the calls. */
function summary(): Record<string, { calls: number; steps: { step: string; startsAtMs: number; takesMs: number; seen: number }[] }> {
  const result: ReturnType<typeof summary> = {};
  for (const [kind, list] of calls) {
    const byStep = new Map<string, { at: number[]; ms: number[] }>();
    for (const marks of list) {
      const seen = new Map<string, number>();
      for (const m of marks) {
        const n = (seen.get(m.step) ?? 0) + 1;
        seen.set(m.step, n);
        const key = n === 1 ? m.step : `${m.step} #${n}`;
        const s = byStep.get(key) ?? { at: [], ms: [] };
        s.at.push(m.at);
        s.ms.push(m.ms);
        byStep.set(key, s);
      }
    }
    const steps = [...byStep].map(([step, s]) => ({ step, startsAtMs: p50(s.at), takesMs: p50(s.ms), seen: s.ms.length }));
    steps.sort((a, b) => a.startsAtMs - b.startsAtMs);
    result[kind] = { calls: list.length, steps };
  }
  return result;
}

const flush = () => writeFileSync(out, `${JSON.stringify(summary(), null, 2)}\n`);
setInterval(flush, 1000).unref();
process.on('exit', flush);
