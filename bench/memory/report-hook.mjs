// Preloaded into a daemon under measurement (node --import): on SIGUSR2 it writes one JSON
// line to $KNIT_MEMORY_REPORT with process.memoryUsage(), V8's heap spaces and the kernel's
// view (/proc/self/status, smaps_rollup), after a full GC when --expose-gc is on; with
// $KNIT_MEMORY_SNAPSHOT_DIR set, also a heap snapshot there. Costs nothing until signalled.
// With $KNIT_MEMORY_SETTLE_MS, the same figures are read again that long after the GC, as
// `settled`: V8 finishes a full GC's sweeping on its worker thread after gc() returns, and RSS
// read at once still counts up to 3 MiB the process gives back within the next second
// (bench/README.md, "The DRA driver: memory and restart").
import { appendFileSync, readFileSync } from 'node:fs';
import v8 from 'node:v8';
import path from 'node:path';

const out = process.env.KNIT_MEMORY_REPORT;
const snapshots = process.env.KNIT_MEMORY_SNAPSHOT_DIR;
let n = 0;
function figures() {
  const kb = (text, key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN) * 1024;
  const status = readFileSync('/proc/self/status', 'utf8');
  const rollup = readFileSync('/proc/self/smaps_rollup', 'utf8');
  const spaces = Object.fromEntries(v8.getHeapSpaceStatistics().map((s) => [s.space_name, { size: s.space_size, used: s.space_used_size, physical: s.physical_space_size }]));
  return {
    ...process.memoryUsage(),
    rssAnon: kb(status, 'RssAnon'), rssFile: kb(status, 'RssFile') + kb(status, 'RssShmem'),
    privateDirty: kb(rollup, 'Private_Dirty'), threads: Number(/^Threads:\s+(\d+)/m.exec(status)?.[1]),
    heapSpaces: spaces,
  };
}

if (out) {
  process.on('SIGUSR2', () => {
    // $KNIT_MEMORY_GCS full GCs (default 1); V8 drops the bytecode of functions not run for
    // several of them (bytecode flushing), so more than one shows what an idle daemon sheds.
    for (let i = 0; i < Number(process.env.KNIT_MEMORY_GCS ?? 1); i++) globalThis.gc?.();
    const report = figures();
    // After the figures: writing a snapshot takes memory of its own (and keeps some of it, so
    // later reports of the same process read high).
    if (snapshots) report.snapshot = v8.writeHeapSnapshot(path.join(snapshots, `knit-${process.pid}-${n++}.heapsnapshot`));
    const settle = Number(process.env.KNIT_MEMORY_SETTLE_MS ?? 0);
    if (!settle) appendFileSync(out, `${JSON.stringify(report)}\n`);
    else setTimeout(() => appendFileSync(out, `${JSON.stringify({ ...report, settled: figures() })}\n`), settle);
  });
}
