#!/usr/bin/env node
// `npm run conformance [-- --suite conformance,sig-network,netpol,cnp] [--focus <regex>]`: build
// the addon and the TypeScript, the test cluster's binaries (scripts/build-kube.sh) and the
// conformance ones (scripts/build-conformance.sh; with cnp, scripts/build-cnp-conformance.sh
// too), then run build/test/conformance/main.js as root (README "Kubernetes conformance"). The
// exit code is main.js's.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
process.chdir(root);

function step(label, cmd, args) {
  const r = spawnSync(cmd, args, { stdio: 'inherit' });
  if (r.status !== 0) {
    console.error(`conformance: build failed at: ${label}`);
    process.exit(1);
  }
}

step('native addon (cmake-js)', process.execPath, ['node_modules/cmake-js/bin/cmake-js', 'compile', '--directory', 'native', '--out', 'build/native', '--log-level', 'warn']);
step('typescript (tsc)', process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.json']);
step('kube binaries (scripts/build-kube.sh)', 'bash', ['scripts/build-kube.sh']);
step('conformance binaries and images (scripts/build-conformance.sh)', 'bash', ['scripts/build-conformance.sh']);
const suiteArg = process.argv.indexOf('--suite');
if (suiteArg >= 0 && (process.argv[suiteArg + 1] ?? '').split(',').includes('cnp')) {
  step('network-policy-api conformance (scripts/build-cnp-conformance.sh)', 'bash', ['scripts/build-cnp-conformance.sh']);
}
// The machine's PATH, not npm's (its node_modules/.bin has an `nft` that is not nftables).
const machinePath = (process.env.PATH ?? '').split(':').filter((d) => !d.includes('/node_modules/')).join(':');
const r = spawnSync(process.execPath, ['build/test/conformance/main.js', ...process.argv.slice(2)], { stdio: 'inherit', env: { ...process.env, PATH: machinePath } });
process.exit(r.status ?? 1);
