#!/usr/bin/env node
// `npm run bench [-- --full ...]`: build what the bench needs, then run build/bench/run.js
// with the given args. The bench's own TypeScript is compiled with bench/tsconfig.json so a
// half-finished file elsewhere in the tree does not stop it; the addon build (needed only by
// the knit contender's daemon) is incremental and a failure there only warns — knit is then
// reported as not run. --no-build skips both.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
process.chdir(root);

const args = process.argv.slice(2);
const noBuild = args.includes('--no-build');
const benchArgs = args.filter((a) => a !== '--no-build');
const wantsHelpOnly = ['--help', '-h', '--cleanup', '--report'].some((a) => benchArgs.includes(a)); // no measuring: no build

function step(label, cmd, cmdArgs, { required }) {
  const r = spawnSync(cmd, cmdArgs, { stdio: 'inherit' });
  if (r.status === 0) return true;
  console.error(`bench: build step failed: ${label}${required ? '' : ' (continuing; knit will be skipped if it needs it)'}`);
  if (required) process.exit(1);
  return false;
}

if (!noBuild && !wantsHelpOnly) {
  step('native addon (cmake-js)', process.execPath, ['node_modules/cmake-js/bin/cmake-js', 'compile', '--directory', 'native', '--out', 'build/native', '--log-level', 'warn'], { required: false });
  // tsc emits even when it reports type errors elsewhere; only a missing entry point is fatal
  const ok = step('typescript (bench/tsconfig.json)', process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'bench/tsconfig.json'], { required: false });
  if (!ok && !existsSync('build/bench/run.js')) process.exit(1);
}
if (!existsSync('build/bench/run.js')) {
  console.error('bench: build/bench/run.js missing: run without --no-build');
  process.exit(1);
}
// Ctrl-C reaches the bench directly (same process group); we only wait for its cleanup, and
// pass on signals sent to us alone.
const bench = spawn(process.execPath, ['build/bench/run.js', ...benchArgs], { stdio: 'inherit' });
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => {
    if (sig !== 'SIGINT') bench.kill(sig);
  });
}
bench.on('exit', (code, signal) => process.exit(code ?? (signal ? 128 : 1)));
