// The daemon's gRPC endpoint: knit.v1.Knit and kni.KNI on one unix socket.
//
// We own the listening socket (net.createServer) and hand each accepted, peer-checked
// connection to grpc-js through a connection injector: grpc-js's own bindAsync gives no hook
// between accept and the HTTP/2 handshake, which is where SO_PEERCRED has to be read.
import * as grpc from '@grpc/grpc-js';
import net from 'node:net';
import { chmod, lstat, mkdir, unlink } from 'node:fs/promises';
import path from 'node:path';
import type { SandboxService } from '../base/types.js';
import { kniHandlers } from './kni.js';
import { clearStaleSocket, trackConnections } from './tracked-server.js';
import { knitHandlers, packageVersion, type PolicyAnswer, type PolicyQuestion } from './knit-service.js';
import { silentLogger, type Logger } from './logger.js';
import { makePeerGate, type PeerCredFn } from './peer-gate.js';
import { kniProto, knitProto, loadedMessageTypes } from './proto.js';
import { guardService } from './request-guard.js';
import { LIMITS } from './limits.js';

export interface ApiServerOptions {
  /** Unix socket path, e.g. /run/knit/knit.sock. Its directory is created if missing. */
  socketPath: string;
  service: SandboxService;
  /** Peer uids allowed to connect. Default: the daemon's own uid. */
  allowedUids?: number[];
  logger?: Logger;
  /** SO_PEERCRED reader (native.peerCred). Absent: connections are not uid-checked (logged). */
  peerCred?: PeerCredFn;
  /** KNI CreateNetwork: create a pinned netns at this path. Absent: CreateNetwork fails. */
  createNetns?: (path: string) => Promise<void>;
  /** KNI DeleteNetwork: delete the netns knit created for this sandbox id or netns path. */
  deleteNetns?: (idOrPath: string) => Promise<void>;
  /** KNI AttachInterface: the sandbox now lives in the netns at path (remembered if knit pinned it). */
  claimNetns?: (path: string, sandboxId: string) => Promise<void>;
  isPinned?: (path: string) => boolean;
  /** Where KNI CreateNetwork pins namespaces when the request has no prefix. Default /run/netns. */
  defaultNetnsDir?: string;
  /** CNI versions the daemon answers Version with. Default ["1.0.0", "1.1.0"]. */
  supportedCniVersions?: string[];
  /** ExplainPolicy: NetworkPolicy's verdict on a flow (src/daemon/policy.ts). Absent: policy is off. */
  explainPolicy?: (q: PolicyQuestion) => PolicyAnswer;
}

export interface ApiServer {
  socketPath: string;
  /** Stop accepting, let calls finish for up to graceMs (default 2000), then cut the rest. */
  close(graceMs?: number): Promise<void>;
}

export async function startApiServer(opts: ApiServerOptions): Promise<ApiServer> {
  const log = opts.logger ?? silentLogger;
  const { socketPath } = opts;
  const allowedUids = opts.allowedUids ?? [process.getuid?.() ?? 0];

  const server = new grpc.Server({
    // A request larger than this is refused with RESOURCE_EXHAUSTED before it is decoded (see
    // limits.ts for the bounds inside one). The KNI kubelet client reads answers up to 16 MiB;
    // List on a full node is well under that.
    'grpc.max_receive_message_length': LIMITS.requestBytes,
    'grpc.max_send_message_length': 16 * 1024 * 1024,
    // knit serves no channelz service, and grpc-js keeps channelz counters and traces for every
    // call by default: off, the server's CPU per unary call drops by ~20% (bench/README.md).
    'grpc.enable_channelz': 0,
  });
  const knitService = knitProto().Knit.service;
  const kniService = kniProto().KNI.service;
  const types = loadedMessageTypes();
  server.addService(
    guardService(knitService, types),
    knitHandlers(opts.service, log, {
      version: packageVersion(),
      supportedCniVersions: opts.supportedCniVersions ?? ['1.0.0', '1.1.0'],
    }, opts.explainPolicy),
  );
  server.addService(
    guardService(kniService, types),
    kniHandlers({
      service: opts.service,
      logger: log,
      createNetns: opts.createNetns,
      deleteNetns: opts.deleteNetns,
      claimNetns: opts.claimNetns,
      isPinned: opts.isPinned,
      defaultNetnsDir: opts.defaultNetnsDir ?? '/run/netns',
    }),
  );
  const injector = server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
  const admit = makePeerGate({ allowedUids, peerCred: opts.peerCred, logger: log, socketPath });

  await mkdir(path.dirname(socketPath), { recursive: true, mode: 0o755 });
  await clearStaleSocket(socketPath);

  const listener = net.createServer((socket) => {
    socket.on('error', (err) => log.debug({ err }, 'client connection error'));
    if (admit(socket)) injector.injectConnection(socket);
    else socket.destroy();
  });
  await new Promise<void>((resolve, reject) => {
    listener.once('error', reject);
    listener.listen(socketPath, () => {
      listener.off('error', reject);
      resolve();
    });
  });
  // Accepted connections are peer-checked from the first byte; 0600 keeps others from even
  // connecting once this returns.
  await chmod(socketPath, 0o600);
  listener.on('error', (err) => log.error({ err, socketPath }, `API socket error: ${err.message}`));
  log.info({ socketPath, allowedUids }, `knit API listening on ${socketPath}`);

  const connections = trackConnections(listener);
  let closing: Promise<void> | undefined;
  // In-flight calls get graceMs to finish; then every call is cancelled and every connection
  // closed, even those a client keeps open (kubelet and containerd do).
  const close = (graceMs = 2000): Promise<void> =>
    (closing ??= (async () => {
      const listenerClosed = connections.close(graceMs);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, graceMs);
        timer.unref();
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      injector.destroy();
      await listenerClosed; // net.Server.close() unlinks the socket file itself
    })());

  return { socketPath, close };
}
