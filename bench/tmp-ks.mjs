import { mkdtempSync } from 'node:fs';
import path from 'node:path';
const step = process.argv[2];
await import('../build/src/daemon/serve.js');
const { startKubeletServer, kubeletSockets } = await import('../build/src/dra/kubelet-server.js');
const dir = mkdtempSync('/tmp/kks-');
if (step !== 'base') {
  const s = await startKubeletServer({ sockets: kubeletSockets(path.join(dir, 'r'), path.join(dir, 'p'), 'knit.dev'), driver: { driverName: 'knit.dev' } });
}
await new Promise((r) => setTimeout(r, 300));
globalThis.gc(); globalThis.gc();
await new Promise((r) => setTimeout(r, 300));
const st = (await import('node:fs')).readFileSync('/proc/self/status', 'utf8');
console.log(step, (process.memoryUsage().rss / 1048576).toFixed(1), 'heap', (process.memoryUsage().heapUsed / 1048576).toFixed(1), /RssAnon:\s+(\d+)/.exec(st)[1]);
process.exit(0);
