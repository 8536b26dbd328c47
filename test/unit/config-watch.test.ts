// watchConfig: reloads on change, keeps the running config when the new file is bad, follows a
// ConfigMap-style "..data" symlink swap, and reports a failing onChange.
import test from 'ava';
import { mkdtemp, mkdir, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { watchConfig } from '../../src/config/watch.js';
import type { KnitConfig } from '../../src/config/resolve.js';

type Event = { kind: 'change'; config: KnitConfig } | { kind: 'error'; err: Error };

/** Collects watch callbacks; next() waits for the next one (ava's timeout bounds the wait). */
function recorder() {
  const queue: Event[] = [];
  let wake: (() => void) | undefined;
  const push = (e: Event) => {
    queue.push(e);
    wake?.();
  };
  return {
    onChange: (config: KnitConfig) => push({ kind: 'change', config }),
    onError: (err: Error) => push({ kind: 'error', err }),
    push,
    async next(): Promise<Event> {
      while (queue.length === 0) await new Promise<void>((r) => (wake = r));
      return queue.shift()!;
    },
  };
}

const withMtu = (mtu: number) => JSON.stringify({ networks: [{ name: 'w', ipv4: { subnet: '10.50.0.0/24' }, mtu }] }, null, 2);

async function setup(t: { teardown(fn: () => void | Promise<void>): void }) {
  const dir = await mkdtemp(path.join(tmpdir(), 'knit-config-watch-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

test('reloads on change; an invalid file is reported and the old config stays', async (t) => {
  const dir = await setup(t);
  const file = path.join(dir, 'config.json');
  await writeFile(file, withMtu(1500));
  const rec = recorder();
  const stop = watchConfig(file, rec.onChange, rec.onError, { debounceMs: 20 });
  t.teardown(stop);

  await writeFile(file, withMtu(1400));
  let e = await rec.next();
  t.is(e.kind, 'change');
  t.is(e.kind === 'change' && e.config.networks[0].mtu, 1400);

  await writeFile(file, withMtu(1400).replace('"mtu": 1400', '"mtu": 12'));
  e = await rec.next();
  t.is(e.kind, 'error');
  t.regex(e.kind === 'error' ? e.err.message : '', new RegExp(`^${file}:\\d+: networks\\[0\\]\\.mtu: 12 is below the minimum 68`));

  await writeFile(file, '{ "networks": [');
  e = await rec.next();
  t.is(e.kind, 'error');
  t.regex(e.kind === 'error' ? e.err.message : '', /syntax error/);

  // Back to the running config: nothing to apply. Then a real change: that is the next event,
  // which shows the unchanged content produced no call.
  await writeFile(file, withMtu(1400));
  await new Promise((r) => setTimeout(r, 100));
  await writeFile(file, withMtu(1300));
  e = await rec.next();
  t.is(e.kind, 'change');
  t.is(e.kind === 'change' && e.config.networks[0].mtu, 1300);
});

test('follows a ConfigMap update (the ..data symlink is swapped)', async (t) => {
  const dir = await setup(t);
  // The kubelet's layout: config.json -> ..data/config.json, ..data -> ..<timestamp>/
  await mkdir(path.join(dir, '..v1'));
  await writeFile(path.join(dir, '..v1', 'config.json'), withMtu(1500));
  await symlink('..v1', path.join(dir, '..data'));
  await symlink('..data/config.json', path.join(dir, 'config.json'));
  const file = path.join(dir, 'config.json');
  const rec = recorder();
  const stop = watchConfig(file, rec.onChange, rec.onError, { debounceMs: 20 });
  t.teardown(stop);

  await mkdir(path.join(dir, '..v2'));
  await writeFile(path.join(dir, '..v2', 'config.json'), withMtu(9000));
  await symlink('..v2', path.join(dir, '..data_tmp'));
  await rename(path.join(dir, '..data_tmp'), path.join(dir, '..data'));
  await rm(path.join(dir, '..v1'), { recursive: true });

  const e = await rec.next();
  t.is(e.kind, 'change');
  t.is(e.kind === 'change' && e.config.networks[0].mtu, 9000);
});

test('a failing onChange is reported, and the same content is offered again on the next event', async (t) => {
  const dir = await setup(t);
  const file = path.join(dir, 'config.json');
  await writeFile(file, withMtu(1500));
  const rec = recorder();
  let fail = true;
  const stop = watchConfig(
    file,
    async (config) => {
      if (fail) throw new Error('cannot apply now');
      rec.onChange(config);
    },
    rec.onError,
    { debounceMs: 20 },
  );
  t.teardown(stop);

  await writeFile(file, withMtu(1450));
  let e = await rec.next();
  t.is(e.kind === 'error' && e.err.message, 'cannot apply now');
  fail = false;
  await writeFile(path.join(dir, 'unrelated'), 'x'); // any event in the directory triggers a look
  e = await rec.next();
  t.is(e.kind === 'change' && e.config.networks[0].mtu, 1450);
});

test('watching a missing directory reports the error and returns a harmless stop', async (t) => {
  const dir = await setup(t);
  const rec = recorder();
  const stop = watchConfig(path.join(dir, 'nope', 'config.json'), rec.onChange, rec.onError);
  const e = await rec.next();
  t.is(e.kind, 'error');
  t.regex(e.kind === 'error' ? e.err.message : '', /ENOENT/);
  t.notThrows(stop);
});
