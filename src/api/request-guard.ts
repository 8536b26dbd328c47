// grpc-js answers INTERNAL "Error deserializing request" when a deserializer throws, before any
// handler runs. A body that is not the message it should be is the caller's mistake, so each
// method's deserializer is wrapped: a malformed body (by wire-check.ts, or protobufjs refusing
// it) becomes a MalformedRequest, which the handler turns into INVALID_ARGUMENT like any other
// bad field.
import type * as grpc from '@grpc/grpc-js';
import { KnitError } from '../base/errors.js';
import { wireProblem, type MessageDescriptor } from './wire-check.js';

export class MalformedRequest {
  constructor(readonly problem: string) {}
}

/** Throws INVALID_ARGUMENT for a body guardService could not decode. */
export function refuseMalformed(request: unknown): void {
  if (request instanceof MalformedRequest) {
    throw KnitError.invalid('(request)', `the body is not a valid request message: ${request.problem}`);
  }
}

/** The service definition with every method's request deserializer guarded. */
export function guardService(def: grpc.ServiceDefinition, types: ReadonlyMap<string, MessageDescriptor>): grpc.ServiceDefinition {
  const out: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const [name, method] of Object.entries(def)) {
    const typeName = requestTypeName(method, types);
    const decode = method.requestDeserialize;
    out[name] = {
      ...method,
      requestDeserialize: (buf: Buffer) => {
        const problem = typeName ? wireProblem(buf, typeName, types) : undefined;
        if (problem) return new MalformedRequest(problem);
        try {
          return decode(buf);
        } catch (err) {
          return new MalformedRequest((err as Error).message);
        }
      },
    };
  }
  return out as grpc.ServiceDefinition;
}

/** "knit.v1.AttachRequest" for /knit.v1.Knit/Attach: the request type in the service's package. */
function requestTypeName(method: grpc.MethodDefinition<unknown, unknown>, types: ReadonlyMap<string, MessageDescriptor>): string | undefined {
  const short = (method as { requestType?: { type?: { name?: string } } }).requestType?.type?.name;
  if (!short) return undefined;
  const pkg = method.path.replace(/^\//, '').split('/')[0]!.split('.').slice(0, -1).join('.');
  const name = pkg ? `${pkg}.${short}` : short;
  return types.has(name) ? name : undefined;
}
