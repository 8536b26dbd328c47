// A minimal CRI client (there is no crictl here): runtime.v1.RuntimeService over a runtime's
// unix socket, from test/fixtures/cri/runtime-v1-subset.proto, with promise-returning calls.
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loaderOptions } from '../../src/api/proto.js';

const PROTO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'test', 'fixtures', 'cri', 'runtime-v1-subset.proto');

export type CriCall = <T = any>(method: string, req?: object) => Promise<T>;

export function criClient(socket: string): { call: CriCall; close(): void } {
  const def = protoLoader.loadSync(PROTO, loaderOptions);
  const runtime = (grpc.loadPackageDefinition(def) as any).runtime.v1;
  const c: grpc.Client = new runtime.RuntimeService(`unix://${socket}`, grpc.credentials.createInsecure());
  const call: CriCall = (method, req = {}) =>
    new Promise((resolve, reject) => {
      (c as any)[method](req, { deadline: Date.now() + 120_000 }, (err: grpc.ServiceError | null, res: any) => (err ? reject(err) : resolve(res)));
    });
  return { call, close: () => c.close() };
}
