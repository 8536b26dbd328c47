// A node without the DRA driver must not pay for it (memory, start-up): outside src/dra, only
// dynamic import() reaches the driver and the Kubernetes API client, and only from the
// composition root, when the config has a `dra` block. The one static exception is the tiny
// label file the CNI frontend reads (src/dra/labels.ts imports nothing).
import test from 'ava';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

function* sources(dir: string): Generator<string> {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) yield* sources(p);
    else if (p.endsWith('.ts')) yield p;
  }
}

/** Imports that load a module at run time: `import type` is erased by tsc and loads nothing. */
const staticImports = (file: string) =>
  [...readFileSync(file, 'utf8').matchAll(/^\s*(import|export)(\s+type\b)?[^'(]*from\s*'(\.{1,2}\/[^']+)'/gm)]
    .filter((m) => !m[2])
    .map((m) => path.normalize(path.join(path.dirname(file), m[3]!)));

test('outside src/dra nothing imports the DRA driver or src/kube statically, except src/dra/labels.ts', (t) => {
  const bad: string[] = [];
  for (const file of [...sources('src'), ...sources('runtimes')]) {
    if (file.startsWith('src/dra/') || file.startsWith('src/kube/')) continue;
    for (const target of staticImports(file)) {
      if (target === 'src/dra/labels.js') continue;
      if (target.startsWith('src/dra/') || target.startsWith('src/kube/')) bad.push(`${file} -> ${target}`);
    }
  }
  t.deepEqual(bad, []);
  // The check sees imports: the CNI frontend's one is found.
  t.true(staticImports('src/cni-frontend/handler.ts').includes('src/dra/labels.js'));
});

test('src/dra/labels.ts imports nothing, so reading the label loads nothing else', (t) => {
  t.deepEqual(staticImports('src/dra/labels.ts'), []);
});

test('the daemon reaches the driver by dynamic import, behind the config\'s dra block', (t) => {
  const serve = readFileSync('src/daemon/serve.ts', 'utf8');
  t.regex(serve, /config\.dra \? startDraDriver\(/);
  t.regex(serve, /[^.\w]import\('\.\.\/dra\/index\.js'\)/);
  t.regex(readFileSync('src/daemon/kube-api.ts', 'utf8'), /await import\('\.\.\/kube\/index\.js'\)/);
});
