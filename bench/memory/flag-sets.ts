// `node build/bench/memory/flag-sets.js --set "name=flags" --set ... [--rounds R] [--burst N]
//   [--sequential N] [--fill N] [--churn N] [--stdout DIR]`:
// V8 flag sets for the daemon side by side, one `knit serve` per set, all started at once: RSS
// idle, then R rounds in which every set (in an order rotated per round) takes a burst of N
// attaches at once and N detaches at once, then N sequential attach/detach pairs; then a churn
// of C cycles at ×4 with RSS sampled every 100 cycles, then F sandboxes attached at ×4 and RSS
// read 3 s later. RSS is /proc's VmRSS, no GC forced. Daemons log at info, as shipped, and keep
// their records on tmpfs (/dev/shm), as a node's /run is. Every
// netns and bridge is named kv<4 hex>* and removed at the end. A measurement, not a test.
// Results: bench/README.md, "Memory" ("The node flags against the burst").
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { KnitProcess, launcherNodeFlags, procMemory } from '../lib/knit-process.js';
import { nowMs, summarize } from '../lib/stats.js';

const argv = process.argv.slice(2);
function option(name: string, fallback: string): string {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1]! : fallback;
}
const rounds = Number(option('rounds', '5'));
const burst = Number(option('burst', '100'));
const sequential = Number(option('sequential', '30'));
const churn = Number(option('churn', '0'));
const fill = Number(option('fill', '0'));
/** --stdout DIR: each daemon's stdout (log lines, --trace-gc) to DIR/<set name>.log. */
const stdoutDir = argv.includes('--stdout') ? option('stdout', '') : undefined;
const sets = argv.flatMap((a, i) => (argv[i - 1] === '--set' ? [a] : [])).map((s) => {
  const eq = s.indexOf('=');
  const name = s.slice(0, eq);
  const flags = s.slice(eq + 1).trim();
  return { name, flags: flags === 'bin/knit' ? launcherNodeFlags() : flags.split(/\s+/).filter(Boolean) };
});
if (sets.length === 0) sets.push({ name: 'bin/knit', flags: launcherNodeFlags() }, { name: 'defaults', flags: [] });

const PREFIX = `kv${randomBytes(2).toString('hex')}`;
const MiB = (b: number) => (b / 1048576).toFixed(1);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const rss = (k: KnitProcess) => procMemory(k.pid)!.rss;

function ipBatch(lines: string[]): void {
  for (let i = 0; i < lines.length; i += 200) execFileSync('ip', ['-force', '-batch', '-'], { input: lines.slice(i, i + 200).join('\n') + '\n', stdio: ['pipe', 'ignore', 'ignore'] });
}

interface Row {
  name: string;
  knit: KnitProcess;
  netns: string[];
  idle: number;
  burstWall: number[];
  burstDetachWall: number[];
  attach: number[];
  detach: number[];
  afterBursts: number;
  churnPeak: number;
  churnTail: number[];
  churnSeconds: number;
  filled: number;
}

let serial = 0;
const attach = (r: Row, ns: string) => {
  const id = `${PREFIX}-${serial++}`;
  return r.knit.call('Attach', { sandbox_id: id, netns_path: `/run/netns/${ns}`, runtime: 'RUNC', pod_name: id, pod_namespace: 'flags' }).then(() => id);
};
const detach = (r: Row, id: string) => r.knit.call('Detach', { sandbox_id: id });

