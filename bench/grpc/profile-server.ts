// Where grpc-js's server side spends its time on a unary call: runs the empty server under
// `node --cpu-prof`, makes warm-up calls, then measured calls, and prints the server's CPU
// time per measured call by area and by function (bench/lib/cpu-profile.ts). Server options
// can be tried with --option key=value (numbers are passed as numbers).
//   node build/bench/grpc/profile-server.js [--calls N] [--warmup N] [--interval µs]
//        [--client c-core|grpc-js] [--option grpc.key=value]...
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { startDaemon } from '../lib/daemon.js';
import { CCoreClient } from '../lib/ccore-client.js';
import { emptyService } from './proto.js';
import { formatSummary, summariseProfile } from '../lib/cpu-profile.js';

const serverScript = path.join(path.dirname(fileURLToPath(import.meta.url)), 'empty-server.js');

function options(argv: string[]) {
  const o = { calls: 3000, warmup: 1000, interval: 50, client: 'c-core', serverOptions: {} as Record<string, string | number> };
  for (let i = 0; i < argv.length; i++) {
    const [flag, value] = [argv[i], argv[i + 1] ?? ''];
    i++;
    if (flag === '--calls') o.calls = Number(value);
    else if (flag === '--warmup') o.warmup = Number(value);
    else if (flag === '--interval') o.interval = Number(value);
    else if (flag === '--client') o.client = value;
    else if (flag === '--option') {
      const [k, v = ''] = value.split('=');
      o.serverOptions[k] = /^-?\d+$/.test(v) ? Number(v) : v;
    } else throw new Error(`unknown option ${flag}`);
  }
  return o;
}

const nowUs = () => Number(process.hrtime.bigint() / 1000n);

async function main(): Promise<void> {
  const o = options(process.argv.slice(2));
  const scratch = mkdtempSync(path.join(tmpdir(), 'kbgprof-'));
  try {
    const socket = path.join(scratch, 'empty.sock');
    const server = await startDaemon({
      what: 'empty gRPC server',
      cmd: process.execPath,
      args: ['--cpu-prof', `--cpu-prof-dir=${scratch}`, `--cpu-prof-interval=${o.interval}`, serverScript, socket, JSON.stringify(o.serverOptions)],
      readyLine: /^ready$/,
    });
    let call: () => Promise<unknown>;
    let close: () => Promise<void> | void;
    if (o.client === 'c-core') {
      const c = new CCoreClient(socket);
      call = () => c.call('/knitbench.Empty/Call', Buffer.alloc(0));
      close = () => c.close();
    } else {
      const Empty = emptyService();
      const c = new Empty(`unix://${socket}`, grpc.credentials.createInsecure()) as grpc.Client & Record<string, (req: object, cb: (e: Error | null) => void) => void>;
      call = () => new Promise<void>((resolve, reject) => c.Call({}, (e) => (e ? reject(e) : resolve())));
      close = () => c.close();
    }
    for (let i = 0; i < o.warmup; i++) await call();
    const fromUs = nowUs();
    for (let i = 0; i < o.calls; i++) await call();
    const toUs = nowUs();
    await close();
    await server.stop(); // SIGTERM: the server exits and node writes the profile
    const file = readdirSync(scratch).find((f) => f.endsWith('.cpuprofile'));
    if (!file) throw new Error(`the server wrote no profile in ${scratch}`);
    const options = Object.keys(o.serverOptions).length ? `knit's, then ${JSON.stringify(o.serverOptions)}` : "knit's (src/api/server.ts)";
    console.log(`grpc-js server, ${o.client} client, server options ${options}: ${((toUs - fromUs) / o.calls / 1000).toFixed(3)} ms per call, client-observed`);
    console.log(formatSummary(summariseProfile(path.join(scratch, file), { fromUs, toUs }), o.calls));
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

main().catch((err: Error) => {
  console.error(`profile-server: ${err.message}`);
  process.exit(1);
});
