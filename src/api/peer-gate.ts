// Who may talk to the daemon: each accepted unix connection's peer uid (SO_PEERCRED) must be in
// allowedUids. The socket is 0600 as well; the uid check also covers a socket whose mode was
// loosened, and tells in the log who was refused.
import type { Socket } from 'node:net';
import type { Logger } from './logger.js';

export interface PeerCred {
  uid: number;
  gid: number;
  pid: number;
}
export type PeerCredFn = (fd: number) => PeerCred;

/** The fd under a net.Socket accepted on a unix server (libuv Pipe handle). */
function socketFd(socket: Socket): number | undefined {
  const handle = (socket as unknown as { _handle?: { fd?: number } })._handle;
  return typeof handle?.fd === 'number' && handle.fd >= 0 ? handle.fd : undefined;
}

export function makePeerGate(opts: {
  allowedUids: readonly number[];
  peerCred?: PeerCredFn;
  logger: Logger;
  socketPath: string;
}): (socket: Socket) => boolean {
  const { allowedUids, peerCred, logger: log, socketPath } = opts;
  if (!peerCred) {
    log.warn(
      { socketPath },
      `no SO_PEERCRED reader available: connections to ${socketPath} are not checked against allowed uids (socket mode 0600 still applies)`,
    );
    return () => true;
  }
  const allowed = new Set(allowedUids);
  return (socket) => {
    const fd = socketFd(socket);
    if (fd === undefined) {
      log.warn({ socketPath }, 'refused a connection: its file descriptor is not accessible, so its peer cannot be checked');
      return false;
    }
    let cred: PeerCred;
    try {
      cred = peerCred(fd);
    } catch (err) {
      log.warn({ socketPath, err }, `refused a connection: reading its peer credentials failed: ${(err as Error).message}`);
      return false;
    }
    if (!allowed.has(cred.uid)) {
      log.warn(
        { socketPath, uid: cred.uid, gid: cred.gid, pid: cred.pid, allowedUids },
        `refused a connection from uid ${cred.uid} (pid ${cred.pid}): not in allowed uids [${allowedUids.join(', ')}]`,
      );
      return false;
    }
    log.debug({ uid: cred.uid, pid: cred.pid }, 'accepted a connection');
    return true;
  };
}
