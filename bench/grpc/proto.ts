// Loads bench/grpc/empty.proto (read from the source tree: tsc does not copy .proto files).
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

export function emptyService(): grpc.ServiceClientConstructor {
  const def = protoLoader.loadSync(path.join(repoRoot, 'bench', 'grpc', 'empty.proto'));
  const pkg = grpc.loadPackageDefinition(def) as unknown as { knitbench: { Empty: grpc.ServiceClientConstructor } };
  return pkg.knitbench.Empty;
}
