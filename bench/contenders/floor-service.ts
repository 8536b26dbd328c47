// The client side of the bench's own gRPC servers (bench/grpc/floor.proto): the server started
// as a child process like a daemon, a grpc-js client on its unix socket, calls timed by the
// harness as knit's are.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import type { SetupContext } from '../lib/contender.js';
import { startDaemon, type Daemon } from '../lib/daemon.js';
import { floorService } from '../grpc/proto.js';

const grpcDir = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'grpc');

type Unary = (req: object, cb: (err: grpc.ServiceError | null) => void) => void;

export class FloorServer {
  private daemon?: Daemon;
  private client?: grpc.Client;

  /** Starts build/bench/grpc/<script> with the socket first and `args` after it, under
   * `nodeFlags` (the no-logic servers run under knit's own, so that knit's row over theirs is
   * its logic and not the interpreter's cost on grpc-js). */
  async start(ctx: SetupContext, script: string, args: readonly string[], what: string, nodeFlags: readonly string[]): Promise<void> {
    const socket = path.join(ctx.scratch, `${path.basename(script, '.js')}.sock`);
    this.daemon = await startDaemon({ what, cmd: process.execPath, args: [...nodeFlags, path.join(grpcDir, script), socket, ...args], readyLine: /^ready$/ });
    ctx.trackPid(this.daemon.pid, what);
    const Floor = floorService();
    this.client = new Floor(`unix://${socket}`, grpc.credentials.createInsecure());
    await new Promise<void>((resolve, reject) =>
      this.client!.waitForReady(Date.now() + 5000, (err) => (err ? reject(new Error(`${what} at ${socket}: ${err.message}`)) : resolve())),
    );
  }

  call(method: 'Attach' | 'Detach', req: object): Promise<void> {
    const fn = (this.client as unknown as Record<string, Unary>)[method];
    return new Promise((resolve, reject) => fn.call(this.client, req, (err) => (err ? reject(new Error(`${method}: ${err.message}`)) : resolve())));
  }

  get pid(): number | undefined {
    return this.daemon?.pid;
  }

  async stop(): Promise<void> {
    this.client?.close();
    await this.daemon?.stop();
  }
}
