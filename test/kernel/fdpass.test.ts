// File descriptors over unix sockets: a net.Server answering with fds, raw send/receive on
// Node's own sockets, and the failure cases. Fds are checked by using them (a write on the
// received end of a FIFO comes out of the other end) and by reading /proc/self/fd.
import test from 'ava';
import { closeSync, constants, openSync, readFileSync, readSync, writeSync } from 'node:fs';
import net from 'node:net';
import {
  closeFd,
  recvFds,
  replyWithFds,
  requestFds,
  sendFds,
  socketFd,
  type FdPassError,
} from '../../src/net/fdpass.js';
import { must } from '../fixtures/exec.js';
import { eventually, fdsPointingAt, runChild, tempRunDir } from '../helpers/ns-fixtures.js';

async function listen(t: { teardown: (fn: () => void) => void }, path: string, onConn: (s: net.Socket) => void, opts: net.ServerOpts = {}) {
  const server = net.createServer(opts, onConn);
  await new Promise<void>((resolve) => server.listen(path, resolve));
  t.teardown(() => server.close());
  return server;
}

test('requestFds receives a working FIFO write end from a net.Server answering with replyWithFds', async (t) => {
  const dir = tempRunDir(t, 'kf1a-');
  const fifo = `${dir}/kf1a-fifo`;
  await must('mkfifo', [fifo]);
  const readEnd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
  t.teardown(() => closeSync(readEnd));
  const requests: string[] = [];

  await listen(t, `${dir}/kf1a.sock`, (sock) => {
    sock.once('data', (req) => {
      requests.push(req.toString());
      const writeEnd = openSync(fifo, constants.O_WRONLY);
      const sent = replyWithFds(sock, Buffer.from('{"ok":true}'), [writeEnd]);
      closeSync(writeEnd); // the addon sends its own duplicate: ours may go at once
      void sent;
    });
  });

  const reply = await requestFds(`${dir}/kf1a.sock`, Buffer.from('{"want":"fifo"}\n'), 5000);
  t.deepEqual(requests, ['{"want":"fifo"}\n']);
  t.is(reply.data.toString(), '{"ok":true}');
  t.is(reply.fds.length, 1);

  writeSync(reply.fds[0], 'ping');
  const buf = Buffer.alloc(16);
  const n = readSync(readEnd, buf);
  t.is(buf.subarray(0, n).toString(), 'ping');

  // Only our read end and the received write end point at the FIFO: the server's copy and
  // the addon's duplicate are closed.
  await eventually(() => (fdsPointingAt(fifo).length === 2 ? true : undefined));
  t.deepEqual(fdsPointingAt(fifo).sort((a, b) => a - b), [readEnd, reply.fds[0]].sort((a, b) => a - b));
  closeFd(reply.fds[0]);
  t.deepEqual(fdsPointingAt(fifo), [readEnd]);
});

test('sendFds on a client socket and recvFds on a paused server socket pass fds both usable', async (t) => {
  const dir = tempRunDir(t, 'kf1b-');
  const file = `${dir}/kf1b-file`;
  const accepted: net.Socket[] = [];
  await listen(t, `${dir}/kf1b.sock`, (s) => accepted.push(s), { pauseOnConnect: true });
  const client = net.connect(`${dir}/kf1b.sock`);
  t.teardown(() => client.destroy());
  await new Promise((r) => client.once('connect', r));
  const server = await eventually(() => accepted[0]);
  t.teardown(() => server.destroy());

  const a = openSync(file, 'w');
  const b = openSync(file, 'r');
  t.is(sendFds(socketFd(client), Buffer.from('two'), [a, b]), 3);
  closeSync(a);
  closeSync(b);

  // libuv does not read a paused socket, so the message and its fds wait for recvFds.
  const msg = await eventually(() => {
    try {
      return recvFds(socketFd(server), 4);
    } catch (e) {
      if ((e as FdPassError).code === 'EAGAIN') return undefined;
      throw e;
    }
  });
  t.is(msg.data.toString(), 'two');
  t.is(msg.fds.length, 2);
  writeSync(msg.fds[0], 'via passed fd');
  const buf = Buffer.alloc(64);
  const n = readSync(msg.fds[1], buf, 0, 64, 0);
  t.is(buf.subarray(0, n).toString(), 'via passed fd');
  t.is(readFileSync(file, 'utf8'), 'via passed fd');
  msg.fds.forEach(closeFd);
  t.deepEqual(fdsPointingAt(file), []);

  // Nothing more waiting: EAGAIN, not a block.
  t.throws(() => recvFds(socketFd(server), 4), { code: 'EAGAIN' } as never);
});

