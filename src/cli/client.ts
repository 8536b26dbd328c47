// The CLI's connection to the daemon: one knit.v1 client on the unix socket, calls as
// promises, and failed calls turned into one-line CliErrors with the documented exit codes.
import * as grpc from '@grpc/grpc-js';
import net from 'node:net';
import path from 'node:path';
import { knitProto } from '../api/proto.js';
import { CNI_CODE_KEY } from '../api/status.js';
import { CliError, Exit, exitCodeOf } from './exit.js';

export const DEFAULT_SOCKET = '/run/knit/knit.sock';

export function socketFrom(flag: string | undefined, env: NodeJS.ProcessEnv): string {
  return path.resolve(flag || env.KNIT_SOCKET || DEFAULT_SOCKET);
}

export class KnitClient {
  private readonly client: grpc.Client & Record<string, any>;

  constructor(
    readonly socketPath: string,
    private readonly timeoutMs: number,
  ) {
    const { Knit } = knitProto();
    this.client = new Knit(`unix:${socketPath}`, grpc.credentials.createInsecure()) as grpc.Client & Record<string, any>;
  }

  call<Res = any>(method: string, req: object): Promise<Res> {
    return new Promise((resolve, reject) => {
      this.client[method](req, { deadline: Date.now() + this.timeoutMs }, (err: grpc.ServiceError | null, res: Res) => {
        if (err) explain(err, this.socketPath, this.timeoutMs).then(reject, reject);
        else resolve(res);
      });
    });
  }

  /** Server stream: onData per message; resolves when the stream ends, rejects on error. */
  stream(method: string, req: object, onData: (m: any) => void, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      const s = this.client[method](req) as grpc.ClientReadableStream<any>;
      const abort = () => s.cancel();
      signal?.addEventListener('abort', abort, { once: true });
      s.on('data', onData);
      s.on('end', () => resolve());
      s.on('error', (err: grpc.ServiceError) => {
        signal?.removeEventListener('abort', abort);
        if (err.code === grpc.status.CANCELLED && signal?.aborted) resolve();
        else explain(err, this.socketPath, 0).then(reject, reject);
      });
    });
  }

  close(): void {
    this.client.close();
  }
}

function probe(socketPath: string): Promise<NodeJS.ErrnoException | undefined> {
  return new Promise((resolve) => {
    const s = net.connect(socketPath);
    s.once('connect', () => {
      s.destroy();
      resolve(undefined);
    });
    s.once('error', (err) => resolve(err as NodeJS.ErrnoException));
  });
}

const oneLine = (s: string) => s.replace(/\s*\n\s*/g, ' ').trim();

/** A failed call as the user should read it: what went wrong, in one line. */
async function explain(err: grpc.ServiceError, socketPath: string, timeoutMs: number): Promise<CliError> {
  if (err.code === grpc.status.UNAVAILABLE && err.metadata?.get(CNI_CODE_KEY).length === 0) {
    // No knit trailer: the failure is the connection, not an answer from the daemon.
    const why = await probe(socketPath);
    if (!why) {
      // Something accepts connections there but dropped ours: the daemon's peer check.
      return new CliError(
        `knit daemon at ${socketPath} closed the connection (is uid ${process.getuid?.()} in its allowed uids?)`,
        Exit.unavailable,
      );
    }
    if (why.code === 'ENOENT' || why.code === 'ECONNREFUSED' || why.code === 'ENOTSOCK') {
      return new CliError(`knit daemon is not running at ${socketPath}`, Exit.unavailable);
    }
    if (why.code === 'EACCES' || why.code === 'EPERM') {
      return new CliError(`permission denied on ${socketPath}: run as root or as a uid the daemon allows`, Exit.unavailable);
    }
    return new CliError(`cannot reach the knit daemon at ${socketPath}: ${why.message}`, Exit.unavailable);
  }
  if (err.code === grpc.status.DEADLINE_EXCEEDED) {
    return new CliError(`knit daemon at ${socketPath} did not answer within ${timeoutMs / 1000}s`, Exit.failure);
  }
  return new CliError(oneLine(err.details || err.message), exitCodeOf(err.code));
}
