#!/usr/bin/env node
// What each dependency and each of knit's own modules costs a process to load: for every
// module named, the median of five fresh `node` processes that import it alone, against a bare
// node. RSS is split into anonymous pages (heap, malloc: what the module costs) and file pages
// (the node binary's code it touched: shared with every node process, dropped first). Heap
// figures are after two full GCs. Usage, after npm run build, from the repository root:
//   node bench/memory/import-costs.mjs [--node-flags "--max-semi-space-size=4"] [module ...]
// With no module named, the daemon's dependencies and knit's layers. Not a test.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const probe = path.join(root, 'bench', 'memory', 'probe.mjs');
const args = process.argv.slice(2);
const flagsAt = args.indexOf('--node-flags');
const nodeFlags = flagsAt >= 0 ? args.splice(flagsAt, 2)[1].split(/\s+/).filter(Boolean) : [];
const RUNS = 5;

const DEFAULT = [
  '@grpc/grpc-js', '@grpc/proto-loader', 'zod', 'pino', 'yaml',
  './build/src/base/errors.js', './build/src/net/handle.js', './build/src/store/index.js', './build/src/ipam/index.js',
  './build/src/config/index.js', './build/runtimes/index.js', './build/src/core/manager.js',
  './build/src/api/proto.js', './build/src/api/server.js', './build/src/cni-frontend/server.js',
  './build/src/daemon/metrics.js', './build/src/daemon/serve.js',
];

function measure(modules) {
  const runs = [];
  for (let i = 0; i < RUNS; i++) {
    const r = spawnSync(process.execPath, [...nodeFlags, '--expose-gc', probe, ...modules], { cwd: root, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`${modules.join(' ')}: ${r.stderr.trim().split('\n').slice(0, 3).join(' | ')}`);
    runs.push(JSON.parse(r.stdout.trim().split('\n').pop()));
  }
  const median = (k) => runs.map((x) => x[k]).sort((a, b) => a - b)[Math.floor(RUNS / 2)];
  return Object.fromEntries(Object.keys(runs[0]).map((k) => [k, median(k)]));
}

const MiB = (b) => (b / 1048576).toFixed(1);
const plus = (b) => `${b >= 0 ? '+' : ''}${MiB(b)}`;
const bare = measure([]);
const rows = [['module', 'RSS', 'Δ RSS', 'Δ anon', 'Δ file', 'heap used Δ', 'heap total']];
rows.push(['(bare node)', MiB(bare.rss), '', MiB(bare.rssAnon), MiB(bare.rssFile), MiB(bare.heapUsed), MiB(bare.heapTotal)]);
for (const spec of args.length ? args : DEFAULT) {
  let m;
  try {
    m = measure([spec]);
  } catch (err) {
    rows.push([spec, `cannot load: ${err.message.slice(0, 80)}`, '', '', '', '', '']);
    continue;
  }
  rows.push([spec.replace('./build/', ''), MiB(m.rss), plus(m.rss - bare.rss), plus(m.rssAnon - bare.rssAnon), plus(m.rssFile - bare.rssFile), plus(m.heapUsed - bare.heapUsed), MiB(m.heapTotal)]);
}
console.log(`node ${process.version} ${nodeFlags.join(' ')}; MiB, median of ${RUNS} processes each`);
for (const r of rows) console.log(`| ${r.join(' | ')} |`);
