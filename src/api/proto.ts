// Loads proto/knit/v1/knit.proto and proto/kni/api.proto for the server, the CLI and tests.
//
// Why @grpc/proto-loader at runtime instead of generated code: the .proto files stay the
// single source of truth with no protoc/codegen step in the build (this machine has no
// protoc, and the build must work offline), the KNI file can be dropped in verbatim, and the
// decoded plain objects are exactly what src/api/validate.ts checks with zod anyway.
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { indexTypes, type MessageDescriptor } from './wire-check.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/** Directory holding knit/v1/knit.proto and kni/api.proto; KNIT_PROTO_DIR overrides. */
export function protoDir(): string {
  return process.env.KNIT_PROTO_DIR ?? path.join(root, 'proto');
}

export const loaderOptions: protoLoader.Options = {
  keepCase: true, // field names as in the .proto (snake_case), as KNI clients send them
  longs: String, // uint64 pool sizes exceed 2^53 for IPv6
  enums: String,
  defaults: true, // absent scalars decode as their zero value, so validation sees ''/0
  oneofs: true,
};

const definitions: protoLoader.PackageDefinition[] = [];

function load(file: string): grpc.GrpcObject {
  const def = protoLoader.loadSync(path.join(protoDir(), file), { ...loaderOptions, includeDirs: [protoDir()] });
  definitions.push(def);
  return grpc.loadPackageDefinition(def);
}

/** The message types of every .proto loaded so far, by full name ("knit.v1.AttachRequest"). */
export function loadedMessageTypes(): Map<string, MessageDescriptor> {
  const top: [string, MessageDescriptor][] = [];
  for (const def of definitions) {
    for (const [name, entry] of Object.entries(def)) {
      if ('format' in entry && entry.format === 'Protocol Buffer 3 DescriptorProto') top.push([name, entry.type as unknown as MessageDescriptor]);
    }
  }
  return indexTypes(top);
}

// grpc-js types a loaded package as a loose tree; these name the pieces we use.
type ServiceCtor = grpc.ServiceClientConstructor;

export interface KnitProto {
  Knit: ServiceCtor;
  Extension: ServiceCtor;
}
export interface KniProto {
  KNI: ServiceCtor;
}

let knitCache: KnitProto | undefined;
let kniCache: KniProto | undefined;

export function knitProto(): KnitProto {
  if (!knitCache) {
    const pkg = load('knit/v1/knit.proto') as unknown as { knit: { v1: KnitProto } };
    knitCache = pkg.knit.v1;
  }
  return knitCache;
}

export function kniProto(): KniProto {
  if (!kniCache) {
    const pkg = load('kni/api.proto') as unknown as { kni: KniProto };
    kniCache = pkg.kni;
  }
  return kniCache;
}
