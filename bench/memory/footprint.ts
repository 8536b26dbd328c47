// `node build/bench/memory/footprint.js [--sandboxes 1000] [--node-flags "..."] [--snapshots DIR] [--deploy]`:
// knit's memory idle, with N sandboxes attached and after they are detached again, read from
// inside the daemon (process.memoryUsage(), V8's heap spaces, after a full GC) and from /proc.
// One daemon on its own bridge and /20 (10.184.208.0/20), N network namespaces made up front;
// everything is named kf<4 hex>* and removed at the end. --deploy: the config as the DaemonSet
// has it (YAML, a metrics listener; /readyz every 5 s, /healthz every 10 s, /metrics every 15 s).
// A measurement, not a test.
// Results: bench/README.md, "Memory".
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { KnitProcess, launcherNodeFlags, type MemoryReport } from '../lib/knit-process.js';

function option(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : fallback;
}
const sandboxes = Number(option('sandboxes', '1000'));
const concurrency = Number(option('concurrency', '4'));
const nodeFlags = process.argv.includes('--node-flags') ? option('node-flags', '').split(/\s+/).filter(Boolean) : undefined;
const snapshotDir = process.argv.includes('--snapshots') ? option('snapshots', '') : undefined;
const deploy = process.argv.includes('--deploy');
const PREFIX = `kf${randomBytes(2).toString('hex')}`;
const METRICS_PORT = 9480 + Math.floor(Math.random() * 400);
const MiB = (b: number) => (b / 1048576).toFixed(1);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** CPU seconds (user + system) the process has used, from /proc/<pid>/stat (clock ticks of 10 ms). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

function ipBatch(lines: string[]): void {
  for (let i = 0; i < lines.length; i += 200) execFileSync('ip', ['-force', '-batch', '-'], { input: lines.slice(i, i + 200).join('\n') + '\n', stdio: ['pipe', 'ignore', 'ignore'] });
}

async function main(): Promise<void> {
  const knit = new KnitProcess({ prefix: PREFIX, subnet: '10.184.208.0/20', nodeFlags: [...(nodeFlags ?? launcherNodeFlags()), '--expose-gc'], snapshotDir, ...(deploy && { yaml: true, metricsPort: METRICS_PORT }) });
  // The kubelet's probes at the DaemonSet's periods (readiness 5 s, liveness 10 s) and a
  // Prometheus scrape every 15 s, as a node has them.
  const ask = (url: string) => () => void fetch(`http://127.0.0.1:${METRICS_PORT}${url}`).then((r) => r.text(), () => undefined);
  const probes = deploy ? [setInterval(ask('/readyz'), 5000), setInterval(ask('/healthz'), 10_000), setInterval(ask('/metrics'), 15_000)] : [];
  const names = Array.from({ length: sandboxes }, (_, i) => `${PREFIX}-${i}`);
  const rows: [string, MemoryReport][] = [];
  try {
    await knit.ready();
    await sleep(3000);
    rows.push(['idle', await knit.report()]);
    ipBatch(names.map((n) => `netns add ${n}`));
    let next = 0;
    const cpu0 = cpuSeconds(knit.pid);
    const t0 = performance.now();
    await Promise.all(Array.from({ length: concurrency }, async () => {
      while (next < names.length) {
        const id = names[next++]!;
        await knit.call('Attach', { sandbox_id: id, netns_path: `/run/netns/${id}`, runtime: 'RUNC', pod_name: id, pod_namespace: 'footprint' });
      }
    }));
    const fillSeconds = (performance.now() - t0) / 1000;
    const fillCpu = cpuSeconds(knit.pid) - cpu0;
    await sleep(3000);
    rows.push([`${sandboxes} attached`, await knit.report()]);
    next = 0;
    const cpu1 = cpuSeconds(knit.pid);
    await Promise.all(Array.from({ length: concurrency }, async () => {
      while (next < names.length) await knit.call('Detach', { sandbox_id: names[next++]! });
    }));
    const detachCpu = cpuSeconds(knit.pid) - cpu1;
    await sleep(3000);
    rows.push(['all detached', await knit.report()]);
    console.log(`knit serve${deploy ? ' (YAML config; /readyz, /healthz, /metrics every 5, 10, 15 s)' : ''}, node flags ${JSON.stringify(knit.child.spawnargs.slice(1, knit.child.spawnargs.indexOf('--import')))}; ${sandboxes} attached in ${(fillSeconds * 1000).toFixed(0)} ms at ×${concurrency}; daemon CPU per attach ${((fillCpu / sandboxes) * 1000).toFixed(2)} ms, per detach ${((detachCpu / sandboxes) * 1000).toFixed(2)} ms (the reaper's bulk deletes partly after); MiB after a full GC`);
    console.log('| state | RSS | RssAnon | RssFile | heap used | heap total | new space | old space | code space | large objects | external | threads |');
    console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
    for (const [state, m] of rows) {
      const s = (k: string) => MiB(m.heapSpaces[k]?.physical ?? 0);
      console.log(`| ${state} | ${[m.rss, m.rssAnon, m.rssFile, m.heapUsed, m.heapTotal].map(MiB).join(' | ')} | ${s('new_space')} | ${s('old_space')} | ${s('code_space')} | ${s('large_object_space')} | ${MiB(m.external)} | ${m.threads} |`);
    }
    for (const [state, m] of rows) if (m.snapshot) console.log(`${state}: ${m.snapshot}`);
  } finally {
    for (const p of probes) clearInterval(p);
    await knit.stop();
    ipBatch([...names.map((n) => `netns del ${n}`), `link del ${PREFIX}br`]);
  }
}

main().catch((err) => {
  console.error(`footprint: ${(err as Error).stack ?? err}`);
  process.exitCode = 1;
});
