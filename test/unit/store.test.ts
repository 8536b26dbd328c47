// RecordStore and atomic writes: round trips, write ordering per id, crash leftovers, corrupt
// files skipped and reported, schema checks on load and on put.
import test from 'ava';
import { spawn } from 'node:child_process';
import { mkdtemp, mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { z } from 'zod/v3';
import { atomicWriteFile, removeFile } from '../../src/store/atomic.js';
import { RecordStore } from '../../src/store/record-store.js';
import { fileNameOf } from '../../src/store/file-names.js';
import { KnitError } from '../../src/base/errors.js';

async function tempDir(t: { teardown(fn: () => Promise<void>): void }, label: string): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), `knit-store-${label}-`));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

test('atomicWriteFile replaces content, leaves no temporary file, and is private (0600)', async (t) => {
  const dir = await tempDir(t, 'atomic');
  const file = path.join(dir, 'doc.json');
  await atomicWriteFile(file, 'one');
  await atomicWriteFile(file, 'two');
  t.is(await readFile(file, 'utf8'), 'two');
  t.deepEqual(await readdir(dir), ['doc.json']);
  t.is((await stat(file)).mode & 0o777, 0o600);
  await removeFile(file);
  await removeFile(file); // already gone: fine
  t.deepEqual(await readdir(dir), []);
  await t.throwsAsync(atomicWriteFile(path.join(dir, 'missing-dir', 'x'), 'x'), { code: 'ENOENT' });
  t.deepEqual(await readdir(dir), []);
});

test('a writer killed (SIGKILL) mid-write leaves old or new content whole, and open() clears its temp files', async (t) => {
  const dir = await tempDir(t, 'crash');
  const big = (ch: string) => JSON.stringify({ fill: ch.repeat(2_000_000) });
  const atomicUrl = new URL('../../src/store/atomic.js', import.meta.url).href;
  const file = path.join(dir, 'victim.json');
  await atomicWriteFile(file, big('a'));
  // The child rewrites the file over and over, alternating contents, until it is killed.
  const script = `
    import { atomicWriteFile } from ${JSON.stringify(atomicUrl)};
    const big = ${big.toString()};
    for (let i = 0; ; i++) { await atomicWriteFile(${JSON.stringify(file)}, big(i % 2 ? 'a' : 'b')); console.log('wrote', i); }`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  let writes = 0;
  for await (const line of createInterface({ input: child.stdout! })) {
    if (line.startsWith('wrote') && ++writes === 3) break;
  }
  child.kill('SIGKILL'); // most likely mid-write: each write is ~2 MB plus two fsyncs
  await exited;
  const content = await readFile(file, 'utf8');
  t.true(content === big('a') || content === big('b'), 'file is one whole version');
  // Whatever temp file the kill left behind is removed by open(); the record survives.
  const store = await RecordStore.open<{ fill: string }>(dir);
  t.true(store.get('victim')!.fill.length === 2_000_000);
  t.false((await readdir(dir)).some((n) => n.endsWith('.tmp')));
});

test('simulated crash before rename: the old record wins, the temp file is removed and reported', async (t) => {
  const dir = await tempDir(t, 'tmp');
  const store = await RecordStore.open<{ v: number }>(dir);
  await store.put('sb1', { v: 1 });
  // What a crash between write and rename leaves: a half-written temp file next to the record.
  const tmpName = `.${fileNameOf('sb1')}.999-1.tmp`;
  await writeFile(path.join(dir, tmpName), '{"v": 2, "trunc');
  const seen: string[] = [];
  const reopened = await RecordStore.open<{ v: number }>(dir, undefined, { onProblem: (p) => seen.push(p.reason) });
  t.deepEqual(reopened.get('sb1'), { v: 1 });
  t.is(reopened.size, 1);
  t.deepEqual(await readdir(dir), [fileNameOf('sb1')]);
  t.is(reopened.problems.length, 1);
  t.is(reopened.problems[0].file, path.join(dir, tmpName));
  t.regex(seen[0], /temporary file left by an interrupted write/);
});

