// `node build/bench/soak.js [--cycles N] [--concurrency C] [--node-options "..."] [--env K=V]`:
// memory under churn. Starts one knit daemon (`knit serve`, its own bridge, /24 and metrics
// listener), runs N attach/detach cycles at concurrency C into C network namespaces made once,
// and samples the daemon's own Prometheus series (prom-client's default metrics: RSS, V8 heap
// used and total, external memory) every --every cycles. Prints the samples and the plateau
// (the mean of the last quarter). A measurement, not a test: nothing is asserted. Everything
// it makes is named ks<4 hex>* and removed at the end. Results and what they mean: bench/README.md.
import * as grpc from '@grpc/grpc-js';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { knitProto } from '../src/api/proto.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const CLI = path.join(root, 'build', 'src', 'cli', 'main.js');

function option(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : fallback;
}
const cycles = Number(option('cycles', '3000'));
const concurrency = Number(option('concurrency', '4'));
const every = Number(option('every', '250'));
const nodeOptions = option('node-options', '');
const env = Object.fromEntries(process.argv.flatMap((a, i) => (process.argv[i - 1] === '--env' ? [a.split('=') as [string, string]] : [])));

// Unique per run, so two soaks never share a netns or a bridge.
const PREFIX = `ks${randomBytes(2).toString('hex')}`;
const METRICS_PORT = 9480 + Math.floor(Math.random() * 400);
const MiB = 1024 * 1024;

interface Sample {
  cycles: number;
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  /** /proc/<pid>/status: anonymous pages (heap, malloc) and file-backed ones (the node binary's
   * code, shared with every node process and dropped first under pressure). */
  rssAnon: number;
  rssFile: number;
}

function procStatus(pid: number): { rssAnon: number; rssFile: number } {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN) * 1024;
  return { rssAnon: kb('RssAnon'), rssFile: kb('RssFile') + kb('RssShmem') };
}

async function sample(done: number, pid: number): Promise<Sample> {
  const text = await (await fetch(`http://127.0.0.1:${METRICS_PORT}/metrics`)).text();
  const read = (name: string) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)`, 'm').exec(text)?.[1] ?? NaN);
  return {
    cycles: done,
    rss: read('process_resident_memory_bytes'),
    heapUsed: read('nodejs_heap_size_used_bytes'),
    heapTotal: read('nodejs_heap_size_total_bytes'),
    external: read('nodejs_external_memory_bytes'),
    ...procStatus(pid),
  };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), `${PREFIX}-`));
  const config = {
    socket: path.join(dir, 'knit.sock'), runDir: path.join(dir, 'run'), stateDir: path.join(dir, 'state'),
    netnsDir: path.join(dir, 'netns'), handoffSocket: path.join(dir, 'handoff.sock'), cniSocket: path.join(dir, 'cni.sock'),
    cniDeleteQueue: path.join(dir, 'cni-delete-queue'),
    instance: `knit-${PREFIX}`, logLevel: 'warn', metricsAddress: `127.0.0.1:${METRICS_PORT}`,
    networks: [{ name: 'soak', mode: 'bridge', bridge: `${PREFIX}br`, ipv4: { subnet: '10.184.200.0/24' } }],
  };
  writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config));
  const namespaces = Array.from({ length: concurrency }, (_, i) => `${PREFIX}-ns${i}`);
  const daemon = spawn(process.execPath, [...nodeOptions.split(' ').filter(Boolean), CLI, 'serve', '--config', path.join(dir, 'config.json')], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const client = new (knitProto().Knit)(`unix:${config.socket}`, grpc.credentials.createInsecure());
  const call = (method: string, req: object) =>
    new Promise<unknown>((resolve, reject) =>
      (client as unknown as Record<string, Function>)[method]!(req, (err: Error | null, res: unknown) => (err ? reject(err) : resolve(res))),
    );
  try {
    for (const ns of namespaces) execFileSync('ip', ['netns', 'add', ns]);
    for (let i = 0; ; i++) {
      try {
        await call('NodeStatus', {});
        await sample(0, daemon.pid!);
        break;
      } catch (err) {
        if (i > 200) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    const samples = [await sample(0, daemon.pid!)];
    let done = 0;
    const t0 = performance.now();
    await Promise.all(
      namespaces.map(async (ns, w) => {
        for (let n = 0; done < cycles; n++) {
          const id = `${PREFIX}-w${w}-${n}`;
          await call('Attach', { sandbox_id: id, netns_path: `/run/netns/${ns}`, runtime: 'RUNC', pod_name: id, pod_namespace: 'soak' });
          await call('Detach', { sandbox_id: id });
          done++;
          if (done % every === 0) samples.push(await sample(done, daemon.pid!));
        }
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    await new Promise((r) => setTimeout(r, 2000)); // the reaper's last deletes
    samples.push(await sample(done, daemon.pid!));
    const mib = (b: number) => (b / MiB).toFixed(1);
    console.log(`cycles ${done} at concurrency ${concurrency} in ${seconds.toFixed(0)} s; node options "${nodeOptions}"; env ${JSON.stringify(env)}`);
    const columns: (keyof Sample)[] = ['rss', 'rssAnon', 'rssFile', 'heapUsed', 'heapTotal', 'external'];
    console.log(`cycles  ${columns.join('  ')} (MiB)`);
    for (const s of samples) console.log(`${String(s.cycles).padStart(6)}  ${columns.map((k) => mib(s[k]).padStart(k.length)).join('  ')}`);
    const tail = samples.slice(Math.floor(samples.length * 0.75));
    const mean = (k: keyof Sample) => tail.reduce((a, s) => a + s[k], 0) / tail.length;
    console.log(`plateau (last quarter, MiB): ${columns.map((k) => `${k} ${mib(mean(k))}`).join(', ')}`);
  } finally {
    client.close();
    daemon.kill('SIGTERM');
    await new Promise((r) => daemon.once('exit', r));
    for (const what of [...namespaces.map((ns) => ['netns', 'del', ns]), ['link', 'del', `${PREFIX}br`]]) {
      try {
        execFileSync('ip', what, { stdio: 'ignore' });
      } catch {
        /* not made */
      }
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(`soak: ${(err as Error).stack ?? err}`);
  process.exitCode = 1;
});
