// Kata host-tap's DAN file, written by a root daemon at a path a request helps pick: it goes
// only inside the configured kata.danDir (symlinks resolved), never over a file knit did not
// write, and detach, rollback and crash repair remove only the file knit wrote.
import test from 'ava';
import { createHash } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cleanupDaemon, eventually, hostLinks, makeNetns, removeNetns, startDaemon, type Daemon } from '../helpers/daemon.js';
import { crashAndRestart } from '../helpers/crash.js';
import { uniquePrefix } from '../helpers/names.js';

const P = uniquePrefix('kdan');
const opts = { prefix: P, subnet: '10.169.11.0/24' };
const NS = `${P}pod`;
const scratch = mkdtempSync(path.join(os.tmpdir(), `knit-${P}`));
const danDir = path.join(scratch, 'dans'); // knit makes it at the first DAN file
const outside = path.join(scratch, 'elsewhere');
mkdirSync(outside);
const ids = ['a', 'b', 'c', 'd', 'e', 'f', 'g'].map((x) => `${P}${x}`);
let d: Daemon | undefined;
let netns = '';

test.before(async () => {
  netns = makeNetns(NS);
  d = await startDaemon({ ...opts, config: { kata: { danDir } } });
});
test.after.always(async () => {
  await cleanupDaemon(d, opts, ids);
  removeNetns(NS);
  rmSync(scratch, { recursive: true, force: true });
});

const attach = (id: string, binding: Record<string, string> = {}, on = d!) =>
  on.call('Attach', { sandbox_id: id, netns_path: netns, runtime: 'KATA', interfaces: [{ name: 'eth0', binding: { mode: 'host-tap', ...binding } }] });
const refusal = async (p: Promise<unknown>) => (await p.then(() => undefined, (e: grpc.ServiceError) => e)) as grpc.ServiceError | undefined;
/** Resolves once no host device carries the sandbox's tag (the reaper deletes in the background). */
const noTapsOf = (id: string) => eventually(() => !hostLinks().some((l) => l.ifalias?.includes(`sandbox=${id};`)), `no host device of ${id}`);

test.serial('the DAN file goes into kata.danDir, mode 0644, and detach removes it', async (t) => {
  const [id] = ids;
  t.teardown(() => d!.call('Detach', { sandbox_id: id }).catch(() => undefined));
  const { result } = await attach(id);
  const file = path.join(danDir, `${id}.json`);
  t.is(lstatSync(file).mode & 0o777, 0o644);
  t.is(JSON.parse(readFileSync(file, 'utf8')).devices[0].device.tap_name, result.interfaces[0].name);
  t.deepEqual(readdirSync(danDir), [`${id}.json`], 'no temporary file is left beside it');
  await d!.call('Detach', { sandbox_id: id });
  t.false(existsSync(file));
});

test.serial('binding.danDir outside kata.danDir is INVALID_ARGUMENT naming it; nothing is written there', async (t) => {
  const id = ids[1];
  t.teardown(() => d!.call('Detach', { sandbox_id: id }).catch(() => undefined));
  const err = await refusal(attach(id, { danDir: outside }));
  t.is(err?.code, grpc.status.INVALID_ARGUMENT);
  t.deepEqual(err?.metadata.get('knit-field'), ['interfaces[0].binding.danDir']);
  t.regex(err?.details ?? '', /is outside .*config kata\.danDir/);
  t.deepEqual(readdirSync(outside), []);
  await noTapsOf(id);
  // A directory below kata.danDir is fine while it stays there; a symlink out of it is not.
  mkdirSync(path.join(danDir, 'sub'));
  await attach(id, { danDir: path.join(danDir, 'sub') });
  t.true(existsSync(path.join(danDir, 'sub', `${id}.json`)));
  await d!.call('Detach', { sandbox_id: id });
  t.false(existsSync(path.join(danDir, 'sub', `${id}.json`)));
  symlinkSync(outside, path.join(danDir, 'out'));
  const err2 = await refusal(attach(id, { danDir: path.join(danDir, 'out') }));
  t.is(err2?.code, grpc.status.FAILED_PRECONDITION);
  t.regex(err2?.details ?? '', /outside .* knit does not follow it/);
  t.deepEqual(readdirSync(outside), [], 'nothing was written through the symlink');
  await noTapsOf(id);
  t.is((await refusal(d!.call('Query', { sandbox_id: id })))?.code, grpc.status.NOT_FOUND);
});