test('recvFds with room for fewer fds than sent fails with EMSGSIZE and keeps none', async (t) => {
  const dir = tempRunDir(t, 'kf1c-');
  const file = `${dir}/kf1c-file`;
  const accepted: net.Socket[] = [];
  await listen(t, `${dir}/kf1c.sock`, (s) => accepted.push(s), { pauseOnConnect: true });
  const client = net.connect(`${dir}/kf1c.sock`);
  t.teardown(() => client.destroy());
  await new Promise((r) => client.once('connect', r));
  const server = await eventually(() => accepted[0]);
  t.teardown(() => server.destroy());

  const fds = [openSync(file, 'w'), openSync(file, 'r'), openSync(file, 'r')];
  sendFds(socketFd(client), Buffer.from('x'), fds);
  fds.forEach((fd) => closeSync(fd));
  const err = await eventually(() => {
    try {
      recvFds(socketFd(server), 1);
      return new Error('received although maxFds was 1');
    } catch (e) {
      return (e as FdPassError).code === 'EAGAIN' ? undefined : (e as FdPassError);
    }
  });
  t.is((err as FdPassError).code, 'EMSGSIZE');
  t.deepEqual(fdsPointingAt(file), [], 'the one fd that fitted was closed too');
});

test('requestFds fails cleanly: nobody listening, no reply in time, too many fds', async (t) => {
  const dir = tempRunDir(t, 'kf1d-');
  const missing = await t.throwsAsync(requestFds(`${dir}/kf1d-none.sock`, Buffer.from('x'), 1000));
  t.is((missing as FdPassError).code, 'ENOENT');
  t.regex(missing!.message, /kf1d-none\.sock/);

  const held: net.Socket[] = [];
  await listen(t, `${dir}/kf1d-silent.sock`, (s) => held.push(s));
  t.teardown(() => held.forEach((s) => s.destroy()));
  const silent = await t.throwsAsync(requestFds(`${dir}/kf1d-silent.sock`, Buffer.from('x'), 200));
  t.is((silent as FdPassError).code, 'ETIMEDOUT');

  const file = `${dir}/kf1d-file`;
  await listen(t, `${dir}/kf1d-many.sock`, (s) => {
    s.once('data', () => {
      const fds = [openSync(file, 'w'), openSync(file, 'r')];
      void replyWithFds(s, Buffer.from('two'), fds).finally(() => fds.forEach((fd) => closeSync(fd)));
    });
  });
  const many = await t.throwsAsync(requestFds(`${dir}/kf1d-many.sock`, Buffer.from('x'), 5000, { maxFds: 1 }));
  t.is((many as FdPassError).code, 'EMSGSIZE');
  await eventually(() => (fdsPointingAt(file).length === 0 ? true : undefined));
  t.deepEqual(fdsPointingAt(file), []);
});

test('bad arguments are named', (t) => {
  t.throws(() => sendFds(0, Buffer.alloc(0), [1]), { message: /data must not be empty when fds are sent/ });
  t.throws(() => sendFds(0, Buffer.from('x'), [1, -1]), { message: /fds\[1\] must be a file descriptor/ });
  t.throws(() => sendFds(0, 'x' as unknown as Buffer, []), { message: /data must be a Buffer/ });
  t.throws(() => recvFds(0, 254), { message: /maxFds must be an integer from 0 to 253/ });
  t.throws(() => requestFds('/x', Buffer.from('x'), -1), { message: /timeoutMs must be an integer/ });
  t.throws(() => closeFd(1.5), { message: /fd must be an integer/ });
});

test('500 request/reply cycles leak no fd (child process)', async (t) => {
  const dir = tempRunDir(t, 'kf1e-');
  const r = (await runChild('fdpass', [dir, '500'])) as { before: string[]; after: string[] };
  t.true(r.before.length > 0);
  t.deepEqual(r.after, r.before);
});
