// The runtime list in src/base/runtime-kinds.ts and the knit.v1.Runtime enum in the proto are
// the two places a runtime is declared; everything else derives from the list. They must agree.
import test from 'ava';
import * as protoLoader from '@grpc/proto-loader';
import path from 'node:path';
import { protoDir } from '../../src/api/proto.js';
import { RUNTIME_KINDS, runtimeFromWireName, runtimeWireName } from '../../src/base/runtime-kinds.js';
import { parseRuntime } from '../../src/cli/flags.js';
import { strategies } from '../../runtimes/index.js';

function protoRuntimeNames(): string[] {
  const def = protoLoader.loadSync(path.join(protoDir(), 'knit/v1/knit.proto'), { includeDirs: [protoDir()] });
  const runtime = def['knit.v1.Runtime'] as unknown as { type: { value: { name: string; number: number }[] } };
  return runtime.type.value.filter((v) => v.number !== 0).map((v) => v.name);
}

test('every runtime in the list is a value of proto knit.v1.Runtime, and the reverse', (t) => {
  t.deepEqual(protoRuntimeNames().sort(), RUNTIME_KINDS.map(runtimeWireName).sort());
});

test('every runtime in the list has a strategy', (t) => {
  t.deepEqual(Object.keys(strategies).sort(), [...RUNTIME_KINDS].sort());
});

test('wire names map both ways, the unset value to runc, and nothing else is a runtime', (t) => {
  for (const kind of RUNTIME_KINDS) t.is(runtimeFromWireName(runtimeWireName(kind)), kind);
  t.is(runtimeFromWireName('RUNTIME_UNSPECIFIED'), 'runc');
  for (const bad of ['runc', 'Kata', 'FIRECRACKER', '3', '']) t.is(runtimeFromWireName(bad), undefined, bad);
});

test('the CLI takes exactly the listed runtimes', (t) => {
  for (const kind of RUNTIME_KINDS) t.is(parseRuntime(kind), runtimeWireName(kind));
  t.throws(() => parseRuntime('firecracker'), { message: /must be one of runc, kata, kubevirt/ });
});
