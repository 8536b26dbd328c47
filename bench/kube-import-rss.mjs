#!/usr/bin/env node
// What it costs a Node process to load a Kubernetes API client: resident memory (RSS) and heap
// after importing knit's src/kube, against @kubernetes/client-node (the whole package, and its
// Watch module alone). Each case is a fresh `node` process that imports, collects garbage, and
// reports; the median of several runs is printed. Not a test; the figures go in
// docs/kubernetes-api.md.
// Usage: node bench/kube-import-rss.mjs [runs=7] after `npm run build`. client-node is not a
// dependency of knit: install it in a scratch dir and point KCN_DIR at that dir, e.g.
//   mkdir /tmp/kcn && cd /tmp/kcn && npm init -y && npm install @kubernetes/client-node@1.4.0
//   KCN_DIR=/tmp/kcn node bench/kube-import-rss.mjs
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const RUNS = Number(process.argv[2] ?? 7);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const url = (p) => JSON.stringify(pathToFileURL(p).href);
const kube = url(path.join(root, 'build/src/kube/index.js'));
const yaml = url(path.join(root, 'node_modules/yaml/dist/index.js'));
const kcnDir = process.env.KCN_DIR && path.join(process.env.KCN_DIR, 'node_modules/@kubernetes/client-node');
const kcn = (file) => url(path.join(kcnDir, file));

/** [name, module code run before the measurement] */
const cases = [
  ['node, nothing imported', ''],
  ['yaml (a daemon with a YAML config loads it anyway)', `await import(${yaml});`],
  ['knit src/kube (yaml only for a kubeconfig in YAML, not loaded here)', `await import(${kube});`],
  ['yaml, then knit src/kube (what a daemon with a YAML config adds)', `await import(${yaml}); await import(${kube});`],
  ['knit src/kube, an informer started and stopped (200 ms run included)', `const k = await import(${kube}); const c = new k.KubeClient({ server: 'https://127.0.0.1:1', source: 'bench' }); const i = new k.Informer(c, '/api/v1/nodes', { backoff: { initialMs: 60000, maxMs: 60000 } }); i.start(); await new Promise((r) => setTimeout(r, 200)); await i.stop(); c.close();`],
];
if (kcnDir && existsSync(kcnDir)) {
  cases.push(
    ['@kubernetes/client-node (the package)', `await import(${kcn('dist/index.js')});`],
    ['@kubernetes/client-node Watch module alone', `await import(${kcn('dist/watch.js')});`],
    ['@kubernetes/client-node Watch + KubeConfig (what a watch needs)', `await import(${kcn('dist/watch.js')}); await import(${kcn('dist/config.js')});`],
  );
} else {
  console.error('KCN_DIR unset or without @kubernetes/client-node: its rows are skipped');
}

const probe = (code) => `
const t0 = performance.now();
${code}
const ms = performance.now() - t0;
globalThis.gc(); globalThis.gc();
const m = process.memoryUsage();
console.log(JSON.stringify({ rss: m.rss, heap: m.heapUsed, ms }));`;

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const mib = (b) => (b / 2 ** 20).toFixed(1);

const rows = [];
for (const [name, code] of cases) {
  const runs = [];
  for (let i = 0; i < RUNS; i++) {
    const out = execFileSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', probe(code)], { encoding: 'utf8' });
    runs.push(JSON.parse(out.trim().split('\n').pop()));
  }
  rows.push({ name, rss: median(runs.map((r) => r.rss)), heap: median(runs.map((r) => r.heap)), ms: median(runs.map((r) => r.ms)) });
}
const bare = rows[0];
console.log(`node ${process.version}, median of ${RUNS} fresh processes each, after two full GCs`);
console.log('| case | RSS MiB | + over bare node | heap used MiB | import ms |');
console.log('|---|---:|---:|---:|---:|');
for (const r of rows) {
  const plus = r === bare ? '' : `+${mib(r.rss - bare.rss)}`;
  console.log(`| ${r.name} | ${mib(r.rss)} | ${plus} | ${mib(r.heap)} | ${r.ms.toFixed(1)} |`);
}
