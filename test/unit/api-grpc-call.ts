// Test helpers: promisified unary calls on a grpc-js client, and a temp socket directory.
import type * as grpc from '@grpc/grpc-js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { ExecutionContext } from 'ava';

export function unaryCall<Res = any>(client: grpc.Client, method: string, req: object, metadataOut?: grpc.Metadata[]): Promise<Res> {
  return new Promise((resolve, reject) => {
    const fn = (client as unknown as Record<string, Function>)[method];
    if (!fn) throw new Error(`client has no method ${method}`);
    const call = fn.call(client, req, { deadline: Date.now() + 10_000 }, (err: grpc.ServiceError | null, res: Res) =>
      err ? reject(err) : resolve(res),
    );
    if (metadataOut) call.on('status', (s: grpc.StatusObject) => metadataOut.push(s.metadata));
  });
}

/** A fresh directory for one test's socket, removed in teardown. */
export function tempSocketDir(t: ExecutionContext, prefix: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A logger that keeps what it was told, to assert on refusals and warnings. */
export function recordingLogger() {
  const lines: { level: string; msg: string; obj: object }[] = [];
  const at = (level: string) => (obj: object, msg?: string) => void lines.push({ level, msg: msg ?? '', obj });
  return { lines, logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') } };
}
