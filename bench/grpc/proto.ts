// Loads the bench's own services from bench/grpc/*.proto (read from the source tree: tsc does
// not copy .proto files).
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

function service(file: string, name: string): grpc.ServiceClientConstructor {
  const def = protoLoader.loadSync(path.join(repoRoot, 'bench', 'grpc', file), { keepCase: true });
  const pkg = grpc.loadPackageDefinition(def) as unknown as { knitbench: Record<string, grpc.ServiceClientConstructor> };
  return pkg.knitbench[name];
}

/** knitbench.Empty (empty.proto): the transport and nothing else. */
export function emptyService(): grpc.ServiceClientConstructor {
  return service('empty.proto', 'Empty');
}

/** knitbench.Floor (floor.proto): knit's design with none of its logic. */
export function floorService(): grpc.ServiceClientConstructor {
  return service('floor.proto', 'Floor');
}
