// The transport's share: an empty unary RPC to a trivial grpc-js server in a child process,
// over a unix socket, from a grpc-js client ('grpc') or a C-core client ('grpc-c', what a Go or
// C caller resembles). Attach and detach are one empty call each; no kernel work, no netns.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import type { Contender, Flavor, SetupContext } from '../lib/contender.js';
import { startDaemon, type Daemon } from '../lib/daemon.js';
import { emptyService } from '../grpc/proto.js';
import { CCoreClient } from '../lib/ccore-client.js';
import type { ClientKind } from './knit.js';

const serverScript = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'grpc', 'empty-server.js');

export class GrpcBaselineContender implements Contender {
  readonly name: string;
  readonly label: string;
  readonly kind = 'transport';
  readonly flavors: readonly Flavor[] = ['runc'];
  readonly maxConcurrency = 64;
  private daemon?: Daemon;
  private client?: grpc.Client & { Call?: unknown };
  private ccore?: CCoreClient;

  constructor(private readonly clientKind: ClientKind = 'grpc-js') {
    this.name = clientKind === 'c-core' ? 'grpc-c' : 'grpc';
    this.label = clientKind === 'c-core' ? 'gRPC empty call (C-core client)' : 'gRPC empty call';
  }

  async setup(ctx: SetupContext): Promise<void> {
    const socket = path.join(ctx.scratch, 'empty.sock');
    this.daemon = await startDaemon({ what: 'empty gRPC server', cmd: process.execPath, args: [serverScript, socket], readyLine: /^ready$/ });
    ctx.trackPid(this.daemon.pid, 'empty gRPC server');
    const Empty = emptyService();
    this.client = new Empty(`unix://${socket}`, grpc.credentials.createInsecure());
    await new Promise<void>((resolve, reject) =>
      this.client!.waitForReady(Date.now() + 5000, (err) => (err ? reject(new Error(`empty gRPC server at ${socket}: ${err.message}`)) : resolve())),
    );
    if (this.clientKind === 'c-core') {
      this.ccore = new CCoreClient(socket);
      ctx.trackPid(this.ccore.pid!, 'C-core gRPC client');
    }
  }

  attach(): Promise<number | void> {
    return this.ccore ? this.ccore.call('/knitbench.Empty/Call', Buffer.alloc(0)) : this.call();
  }

  detach(): Promise<number | void> {
    return this.attach();
  }

  daemonPid(): number | undefined {
    return this.daemon?.pid;
  }

  async teardown(): Promise<void> {
    await this.ccore?.close();
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