test('round trip of awkward ids: every id maps to one safe file name and back', async (t) => {
  const dir = await tempDir(t, 'ids');
  const ids = [
    'a3f9c0de'.repeat(8), // CRI sandbox id
    'kube-system/coredns-5d78c9869d-abcde',
    '.', '..', '.hidden', 'a.b', '%41', 'A', 'with space', 'tab\there', 'nul\u0000byte', 'ünïcödé', '网络', '🦀 crab', 'x'.repeat(250),
  ];
  const store = await RecordStore.open<{ id: string }>(dir);
  await Promise.all(ids.map((id) => store.put(id, { id })));
  const names = await readdir(dir);
  t.is(names.length, ids.length);
  for (const name of names) {
    t.regex(name, /^[A-Za-z0-9_%-][A-Za-z0-9_.%-]*\.json$/, name);
    t.true(Buffer.byteLength(name) <= 255);
  }
  const reopened = await RecordStore.open<{ id: string }>(dir);
  t.deepEqual(reopened.problems, []);
  t.deepEqual([...reopened.ids()].sort(), [...ids].sort());
  for (const id of ids) t.is(reopened.get(id)?.id, id);
  t.is(fileNameOf('A'), 'A.json');
  t.is(fileNameOf('%41'), '%2541.json', '"%" itself is escaped, so "%41" and "A" differ');
});

test('ids that cannot be stored are refused with a clear error', async (t) => {
  const dir = await tempDir(t, 'badid');
  const store = await RecordStore.open<object>(dir);
  await t.throwsAsync(store.put('', {}), { instanceOf: KnitError, message: /id: must not be empty/ });
  await t.throwsAsync(store.put('é'.repeat(200), {}), { message: /too long to store/ });
  await t.throwsAsync(store.put('lone\uD800', {}), { message: /not well-formed Unicode/ });
  t.deepEqual(await readdir(dir), []);
});

test('concurrent puts for one id land in call order: the last one wins, in memory and on disk', async (t) => {
  const dir = await tempDir(t, 'order');
  const store = await RecordStore.open<{ seq: number }>(dir);
  const doc = { seq: 0 };
  const writes: Promise<void>[] = [];
  for (let i = 0; i < 100; i++) {
    doc.seq = i; // the same object, mutated: each put must capture the value at call time
    writes.push(store.put('sb', doc));
    if (i % 10 === 0) writes.push(store.put(`other-${i}`, { seq: -i })); // other ids interleave freely
  }
  await Promise.all(writes);
  t.deepEqual(store.get('sb'), { seq: 99 });
  t.not(store.get('sb'), doc, 'the store holds its own copy');
  t.deepEqual(JSON.parse(await readFile(path.join(dir, 'sb.json'), 'utf8')), { seq: 99 });
  t.is(store.size, 11);
  t.false((await readdir(dir)).some((n) => n.endsWith('.tmp')));

  // put / remove / put, and put / put / remove, unawaited: the order still holds.
  const a = [store.put('x', { seq: 1 }), store.remove('x'), store.put('x', { seq: 2 })];
  const b = [store.put('y', { seq: 1 }), store.put('y', { seq: 2 }), store.remove('y')];
  await Promise.all([...a, ...b]);
  t.deepEqual(store.get('x'), { seq: 2 });
  t.false(store.has('y'));
  const reopened = await RecordStore.open<{ seq: number }>(dir);
  t.deepEqual(reopened.get('x'), { seq: 2 });
  t.false(reopened.has('y'));
  t.deepEqual(reopened.get('sb'), { seq: 99 });
});

