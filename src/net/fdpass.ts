// Passing open file descriptors (tap queues, vhost fds, ...) over unix sockets with
// SCM_RIGHTS, which Node's net module cannot do.
//
// knit's fd request protocol: the client connects, sends its request (framing is up to the
// server, e.g. one JSON line), and reads the reply until the server closes the connection;
// the fds travel with the reply's first byte. Server side, with a plain net.Server:
//
//   net.createServer((sock) => sock.once('data', async (req) => {
//     await replyWithFds(sock, Buffer.from('{"ok":true}'), [tapFd]);
//   }));
//
// Fds received are close-on-exec and owned by the caller: pass them on, or closeFd them.
// The Promise calls wait on a libuv pool thread (one of four by default) for up to their
// timeout, so keep timeouts short.
import type net from 'node:net';
import { native } from './native.js';

/** The kernel's cap on fds in one message (SCM_MAX_FD). */
export const MAX_FDS_PER_MESSAGE = 253;

export interface FdMessage {
  data: Buffer;
  fds: number[];
}

/** Errors from the addon carry the errno name and what it was doing. */
export interface FdPassError extends Error {
  code: string;
  errno: number;
  context?: string;
}

/**
 * One non-blocking send of data with fds on its first byte. Returns the bytes sent (fewer
 * than data.length on a nearly full buffer: send the rest without fds). Throws code
 * 'EAGAIN' when the socket buffer is full and nothing was sent. Never blocks.
 */
export function sendFds(socketFd: number, data: Buffer, fds: readonly number[]): number {
  return native.sendFds(socketFd, data, [...fds]) as number;
}

/**
 * Sends all of data with fds on its first byte, waiting (off the JS thread) for room in the
 * socket buffer for up to timeoutMs. The addon duplicates the socket and the fds first, so
 * the caller may close its own copies as soon as this returns.
 */
function sendFdsAsync(socketFd: number, data: Buffer, fds: readonly number[], timeoutMs = 5000): Promise<void> {
  return native.sendFdsAsync(socketFd, data, [...fds], timeoutMs) as Promise<void>;
}

/**
 * One non-blocking receive of up to maxBytes with up to maxFds fds. Empty data means the
 * peer closed. Throws 'EAGAIN' when nothing is waiting, 'EMSGSIZE' when the message carried
 * more than maxFds fds (those it carried are closed).
 */
export function recvFds(socketFd: number, maxFds: number, maxBytes = 65536): FdMessage {
  return native.recvFds(socketFd, maxFds, maxBytes) as FdMessage;
}

/**
 * Client side of an fd request: connect to socketPath, send request, collect the reply and
 * its fds until the server closes. Rejects with 'ETIMEDOUT' after timeoutMs in total (and
 * closes any fds received by then), 'ENOENT'/'ECONNREFUSED' when nobody listens.
 */
export function requestFds(
  socketPath: string,
  request: Buffer,
  timeoutMs: number,
  opts: { maxFds?: number; maxBytes?: number } = {},
): Promise<FdMessage> {
  return native.requestFds(socketPath, request, timeoutMs, opts.maxFds, opts.maxBytes) as Promise<FdMessage>;
}

/** Closes an fd Node does not own (one received here). */
export function closeFd(fd: number): void {
  native.closeFd(fd);
}

/**
 * The OS fd under a connected net.Socket on a unix path (it is non-blocking and libuv keeps
 * polling it for reads). Throws if the socket has none (not connected, or destroyed).
 */
export function socketFd(socket: net.Socket): number {
  const handle = (socket as unknown as { _handle?: { fd?: number } })._handle;
  const fd = handle?.fd;
  if (typeof fd !== 'number' || fd < 0) throw new Error('socket: no OS file descriptor (not connected, or destroyed)');
  return fd;
}

/**
 * Server side: sends the reply with fds over an accepted socket, then ends it. Do not have
 * socket.write() data pending at the same time: the two would interleave on the wire.
 */
export async function replyWithFds(socket: net.Socket, data: Buffer, fds: readonly number[], timeoutMs = 5000): Promise<void> {
  await sendFdsAsync(socketFd(socket), data, fds, timeoutMs);
  socket.end();
}
