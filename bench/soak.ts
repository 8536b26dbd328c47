// `node build/bench/soak.js [--cycles N] [--concurrency C] [--every K] [--node-flags "..."] [--env K=V]`:
// memory under churn, in detail. Starts one knit daemon (`knit serve` with bin/knit's node flags
// unless --node-flags says otherwise, its own bridge and /24), runs N attach/detach cycles at
// concurrency C into C network namespaces made once, and every K cycles reads the daemon's
// /proc/<pid>/status (RSS, its anonymous and file-backed parts) and, from inside it, V8's heap
// (used, total; no GC forced). Prints the samples, the highest RSS, and the mean and slope of
// the last third (a plateau has a slope near 0). A measurement, not a test: nothing is
// asserted. Everything it makes is named ks<4 hex>* and removed at the end. The bench's soak
// phase (`npm run bench -- --full`) does the same for every daemon contender, with fresh netns
// per cycle; results and what they mean: bench/README.md, "Memory".
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { KnitProcess, procMemory } from './lib/knit-process.js';

function option(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : fallback;
}
const cycles = Number(option('cycles', '3000'));
const concurrency = Number(option('concurrency', '4'));
const every = Number(option('every', '250'));
const nodeFlags = process.argv.includes('--node-flags') ? option('node-flags', '').split(/\s+/).filter(Boolean) : undefined;
const env = Object.fromEntries(process.argv.flatMap((a, i) => (process.argv[i - 1] === '--env' ? [a.split('=') as [string, string]] : [])));

// Unique per run, so two soaks never share a netns or a bridge.
const PREFIX = `ks${randomBytes(2).toString('hex')}`;
const MiB = 1024 * 1024;

interface Sample {
  cycles: number;
  rss: number;
  rssAnon: number;
  rssFile: number;
  heapUsed: number;
  heapTotal: number;
}

async function main(): Promise<void> {
  const knit = new KnitProcess({ prefix: PREFIX, subnet: '10.184.200.0/24', nodeFlags, env });
  const namespaces = Array.from({ length: concurrency }, (_, i) => `${PREFIX}-ns${i}`);
  const sample = async (done: number): Promise<Sample> => {
    const { heapUsed, heapTotal } = await knit.report();
    return { cycles: done, ...procMemory(knit.pid)!, heapUsed, heapTotal };
  };
  try {
    for (const ns of namespaces) execFileSync('ip', ['netns', 'add', ns]);
    await knit.ready();
    const samples = [await sample(0)];
    let done = 0;
    const t0 = performance.now();
    await Promise.all(
      namespaces.map(async (ns, w) => {
        for (let n = 0; done < cycles; n++) {
          const id = `${PREFIX}-w${w}-${n}`;
          await knit.call('Attach', { sandbox_id: id, netns_path: `/run/netns/${ns}`, runtime: 'RUNC', pod_name: id, pod_namespace: 'soak' });
          await knit.call('Detach', { sandbox_id: id });
          done++;
          if (done % every === 0) samples.push(await sample(done));
        }
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    await new Promise((r) => setTimeout(r, 2000)); // the reaper's last deletes
    samples.push(await sample(done));
    const mib = (b: number) => (b / MiB).toFixed(1);
    console.log(`cycles ${done} at concurrency ${concurrency} in ${seconds.toFixed(0)} s; node flags ${JSON.stringify(knit.child.spawnargs.slice(1, knit.child.spawnargs.indexOf('--import')))}; env ${JSON.stringify(env)}`);
    const columns: (keyof Sample)[] = ['rss', 'rssAnon', 'rssFile', 'heapUsed', 'heapTotal'];
    console.log(`cycles  ${columns.join('  ')} (MiB)`);
    for (const s of samples) console.log(`${String(s.cycles).padStart(6)}  ${columns.map((k) => mib(s[k]).padStart(k.length)).join('  ')}`);
    const tail = samples.slice(Math.floor((samples.length * 2) / 3));
    const mean = (k: keyof Sample) => tail.reduce((a, s) => a + s[k], 0) / tail.length;
    const mx = mean('cycles');
    const sxx = tail.reduce((a, s) => a + (s.cycles - mx) ** 2, 0);
    const slope = sxx ? (tail.reduce((a, s) => a + (s.cycles - mx) * (s.rss - mean('rss')), 0) / sxx) * 1000 : 0;
    console.log(`highest RSS ${mib(Math.max(...samples.map((s) => s.rss)))} MiB; last third: ${columns.map((k) => `${k} ${mib(mean(k))}`).join(', ')}; RSS slope ${mib(slope)} MiB per 1,000 cycles`);
  } finally {
    await knit.stop();
    for (const what of [...namespaces.map((ns) => ['netns', 'del', ns]), ['link', 'del', `${PREFIX}br`]]) {
      try {
        execFileSync('ip', what, { stdio: 'ignore' });
      } catch {
        /* not made */
      }
    }
  }
}

main().catch((err) => {
  console.error(`soak: ${(err as Error).stack ?? err}`);
  process.exitCode = 1;
});
