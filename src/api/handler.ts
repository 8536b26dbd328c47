// Turns an async function of the decoded request into a grpc-js unary handler: the result
// goes back as the response, any throw becomes a gRPC status (status.ts).
import type * as grpc from '@grpc/grpc-js';
import type { Logger } from './logger.js';
import { toServiceError } from './status.js';
import { refuseMalformed } from './request-guard.js';

export function unary<Req, Res>(
  rpc: string,
  log: Logger,
  fn: (req: Req, call: grpc.ServerUnaryCall<Req, Res>) => Promise<Res>,
): grpc.handleUnaryCall<Req, Res> {
  return (call, callback) => {
    let pending: Promise<Res>;
    try {
      refuseMalformed(call.request);
      pending = fn(call.request, call);
    } catch (err) {
      pending = Promise.reject(err);
    }
    pending.then(
      (res) => callback(null, res),
      (err) => callback(toServiceError(err, withSandbox(log, sandboxOf(call.request)), rpc)),
    );
  };
}

/** The sandbox a request is about (knit: sandbox_id, KNI: id), so a failure's log line says which. */
function sandboxOf(req: unknown): string | undefined {
  const r = req as { sandbox_id?: unknown; id?: unknown; attach?: { sandbox_id?: unknown } } | null;
  const id = r?.sandbox_id ?? r?.id ?? r?.attach?.sandbox_id;
  return typeof id === 'string' && id ? id : undefined;
}

function withSandbox(log: Logger, sandboxId: string | undefined): Logger {
  if (!sandboxId) return log;
  const add = (o: object) => ({ sandboxId, ...o });
  return {
    debug: (o, m) => log.debug(add(o), m),
    info: (o, m) => log.info(add(o), m),
    warn: (o, m) => log.warn(add(o), m),
    error: (o, m) => log.error(add(o), m),
  };
}
