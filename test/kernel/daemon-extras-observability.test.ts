// What an operator watches: /healthz, /readyz and /metrics over plain HTTP, and the daemon's
// JSON log lines. The metric values are compared with NodeStatus and with what `ip` sees.
import test from 'ava';
import { status } from '@grpc/grpc-js';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import {
  startDaemon, cleanupDaemon, removeNetns, eventually, hostLinks, podFactory, runcAttachReq, freePort, type Daemon,
} from '../helpers/daemon.js';

const P = 'kob';
const SUBNET = '10.234.2.0/24';
const MESH = `${P}-mesh`;
let d: Daemon | undefined;
let base = '';
const opts = { prefix: P, subnet: SUBNET, config: {} as Record<string, unknown> };
const { pod, netnsNames, ids } = podFactory(P);

const attachReq = (id: string, netns: string) => runcAttachReq(id, netns, { podNamespace: 'obs' });

async function get(p: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`${base}${p}`);
  return { status: res.status, body: await res.text() };
}

/** A series as "name{k=v,...}" with its labels sorted, so label order in the text does not matter. */
function normalSeries(series: string): string {
  const m = /^([^{\s]+)(?:\{(.*)\})?$/.exec(series);
  if (!m) return series;
  const labels = (m[2] ?? '').match(/[a-zA-Z_]\w*="(?:[^"\\]|\\.)*"/g) ?? [];
  return labels.length ? `${m[1]}{${labels.sort().join(',')}}` : m[1];
}

/** The value of one sample line in the exposition text, e.g. sample(text, 'knit_x{a="b"}'). */
function sample(text: string, series: string): number | undefined {
  const want = normalSeries(series);
  for (const line of text.split('\n')) {
    const at = line.lastIndexOf(' ');
    if (at > 0 && !line.startsWith('#') && normalSeries(line.slice(0, at)) === want) return Number(line.slice(at + 1));
  }
  return undefined;
}

const metrics = async () => (await get('/metrics')).body;
const json = (lines: string[]) => lines.flatMap((l) => { try { return [JSON.parse(l)]; } catch { return []; } });

test.before(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  opts.config = { metricsAddress: `127.0.0.1:${port}`, requiredExtensions: [MESH] };
  d = await startDaemon(opts);
});

test.after.always(async () => {
  await cleanupDaemon(d, opts, ids);
  for (const n of netnsNames) removeNetns(n);
});

test.serial('/healthz answers 200; /readyz is 503 naming the missing required extension, 200 once it is registered', async (t) => {
  const health = await get('/healthz');
  t.is(health.status, 200);
  const notReady = await get('/readyz');
  t.is(notReady.status, 503);
  t.regex(notReady.body, new RegExp(`required extension ${MESH} is not registered`));
  t.is((await get('/nothing-here')).status, 404);

  // Pre-detach and not required: nobody listening there never fails an attach.
  await d!.call('RegisterExtension', { extension: { name: MESH, endpoint: `${d!.dir}/mesh.sock`, phase: 'PRE_DETACH', required: false, order: 0 } });
  const ready = await get('/readyz');
  t.is(ready.status, 200, ready.body);
  t.true((await d!.call('NodeStatus', {})).ready);
});