test('get answers a document equal to what open() reads back, a fresh parse on every read, never the one put', async (t) => {
  const dir = await tempDir(t, 'read-back');
  const store = await RecordStore.open<{ n?: number; at?: unknown; gone?: unknown; d?: string }>(dir);
  const doc = { n: 1, at: new Date(0), gone: undefined };
  await store.put('sb', doc);
  doc.n = 2;
  const first = store.get('sb');
  t.deepEqual(first, { n: 1, at: '1970-01-01T00:00:00.000Z' }, 'as JSON has it: a date as text, undefined left out');
  t.not(store.get('sb'), first, 'held as text, parsed at each read: a caller cannot change what the next one reads');
  t.deepEqual(store.get('sb'), first);
  t.deepEqual([...store.values()], [first]);
  t.deepEqual([...store.entries()], [['sb', first]]);
  t.deepEqual((await RecordStore.open(dir)).get('sb'), first);
  // Characters above U+00FF are written as \u escapes (the text stays one byte per character)
  // and read back as they were.
  await store.put('wide', { d: 'kn0 ↔ eth0, é' });
  t.deepEqual(store.get('wide'), { d: 'kn0 ↔ eth0, é' });
  t.deepEqual((await RecordStore.open(dir)).get('wide'), { d: 'kn0 ↔ eth0, é' });
  const texts = await Promise.all((await readdir(dir)).map((f) => readFile(path.join(dir, f), 'utf8')));
  t.true(texts.some((text) => text.includes('kn0 \\u2194 eth0, é')));
  // A document with no JSON form is refused at the put, and nothing is written.
  await t.throwsAsync(store.put('none', undefined as never), { instanceOf: KnitError, message: /would not load back/ });
  t.false(store.has('none'));
});

test('a failed write rejects, keeps the previous document, and does not block later writes', async (t) => {
  const dir = await tempDir(t, 'fail');
  const sub = path.join(dir, 'records');
  const store = await RecordStore.open<{ v: number }>(sub);
  await store.put('k', { v: 1 });
  await rm(sub, { recursive: true });
  await t.throwsAsync(store.put('k', { v: 2 }), { code: 'ENOENT' });
  t.deepEqual(store.get('k'), { v: 1 });
  await mkdir(sub);
  await store.put('k', { v: 3 });
  t.deepEqual(store.get('k'), { v: 3 });
  await store.settled();
});

