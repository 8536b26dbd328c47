// The layers of the house (docs/architecture.md) as a test: a module may import only from its
// own layer or from a layer below it. src/base, the floor, imports nothing of knit's, so every
// layer can build on the plan, error, name and strategy definitions without a cycle.
import test from 'ava';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** Lowest first. Layers on one row may not import each other. */
const LAYERS: string[][] = [
  ['src/base'],
  ['src/net'],
  ['src/store', 'src/ipam'],
  ['src/cni', 'src/cni-exec', 'src/devices', 'src/kube', 'src/dhcp'],
  ['src/netattach'],
  ['src/config'],
  ['src/cluster', 'src/policy'],
  ['runtimes'],
  ['src/core'],
  ['src/dra'],
  ['src/api'],
  ['src/cni-frontend'],
  ['src/daemon'],
  ['src/cli'],
];
const rankOf = new Map(LAYERS.flatMap((row, rank) => row.map((layer) => [layer, rank] as const)));

function layerOf(file: string): string | undefined {
  return [...rankOf.keys()].find((layer) => file === layer || file.startsWith(layer + '/'));
}

function* sources(dir: string): Generator<string> {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) yield* sources(p);
    else if (p.endsWith('.ts')) yield p;
  }
}

/** Every import of a knit module (relative specifier), type-only ones included: a type is a
 * dependency too. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)].map((m) =>
    path.normalize(path.join(path.dirname(file), m[1]!)),
  );
}

function upwardArrows(): string[] {
  const bad: string[] = [];
  for (const file of [...sources('src'), ...sources('runtimes')]) {
    const from = layerOf(file);
    if (!from) {
      bad.push(`${file} is in no layer: add its folder to LAYERS`);
      continue;
    }
    for (const target of importsOf(file)) {
      const to = layerOf(target);
      if (!to) {
        bad.push(`${file} imports ${target}, outside src/ and runtimes/`);
        continue;
      }
      if (to === from) continue;
      const [a, b] = [rankOf.get(from)!, rankOf.get(to)!];
      if (b >= a) bad.push(`${file} (${from}) imports ${target} (${to}): ${b > a ? 'an upward arrow' : 'a sideways arrow'}`);
    }
  }
  return bad;
}

test('no module imports from a layer above its own, or from a sibling layer', (t) => {
  t.deepEqual(upwardArrows(), []);
});

test('the check sees arrows: the folders it walks have imports, and every one is ranked', (t) => {
  const files = [...sources('src'), ...sources('runtimes')];
  t.true(files.length > 100);
  t.true(files.flatMap(importsOf).length > 300);
  for (const row of LAYERS) for (const layer of row) t.true(files.some((f) => layerOf(f) === layer), `${layer} has files`);
});
