// knit creates, mounts and deletes only under its configured directories: a request that names
// a place elsewhere is refused and nothing appears there, and a file where a socket of knit's
// should be is refused at start-up, never deleted.
import test from 'ava';
import * as grpc from '@grpc/grpc-js';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startDaemon, cleanupDaemon, type Daemon } from '../helpers/daemon.js';
import { kniCall, kniClient } from '../compat/kni-client.js';

const P = 'tcnf';
const opts = { prefix: P, subnet: '10.169.2.0/24' };
const scratch = mkdtempSync(path.join(os.tmpdir(), `knit-${P}-`));
let d: Daemon | undefined;

test.after.always(async () => {
  await cleanupDaemon(d, opts);
  rmSync(scratch, { recursive: true, force: true });
});

test.serial('CreateNetwork with a prefix outside knit\'s netns directory is refused and creates nothing there', async (t) => {
  d = await startDaemon(opts);
  const client = kniClient(d.socket);
  t.teardown(() => client.close());
  const elsewhere = path.join(scratch, 'any', 'where');
  const err = (await t.throwsAsync(kniCall(client, 'CreateNetwork', { name: 'web', namespace: 'ns', netns_path_prefix: elsewhere }))) as unknown as grpc.ServiceError;
  t.is(err.code, grpc.status.INVALID_ARGUMENT);
  t.deepEqual(err.metadata.get('knit-field'), ['netns_path_prefix']);
  t.false(existsSync(path.join(scratch, 'any')), 'no directory was made');
  t.false(readFileSync('/proc/self/mountinfo', 'utf8').includes(scratch), 'nothing was mounted');
  // A '..' that climbs out is the same place.
  const climbing = `${path.join(d.dir, 'netns')}/../../${path.basename(scratch)}`;
  const err2 = (await t.throwsAsync(kniCall(client, 'CreateNetwork', { name: 'web', namespace: 'ns', netns_path_prefix: climbing }))) as unknown as grpc.ServiceError;
  t.is(err2.code, grpc.status.INVALID_ARGUMENT);
  await cleanupDaemon(d, opts);
  d = undefined;
});

test.serial('a regular file at the hand-off socket path stops the start and is left as it was', async (t) => {
  const file = path.join(scratch, 'handoff.sock');
  writeFileSync(file, 'not a socket\n');
  // The daemon may die before its API answers (startDaemon rejects) or just after (it resolves,
  // then the process exits): either way it must not stay up without its hand-off socket.
  let started: Daemon | undefined;
  let failure = '';
  try {
    started = await startDaemon({ ...opts, config: { handoffSocket: file } });
  } catch (err) {
    failure = (err as Error).message;
  }
  t.teardown(() => cleanupDaemon(started, opts));
  if (started) {
    const exit = await Promise.race([started.exited, new Promise<'running'>((r) => setTimeout(() => r('running'), 30_000))]);
    t.not(exit, 'running', 'the daemon kept running without its hand-off socket');
    if (exit !== 'running') t.not(exit.code, 0);
  } else {
    t.regex(failure, /exists and is not a socket/);
  }
  t.is(readFileSync(file, 'utf8'), 'not a socket\n');
});
