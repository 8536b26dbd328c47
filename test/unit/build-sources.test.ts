// The addon has one build description (native/CMakeLists.txt); binding.gyp must build the same
// sources, or a node-gyp user would get a different addon.
import test from 'ava';
import { readFileSync } from 'node:fs';

function cmakeSources(): string[] {
  const text = readFileSync('native/CMakeLists.txt', 'utf8');
  const block = /set\(KNIT_SOURCES([\s\S]*?)\)/.exec(text);
  if (!block) throw new Error('KNIT_SOURCES not found in native/CMakeLists.txt');
  return block[1].split(/\s+/).filter(Boolean).map((s) => `native/${s}`).sort();
}

function gypSources(): string[] {
  const gyp = JSON.parse(readFileSync('binding.gyp', 'utf8'));
  return [...gyp.targets[0].sources].sort();
}

test('binding.gyp builds exactly the sources CMakeLists.txt builds', (t) => {
  const cmake = cmakeSources();
  t.true(cmake.length > 0);
  t.deepEqual(gypSources(), cmake);
});
