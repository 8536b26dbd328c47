// peerCred reports the kernel's record of who connected: checked with a separate client
// process running as another user (nobody), and with this process on both ends.
import test from 'ava';
import { spawn } from 'node:child_process';
import { chmodSync, openSync, closeSync } from 'node:fs';
import net from 'node:net';
import { peerCred } from '../../src/net/peercred.js';
import { eventually, tempRunDir } from '../helpers/ns-fixtures.js';

const NOBODY = 65534;

test('peerCred of an accepted connection names the client process and its uid/gid', async (t) => {
  const dir = tempRunDir(t, 'kp1a-');
  chmodSync(dir, 0o755);
  const path = `${dir}/kp1a.sock`;
  const accepted: net.Socket[] = [];
  const server = net.createServer((s) => accepted.push(s));
  await new Promise<void>((r) => server.listen(path, r));
  t.teardown(() => {
    accepted.forEach((s) => s.destroy());
    server.close();
  });
  chmodSync(path, 0o777);

  const client = spawn(
    process.execPath,
    ['-e', `require('net').connect(${JSON.stringify(path)}).on('error', () => process.exit(3)); setTimeout(() => {}, 30000)`],
    { uid: NOBODY, gid: NOBODY, stdio: 'ignore' },
  );
  t.teardown(() => {
    client.kill('SIGKILL');
  });
  const sock = await eventually(() => accepted[0], 500);
  t.deepEqual(peerCred(sock), { pid: client.pid!, uid: NOBODY, gid: NOBODY });
});

test('peerCred works on both ends of an in-process connection and rejects a non-socket', async (t) => {
  const dir = tempRunDir(t, 'kp1b-');
  const path = `${dir}/kp1b.sock`;
  const accepted: net.Socket[] = [];
  const server = net.createServer((s) => accepted.push(s));
  await new Promise<void>((r) => server.listen(path, r));
  const client = net.connect(path);
  t.teardown(() => {
    client.destroy();
    accepted.forEach((s) => s.destroy());
    server.close();
  });
  await new Promise((r) => client.once('connect', r));
  const sock = await eventually(() => accepted[0]);
  const me = { pid: process.pid, uid: process.getuid!(), gid: process.getgid!() };
  t.deepEqual(peerCred(sock), me);
  t.deepEqual(peerCred(client), me);

  const fd = openSync(`${dir}/kp1b-file`, 'w');
  t.teardown(() => closeSync(fd));
  t.throws(() => peerCred(fd), { code: 'ENOTSOCK' } as never);
});