test.serial('/metrics: attach latency, attached sandboxes and pool usage agree with NodeStatus and ip', async (t) => {
  const a = pod(1);
  const b = pod(2);
  await d!.call('Attach', attachReq(a.id, a.path));
  await d!.call('Attach', attachReq(b.id, b.path));
  const text = await metrics();
  t.regex(text, /^# TYPE knit_attach_duration_seconds histogram$/m);
  t.true(sample(text, 'knit_attach_duration_seconds_count{outcome="ok"}')! >= 2, text);
  t.is(sample(text, 'knit_attach_duration_seconds_bucket{outcome="ok",le="+Inf"}'), sample(text, 'knit_attach_duration_seconds_count{outcome="ok"}'));

  const s = await d!.call('NodeStatus', {});
  t.is(s.sandboxes, 2);
  t.is(sample(text, 'knit_sandboxes_attached'), 2);
  // Independent observer: two host ends tagged by this daemon.
  t.is(hostLinks().filter((l) => l.ifalias?.startsWith(`knit-${P}:sandbox=`)).length, 2);

  const pool = s.networks[0].pools.find((p: any) => p.family === 4);
  t.is(sample(text, `knit_pool_addresses_used{family="4",network="${P}net"}`), Number(pool.used));
  t.is(sample(text, `knit_pool_addresses_total{family="4",network="${P}net"}`), Number(pool.size));
  t.true(Number(pool.used) >= 2);

  await d!.call('Detach', { sandbox_id: b.id });
  const after = await metrics();
  t.is(sample(after, 'knit_sandboxes_attached'), 1);
  t.is(sample(after, `knit_pool_addresses_used{family="4",network="${P}net"}`), Number(pool.used) - 1);
  t.true(sample(after, 'knit_detach_duration_seconds_count{outcome="ok"}')! >= 1);
});

test.serial('/metrics has the process and Node.js series dashboards expect, and they agree with /proc', async (t) => {
  const text = await metrics();
  const pid = d!.child.pid!;
  const rss = sample(text, 'process_resident_memory_bytes')!;
  const procRss = Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;
  t.true(rss > 0.5 * procRss && rss < 2 * procRss, `metric ${rss} vs /proc ${procRss}`);
  const fds = sample(text, 'process_open_fds')!;
  t.is(fds > 0 && Math.abs(fds - readdirSync(`/proc/${pid}/fd`).length) <= 4, true, `open fds ${fds}`);
  t.true(sample(text, 'nodejs_heap_size_used_bytes')! > 0);
  t.regex(text, /^# TYPE nodejs_eventloop_lag_seconds gauge$/m);
  t.regex(text, /^# TYPE nodejs_gc_duration_seconds histogram$/m);
});

test.serial('/metrics counts a failed attach by RPC and code', async (t) => {
  const p = pod(3);
  execFileSync('ip', ['-n', p.ns, 'link', 'add', 'eth0', 'type', 'bridge']); // the name knit wants is taken
  const series = 'knit_errors_total{code="ALREADY_EXISTS",rpc="attach"}';
  const before = sample(await metrics(), series) ?? 0;
  const err = await t.throwsAsync(d!.call('Attach', attachReq(p.id, p.path)));
  t.is((err as any).code, status.ALREADY_EXISTS);
  const text = await metrics();
  t.is(sample(text, series), before + 1);
  t.true(sample(text, 'knit_attach_duration_seconds_count{outcome="error"}')! >= 1);
  t.is(sample(text, 'knit_sandboxes_attached'), 1, 'the failed sandbox is not counted');
});

test.serial('every log line about an attach or detach carries the sandbox id', async (t) => {
  const p = pod(4);
  await d!.call('Attach', attachReq(p.id, p.path));
  await d!.call('Detach', { sandbox_id: p.id });
  const lines = await eventually(() => {
    const all = json(d!.logs);
    return all.some((l) => l.sandboxId === p.id && /detach/i.test(l.msg)) && all;
  }, 'a detach log line for the sandbox');
  t.true(lines.some((l) => l.sandboxId === p.id && /attach/i.test(l.msg) && !/detach/i.test(l.msg)), 'an attach line with sandboxId');
  t.true(lines.some((l) => l.sandboxId === `${P}-sb3` && /attach/i.test(l.msg) && l.level >= 40), 'the failed attach is logged as a warning with its sandbox id');
  // Lines about one sandbox's attach/detach (not start-up summaries) all say which sandbox.
  const about = lines.filter((l) => /\b(attach|detach)/i.test(l.msg) && !/^knit /.test(l.msg));
  const anonymous = about.filter((l) => typeof l.sandboxId !== 'string' || l.sandboxId === '');
  t.deepEqual(anonymous, [], 'attach/detach lines without sandboxId');
  t.true(about.length >= 3);
});
