// The repository stands on its own: code and docs cite files inside it or public sources,
// never a sibling checkout (../shared) or notes that ship elsewhere (research/*.md).
import test from 'ava';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

const ROOTS = ['src', 'runtimes', 'native', 'proto', 'bench', 'scripts', 'test', 'docs', 'deploy', 'bin', 'README.md'];
const TEXT = /\.(ts|mjs|js|cc|h|proto|md|sh|ya?ml|json|txt)$|^[^.]+$/;
const OUTSIDE = /\.\.\/shared\b|\bresearch\/[\w-]+\.md/;

function* files(p: string): Generator<string> {
  let st;
  try {
    st = statSync(p);
  } catch {
    return; // an optional root (docs, deploy) that does not exist yet
  }
  if (st.isFile()) {
    if (TEXT.test(path.basename(p))) yield p;
    return;
  }
  for (const name of readdirSync(p)) {
    if (name === 'node_modules' || name === 'results') continue;
    yield* files(path.join(p, name));
  }
}

test('no file cites a document outside the repository', (t) => {
  const offenders: string[] = [];
  let scanned = 0;
  for (const root of ROOTS) {
    for (const f of files(root)) {
      if (f === path.join('test', 'unit', 'self-contained.test.ts')) continue; // names the pattern
      scanned++;
      readFileSync(f, 'utf8').split('\n').forEach((line, i) => {
        if (OUTSIDE.test(line)) offenders.push(`${f}:${i + 1}: ${line.trim().slice(0, 100)}`);
      });
    }
  }
  t.true(scanned > 50, `scanned only ${scanned} files`);
  t.deepEqual(offenders, []);
});
