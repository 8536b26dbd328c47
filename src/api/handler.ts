// Turns an async function of the decoded request into a grpc-js unary handler: the result
// goes back as the response, any throw becomes a gRPC status (status.ts).
import type * as grpc from '@grpc/grpc-js';
import type { Logger } from './logger.js';
import { toServiceError } from './status.js';

export function unary<Req, Res>(
  rpc: string,
  log: Logger,
  fn: (req: Req, call: grpc.ServerUnaryCall<Req, Res>) => Promise<Res>,
): grpc.handleUnaryCall<Req, Res> {
  return (call, callback) => {
    let pending: Promise<Res>;
    try {
      pending = fn(call.request, call);
    } catch (err) {
      pending = Promise.reject(err);
    }
    pending.then(
      (res) => callback(null, res),
      (err) => callback(toServiceError(err, log, rpc)),
    );
  };
}
