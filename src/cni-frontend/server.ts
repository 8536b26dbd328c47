// The daemon end of knit-cni: a unix socket (config cniSocket, 0600) that takes one request
// per connection and answers "knit-cni/1 <exit code>\n<stdout>". The protocol is in
// docs/cni-frontend.md; the verbs are in handler.ts.
import net from 'node:net';
import { chmod, mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../api/logger.js';
import type { CniFrontend } from './handler.js';
import { parseShimRequest, PROTOCOL_VERSION } from './request.js';
import { errorObject } from '../cni/spec.js';
import { toCniError } from './handler.js';
import { clearStaleSocket, trackConnections } from '../api/tracked-server.js';

/** A shim call in flight at stop gets this long; the shim then sees try-again-later (11). */
const CLOSE_GRACE_MS = 2000;

const MAX_REQUEST_BYTES = 4 << 20;

export async function answer(frontend: CniFrontend, text: string): Promise<{ exitCode: number; stdout: string }> {
  try {
    return await frontend.handle(parseShimRequest(text));
  } catch (err) {
    return { exitCode: 1, stdout: `${JSON.stringify(errorObject(toCniError(err), '1.0.0'))}\n` };
  }
}

export async function startCniServer(opts: {
  socketPath: string;
  frontend: CniFrontend;
  allow: (socket: net.Socket) => boolean;
  log: Logger;
}): Promise<{ close(): Promise<void> }> {
  const { socketPath, frontend, log } = opts;
  await mkdir(path.dirname(socketPath), { recursive: true, mode: 0o700 });
  await clearStaleSocket(socketPath);
  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    if (!opts.allow(socket)) return void socket.destroy();
    const chunks: Buffer[] = [];
    let size = 0;
    socket.on('data', (c) => {
      size += c.length;
      if (size > MAX_REQUEST_BYTES) socket.destroy();
      else chunks.push(c);
    });
    socket.on('error', () => undefined);
    socket.on('end', () => {
      void answer(frontend, Buffer.concat(chunks).toString('utf8')).then((a) => {
        if (a.exitCode) log.warn({ cni: a.stdout.trim() }, 'CNI call failed');
        socket.end(`knit-cni/${PROTOCOL_VERSION} ${a.exitCode}\n${a.stdout}`);
      });
    });
  });
  const connections = trackConnections(server);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => resolve());
  });
  await chmod(socketPath, 0o600);
  return {
    close: () => connections.close(CLOSE_GRACE_MS),
  };
}