async function main(): Promise<void> {
  const perSet = Math.max(burst, fill, 4);
  const rows: Row[] = sets.map((s, i) => ({
    name: s.name,
    knit: new KnitProcess({ prefix: `${PREFIX}${i}`, subnet: `10.185.${i * 16}.0/20`, nodeFlags: s.flags, logLevel: 'info', runDir: `/dev/shm/${PREFIX}${i}-run`, ...(stdoutDir && { stdoutFile: `${stdoutDir}/${s.name}.log` }) }),
    netns: Array.from({ length: perSet }, (_, j) => `${PREFIX}-${i}-${j}`),
    idle: 0, burstWall: [], burstDetachWall: [], attach: [], detach: [], afterBursts: 0, churnPeak: 0, churnTail: [], churnSeconds: 0, filled: 0,
  }));
  try {
    ipBatch(rows.flatMap((r) => r.netns.map((n) => `netns add ${n}`)));
    for (const r of rows) await r.knit.ready();
    await sleep(3000);
    for (const r of rows) r.idle = rss(r.knit);
    for (let round = 0; round < rounds; round++) {
      for (let k = 0; k < rows.length; k++) {
        const r = rows[(round + k) % rows.length]!;
        let t0 = nowMs();
        const ids = await Promise.all(r.netns.slice(0, burst).map((ns) => attach(r, ns)));
        r.burstWall.push(nowMs() - t0);
        t0 = nowMs();
        await Promise.all(ids.map((id) => detach(r, id)));
        r.burstDetachWall.push(nowMs() - t0);
        await sleep(500); // the reaper's deletes
        for (let j = 0; j < sequential; j++) {
          t0 = nowMs();
          const id = await attach(r, r.netns[j % r.netns.length]!);
          r.attach.push(nowMs() - t0);
          t0 = nowMs();
          await detach(r, id);
          r.detach.push(nowMs() - t0);
        }
        await sleep(300);
      }
    }
    for (const r of rows) r.afterBursts = rss(r.knit);
    if (churn > 0) {
      for (const r of rows) {
        let done = 0;
        const samples: number[] = [];
        const t0 = nowMs();
        await Promise.all(r.netns.slice(0, 4).map(async (ns) => {
          while (done < churn) {
            await detach(r, await attach(r, ns));
            if (++done % 100 === 0) samples.push(rss(r.knit));
          }
        }));
        r.churnSeconds = (nowMs() - t0) / 1000;
        r.churnPeak = Math.max(...samples);
        r.churnTail = samples.slice(Math.floor((samples.length * 2) / 3));
      }
    }
    if (fill > 0) {
      for (const r of rows) {
        let next = 0;
        await Promise.all(Array.from({ length: 4 }, async () => {
          while (next < fill) await attach(r, r.netns[next++]!);
        }));
        await sleep(3000);
        r.filled = rss(r.knit);
      }
    }
    const f = (n: number) => n.toPrecision(3);
    const base = rows[0]!;
    const med = (xs: number[]) => summarize(xs).p50;
    console.log(`${rounds} rounds, burst ${burst}, ${sequential} sequential pairs per round; churn ${churn} at ×4; fill ${fill}; RSS MiB, times ms (p50; burst walls: median of rounds)`);
    console.log(`| flags | idle | after the bursts |${churn ? ' churn peak / last-third mean / s |' : ''}${fill ? ` ${fill} attached |` : ''} burst attach wall | ÷ first | burst detach wall | attach p50 | ÷ first | detach p50 |`);
    console.log(`|---|---:|---:|${churn ? '---:|' : ''}${fill ? '---:|' : ''}---:|---:|---:|---:|---:|---:|`);
    for (const r of rows) {
      const tail = r.churnTail.length ? r.churnTail.reduce((a, b) => a + b, 0) / r.churnTail.length : 0;
      console.log(`| ${r.name} (\`${sets.find((s) => s.name === r.name)!.flags.join(' ')}\`) | ${MiB(r.idle)} | ${MiB(r.afterBursts)} |${churn ? ` ${MiB(r.churnPeak)} / ${MiB(tail)} / ${r.churnSeconds.toFixed(0)} |` : ''}${fill ? ` ${MiB(r.filled)} |` : ''} ${f(med(r.burstWall))} | ${(med(r.burstWall) / med(base.burstWall)).toFixed(2)}× | ${f(med(r.burstDetachWall))} | ${f(med(r.attach))} | ${(med(r.attach) / med(base.attach)).toFixed(2)}× | ${f(med(r.detach))} |`);
    }
    for (const r of rows) console.log(`${r.name}: burst walls ${r.burstWall.map((x) => x.toFixed(0)).join(' ')}`);
  } finally {
    for (const r of rows) await r.knit.stop().catch(() => undefined);
    ipBatch([...rows.flatMap((r) => r.netns.map((n) => `netns del ${n}`)), ...rows.map((_, i) => `link del ${PREFIX}${i}br`)]);
  }
}

main().catch((err) => {
  console.error(`flag-sets: ${(err as Error).stack ?? err}`);
  process.exitCode = 1;
});
