// Who connected to a unix socket: the kernel-checked credentials (SO_PEERCRED) the peer had
// when it connected. The API server uses them to authorise callers.
import type net from 'node:net';
import { native } from './native.js';
import { socketFd } from './fdpass.js';

export interface PeerCred {
  pid: number;
  uid: number;
  gid: number;
}

/** Credentials of the peer of a unix socket, given its fd or a connected net.Socket. */
export function peerCred(socket: number | net.Socket): PeerCred {
  const fd = typeof socket === 'number' ? socket : socketFd(socket);
  return native.peerCred(fd) as PeerCred;
}