test('corrupt and foreign files are skipped and reported; good records still load', async (t) => {
  const dir = await tempDir(t, 'corrupt');
  const schema = z.object({ version: z.literal(1), name: z.string() });
  const good = await RecordStore.open(dir, schema);
  await good.put('ok', { version: 1, name: 'fine' });
  await writeFile(path.join(dir, 'truncated.json'), '{"version": 1, "na');
  await writeFile(path.join(dir, 'wrong-shape.json'), '{"version": 2, "name": 7}');
  await writeFile(path.join(dir, '%61.json'), '{"version": 1, "name": "not canonical: a.json is"}');
  await writeFile(path.join(dir, 'README'), 'hello');
  await mkdir(path.join(dir, 'adir.json'));
  const store = await RecordStore.open(dir, schema);
  t.deepEqual([...store.entries()], [['ok', { version: 1, name: 'fine' }]]);
  const byFile = Object.fromEntries(store.problems.map((p) => [path.basename(p.file), p.reason]));
  t.regex(byFile['truncated.json'], /not valid JSON/);
  t.regex(byFile['wrong-shape.json'], /does not match the record schema \(version: .*; name: /);
  t.regex(byFile['%61.json'], /not a record file name/);
  t.regex(byFile['README'], /not a record file name/);
  t.regex(byFile['adir.json'], /not a regular file/);
  t.is(store.problems.length, 5);
  // Skipped files are left for a human to look at.
  t.true((await readdir(dir)).includes('truncated.json'));
});

test('put refuses a document its schema would reject on load (nothing is written)', async (t) => {
  const dir = await tempDir(t, 'schema');
  const schema = z.object({ n: z.number().int() });
  const store = await RecordStore.open(dir, schema);
  await t.throwsAsync(store.put('bad', { n: 1.5 }), { instanceOf: KnitError, message: /record "bad" would not load back: .*n: / });
  t.deepEqual(await readdir(dir), []);
  t.false(store.has('bad'));
});

test('open creates a missing directory tree (private to root)', async (t) => {
  const dir = await tempDir(t, 'mkdir');
  const nested = path.join(dir, 'run', 'knit', 'sandboxes');
  const store = await RecordStore.open<object>(nested);
  t.is(store.size, 0);
  t.is((await stat(nested)).mode & 0o777, 0o700);
});

test('open() with formatVersion refuses a store holding a record of a newer format, naming it', async (t) => {
  const dir = await tempDir(t, 'format');
  await writeFile(path.join(dir, fileNameOf('old')), JSON.stringify({ version: 1, v: 'a' }));
  await writeFile(path.join(dir, fileNameOf('new')), JSON.stringify({ version: 3, v: 'b' }));
  const err = await t.throwsAsync(RecordStore.open(dir, undefined, { formatVersion: 2 }), { instanceOf: KnitError });
  t.is(err!.code, 'FAILED_PRECONDITION');
  t.regex(err!.message, /1 record\(s\) in format version 3, written by a newer knit; this knit reads format version 2 at most/);
  t.regex(err!.message, /"new"/);
  t.notRegex(err!.message, /"old"/);
  // Refusing wrote nothing: both files are as they were.
  t.deepEqual((await readdir(dir)).sort(), [fileNameOf('new'), fileNameOf('old')].sort());
  // The same store opens for code that reads format 3, and without the option.
  t.is((await RecordStore.open(dir, undefined, { formatVersion: 3 })).size, 2);
  t.is((await RecordStore.open(dir)).size, 2);
});

test('prepare serializes ahead: commit writes what was prepared, one line of JSON, once; get answers a copy', async (t) => {
  const dir = await tempDir(t, 'prepare');
  const store = await RecordStore.open<{ n: number; tags: string[] }>(dir);
  const doc = { n: 1, tags: ['a'] };
  const write = store.prepare('sb', doc);
  doc.tags.push('changed after prepare');
  t.is(store.get('sb'), undefined, 'the prepare alone wrote nothing');
  await write.commit();
  const text = await readFile(path.join(dir, fileNameOf('sb')), 'utf8');
  t.is(text, '{"n":1,"tags":["a"]}\n', 'what was prepared is what lands');
  t.deepEqual(store.get('sb'), { n: 1, tags: ['a'] });
  t.not(store.get('sb'), doc);
  // A prepared write lands once: a second commit is a bug of the caller's, and changes nothing.
  await store.put('sb', { n: 2, tags: [] });
  const again = await t.throwsAsync(write.commit(), { instanceOf: KnitError });
  t.is(again!.code, 'INTERNAL');
  t.deepEqual(store.get('sb'), { n: 2, tags: [] });
  // Writes for one id land in call order, prepared or not.
  const first = store.prepare('sb', { n: 3, tags: [] });
  await Promise.all([first.commit(), store.put('sb', { n: 4, tags: [] })]);
  const reopened = await RecordStore.open<{ n: number; tags: string[] }>(dir);
  t.deepEqual([...reopened.entries()], [['sb', { n: 4, tags: [] }]]);
});

test('prepare refuses a document its schema would reject, as put does', async (t) => {
  const dir = await tempDir(t, 'prepare-schema');
  const store = await RecordStore.open(dir, z.object({ n: z.number() }));
  t.throws(() => store.prepare('sb', { n: 'x' } as never), { instanceOf: KnitError, message: /would not load back/ });
  t.is(store.get('sb'), undefined);
});

test('tally counts records by their summarize() tag without reading them, through writes, removes and a reopen', async (t) => {
  const dir = await tempDir(t, 'tally');
  const summarize = (doc: unknown) => (doc as { state: string }).state;
  const store = await RecordStore.open<{ state: string }>(dir, undefined, { summarize });
  await store.put('a', { state: 'attaching' });
  await store.put('b', { state: 'attached' });
  await store.put('a', { state: 'attached' });
  t.deepEqual(Object.fromEntries(store.tally()), { attached: 2 });
  await store.remove('b');
  await store.put('c', { state: 'detaching' });
  t.deepEqual(Object.fromEntries(store.tally()), { attached: 1, detaching: 1 });
  t.deepEqual(Object.fromEntries((await RecordStore.open(dir, undefined, { summarize })).tally()), { attached: 1, detaching: 1 });
  t.is((await RecordStore.open(dir)).tally().size, 0, 'no summarize, no tally');
});
