// The life of a bench server child process: bound to a fresh unix socket, "ready" on stdout
// once it takes calls, gone on SIGTERM or when the harness closes its stdin (even after a
// SIGKILL of the harness).
import { rmSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';

/** Serves `server` on `socket` until told to stop; `what` names it in a bind failure. */
export function serveChild(server: grpc.Server, socket: string, what: string): void {
  rmSync(socket, { force: true });
  server.bindAsync(`unix://${socket}`, grpc.ServerCredentials.createInsecure(), (err) => {
    if (err) {
      console.error(`${what}: bind ${socket}: ${err.message}`);
      process.exit(1);
    }
    console.log('ready');
  });
  const stop = () => {
    server.forceShutdown();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.stdin.on('end', stop);
  process.stdin.resume();
}