test.serial('a file or symlink already at the DAN path is refused (ALREADY_EXISTS naming it) and left as it was', async (t) => {
  const [, , idFile, idLink] = ids;
  const file = path.join(danDir, `${idFile}.json`);
  writeFileSync(file, 'precious\n');
  const err = await refusal(attach(idFile));
  t.is(err?.code, grpc.status.ALREADY_EXISTS);
  t.true(err?.details.includes(file), err?.details);
  t.is(readFileSync(file, 'utf8'), 'precious\n');
  await noTapsOf(idFile);

  const target = path.join(outside, 'target');
  writeFileSync(target, 'host file\n');
  const link = path.join(danDir, `${idLink}.json`);
  symlinkSync(target, link);
  const err2 = await refusal(attach(idLink));
  t.is(err2?.code, grpc.status.ALREADY_EXISTS);
  t.is(readFileSync(target, 'utf8'), 'host file\n');
  t.is(readlinkSync(link), target);
  t.deepEqual(readdirSync(danDir).filter((n) => n.startsWith('.')), [], 'no temporary file is left');
  rmSync(file);
  rmSync(link);
  rmSync(target);
});

test.serial('detach leaves a DAN file someone else replaced since the attach', async (t) => {
  const id = ids[4];
  t.teardown(() => d!.call('Detach', { sandbox_id: id }).catch(() => undefined));
  await attach(id);
  const file = path.join(danDir, `${id}.json`);
  rmSync(file);
  writeFileSync(file, '{"devices": []}\n');
  await d!.call('Detach', { sandbox_id: id });
  t.is(readFileSync(file, 'utf8'), '{"devices": []}\n');
  await noTapsOf(id);
  rmSync(file);
});

test.serial('kill -9 after the DAN file is written: the next start removes it; before: a stranger\'s file there stays, knit\'s temporary file goes', async (t) => {
  const [, , , , , idAfter, idBefore] = ids;
  const plan = await d!.call('Plan', { attach: { sandbox_id: idAfter, netns_path: netns, runtime: 'KATA', interfaces: [{ name: 'eth0', binding: { mode: 'host-tap' } }] } });
  const write = plan.steps.findIndex((s: { description: string }) => s.description.startsWith('write Kata DAN file'));
  t.true(write > 0);
  await d!.stop();

  let armed: Daemon = await d!.restart({ KNIT_FAILPOINT: `attach:${write + 1}` });
  d = await crashAndRestart(armed, () => attach(idAfter, {}, armed));
  t.false(existsSync(path.join(danDir, `${idAfter}.json`)), 'start-up repair removed the file knit wrote');
  await noTapsOf(idAfter);

  const stranger = path.join(danDir, `${idBefore}.json`);
  writeFileSync(stranger, 'not knit\'s\n');
  // What a kill -9 inside the write would leave: knit's temporary file (named from the DAN file's name).
  const leftover = path.join(danDir, `.knit-${createHash('sha256').update(`${idBefore}.json`).digest('hex').slice(0, 16)}.0123456789ab.tmp`);
  writeFileSync(leftover, '{"devices"');
  await d.stop();
  armed = await d.restart({ KNIT_FAILPOINT: `attach:${write}` });
  d = await crashAndRestart(armed, () => attach(idBefore, {}, armed));
  t.is(readFileSync(stranger, 'utf8'), 'not knit\'s\n', 'rolling back the unfinished attach left the stranger\'s file');
  t.false(existsSync(leftover), 'and removed knit\'s half-written temporary file');
  await noTapsOf(idBefore);
  t.is((await d.call('List', {})).sandboxes.length, 0);
  rmSync(stranger);
});
