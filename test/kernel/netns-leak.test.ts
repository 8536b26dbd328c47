// Many identify and create/delete cycles leave no fd behind (counted in a child process, so
// other test files' fds do not blur the count) and no pin or mount behind.
import test from 'ava';
import { writeFileSync } from 'node:fs';
import { createNetns, deleteNetns } from '../../src/net/netns.js';
import { mountsUnder, runChild, tempRunDir } from '../helpers/ns-fixtures.js';

test('10,000 identify cycles (netns, non-netns, host check) leak no fd', async (t) => {
  const dir = tempRunDir(t, 'kn2a-');
  const pin = `${dir}/kn2a-pod`;
  await createNetns(pin);
  t.teardown(() => deleteNetns(pin, { ignoreMissing: true }));
  const regular = `${dir}/kn2a-regular`;
  writeFileSync(regular, '');

  const r = (await runChild('identify', [pin, regular, '10000'])) as { before: string[]; after: string[] };
  t.true(r.before.length > 0);
  t.deepEqual(r.after, r.before);
});

test('1,000 create/delete cycles leak no fd and leave no pin or mount', async (t) => {
  const dir = tempRunDir(t, 'kn2b-');
  const runDir = `${dir}/netns`;
  const r = (await runChild('create-delete', [runDir, '1000'], 120_000)) as {
    before: string[];
    after: string[];
    leftovers: string[];
    ms: number;
  };
  t.log(`1000 create+delete cycles took ${r.ms} ms`);
  t.deepEqual(r.after, r.before);
  t.deepEqual(r.leftovers, []);
  t.deepEqual(mountsUnder(runDir), [runDir], 'only the run dir self-bind remains');
});
