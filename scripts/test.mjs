#!/usr/bin/env node
// `npm test`: build the addon and the TypeScript, run every ava test, and end with the line
// CI reads: "N passed, N failed". ava prints no such line (and none at all for passes when
// something fails), so we run it with --tap and count. Extra args go to ava (file globs,
// --match). A run that executes no test counts as a failure.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
process.chdir(root);

function step(label, cmd, args) {
  const r = spawnSync(cmd, args, { stdio: 'inherit' });
  if (r.status !== 0) {
    console.log(`build failed at: ${label}`);
    console.log('0 passed, 1 failed');
    process.exit(1);
  }
}

step('native addon (cmake-js)', process.execPath, ['node_modules/cmake-js/bin/cmake-js', 'compile', '--directory', 'native', '--out', 'build/native', '--log-level', 'warn']);
step('typescript (tsc)', process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.json']);

// The Kubernetes tests run binaries built from the Go module proxy: the first build takes tens
// of minutes, far past ava's timeout, so it happens here, with progress, when the whole suite
// runs or a selected file uses the kube fixtures. Once cached it is a hash and an exit.
const files = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const uses = (re) => (f) => existsSync(f) && re.test(readFileSync(f, 'utf8'));
if (files.length === 0 || files.some(uses(/fixtures\/kube-/))) step('kube binaries (scripts/build-kube.sh)', 'bash', ['scripts/build-kube.sh']);
// The conformance tests' e2e.test, kube-proxy, CoreDNS and images: the same, another entry.
if (files.length === 0 || files.some(uses(/fixtures\/(conformance-|kube-full-cluster)/))) step('conformance binaries (scripts/build-conformance.sh)', 'bash', ['scripts/build-conformance.sh']);

// npm puts its own bin dirs (node_modules/.bin, npm's node-gyp shim) first on PATH, and ava's
// dependency @vercel/nft installs a bin named `nft` there: a test that runs `nft` would get a
// JavaScript file tracer, not nftables. The tests see the machine's PATH, as a user's shell would.
const machinePath = (process.env.PATH ?? '').split(':').filter((d) => !d.includes('/node_modules/')).join(':');
const ava = spawn(process.execPath, ['node_modules/ava/entrypoints/cli.mjs', '--tap', ...process.argv.slice(2)], {
  stdio: ['ignore', 'pipe', 'inherit'],
  env: { ...process.env, PATH: machinePath },
});
let passed = 0;
let failed = 0;
let skipped = 0;
// ava's own tally ("# fail N"): it also counts failures that print no `not ok` line of their own
// (an uncaught exception, a timeout), so the last line never says fewer than ava does.
let avaFailed = 0;
createInterface({ input: ava.stdout }).on('line', (line) => {
  console.log(line);
  const tally = /^# fail (\d+)$/.exec(line);
  if (tally) avaFailed = Number(tally[1]);
  if (/^ok \d+/.test(line)) {
    if (/# SKIP/.test(line)) skipped++;
    else passed++;
  } else if (/^not ok \d+/.test(line)) {
    if (/# TODO/.test(line)) skipped++;
    else failed++;
  }
});
ava.on('close', (code) => {
  failed = Math.max(failed, avaFailed);
  if (code !== 0 && failed === 0) failed = 1; // ava crashed or a file failed outside a test
  if (passed + failed === 0) failed = 1; // ran nothing: that is a failure
  console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
  process.exit(failed ? 1 : 0);
});
