// The transport's share: an empty unary RPC from a grpc-js client to a trivial grpc-js server
// in a child process, over a unix socket. Attach and detach are one empty call each; no
// kernel work, no netns.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import type { Contender, Flavor, SetupContext } from '../lib/contender.js';
import { startDaemon, type Daemon } from '../lib/daemon.js';
import { emptyService } from '../grpc/proto.js';

const serverScript = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'grpc', 'empty-server.js');

export class GrpcBaselineContender implements Contender {
  readonly name = 'grpc';
  readonly label = 'gRPC empty call';
  readonly kind = 'transport';
  readonly flavors: readonly Flavor[] = ['runc'];
  readonly maxConcurrency = 64;
  private daemon?: Daemon;
  private client?: grpc.Client & { Call?: unknown };

  async setup(ctx: SetupContext): Promise<void> {
    const socket = path.join(ctx.scratch, 'empty.sock');
    this.daemon = await startDaemon({ what: 'empty gRPC server', cmd: process.execPath, args: [serverScript, socket], readyLine: /^ready$/ });
    ctx.trackPid(this.daemon.pid, 'empty gRPC server');
    const Empty = emptyService();
    this.client = new Empty(`unix://${socket}`, grpc.credentials.createInsecure());
    await new Promise<void>((resolve, reject) =>
      this.client!.waitForReady(Date.now() + 5000, (err) => (err ? reject(new Error(`empty gRPC server at ${socket}: ${err.message}`)) : resolve())),
    );
  }

  attach(): Promise<void> {
    return this.call();
  }

  detach(): Promise<void> {
    return this.call();
  }

  daemonPid(): number | undefined {
    return this.daemon?.pid;
  }

  async teardown(): Promise<void> {
    this.client?.close();
    await this.daemon?.stop();
  }

  private call(): Promise<void> {
    return new Promise((resolve, reject) => {
      const call = (this.client as unknown as Record<string, (req: object, cb: (e: grpc.ServiceError | null) => void) => void>).Call;
      call.call(this.client, {}, (err) => (err ? reject(new Error(`empty gRPC call: ${err.message}`)) : resolve()));
    });
  }
}
