// KnitError <-> gRPC status. The server sends code + message, and two trailing metadata keys
// a client (or the CNI shim) can read without parsing the message:
//   knit-field     the request field at fault, e.g. "interfaces[0].mac"
//   knit-cni-code  the CNI error code that fits (CNI 1.1 §Error)
import * as grpc from '@grpc/grpc-js';
import { CniCode, KnitError, type KnitErrorCode } from '../base/errors.js';
import type { Logger } from './logger.js';

export const FIELD_KEY = 'knit-field';
export const CNI_CODE_KEY = 'knit-cni-code';

const toGrpc: Record<KnitErrorCode, grpc.status> = {
  INVALID_ARGUMENT: grpc.status.INVALID_ARGUMENT,
  NOT_FOUND: grpc.status.NOT_FOUND,
  ALREADY_EXISTS: grpc.status.ALREADY_EXISTS,
  FAILED_PRECONDITION: grpc.status.FAILED_PRECONDITION,
  RESOURCE_EXHAUSTED: grpc.status.RESOURCE_EXHAUSTED,
  UNAVAILABLE: grpc.status.UNAVAILABLE,
  PERMISSION_DENIED: grpc.status.PERMISSION_DENIED,
  UNIMPLEMENTED: grpc.status.UNIMPLEMENTED,
  INTERNAL: grpc.status.INTERNAL,
};

// When core gives no CNI code, the obvious one for the class of error (so a shim always has
// one): unknown container, bad config, try again later.
const defaultCniCode: Partial<Record<KnitErrorCode, number>> = {
  NOT_FOUND: CniCode.containerUnknown,
  INVALID_ARGUMENT: CniCode.invalidConfig,
  UNAVAILABLE: CniCode.tryAgainLater,
  UNIMPLEMENTED: CniCode.unsupportedField,
};

// A last bound on what goes back as the status message (grpc-message travels as metadata, 8 KiB
// by default for grpc-go and grpc-js clients): messages quote a caller's values through quote(),
// and this catches any that does not.
const MAX_DETAILS = 1024;
const bounded = (m: string) => (m.length <= MAX_DETAILS ? m : `${m.slice(0, MAX_DETAILS)}… (${m.length} characters)`);

/** Metadata values are printable ASCII: a field path that quotes a map key ("labels[\"ü\"]") is
 * sent with \uXXXX escapes, and cut like a message. */
function asciiField(field: string): string {
  const ascii = field.replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return ascii.length <= MAX_DETAILS ? ascii : `${ascii.slice(0, MAX_DETAILS)}...`;
}

export function grpcCodeOf(code: KnitErrorCode): grpc.status {
  return toGrpc[code];
}

/** The error object a grpc-js handler passes to its callback (or emits on a stream). */
export function toServiceError(err: unknown, log: Logger, rpc: string): Partial<grpc.StatusObject> {
  const metadata = new grpc.Metadata();
  if (err instanceof KnitError) {
    if (err.details.field) metadata.set(FIELD_KEY, asciiField(err.details.field));
    const cni = err.details.cniCode ?? defaultCniCode[err.code];
    if (cni !== undefined) metadata.set(CNI_CODE_KEY, String(cni));
    if (err.code === 'INTERNAL') log.error({ rpc, err, cause: err.details.cause }, `${rpc} failed: ${bounded(err.message)}`);
    else log.info({ rpc, code: err.code, field: err.details.field }, `${rpc}: ${bounded(err.message)}`);
    return { code: toGrpc[err.code] ?? grpc.status.INTERNAL, details: bounded(err.message), metadata };
  }
  // Not a KnitError: a bug or an unexpected failure below core. Say what it was, and log it.
  const message = err instanceof Error ? err.message : String(err);
  log.error({ rpc, err }, `${rpc} failed unexpectedly: ${bounded(message)}`);
  return { code: grpc.status.INTERNAL, details: bounded(`internal error: ${message}`), metadata };
}

const fromGrpc = new Map<grpc.status, KnitErrorCode>(
  Object.entries(toGrpc).map(([k, v]) => [v, k as KnitErrorCode]),
);

/** Client side: rebuild a KnitError (code, field, cniCode) from a failed call. */
export function fromServiceError(err: grpc.ServiceError): KnitError {
  const field = err.metadata?.get(FIELD_KEY)[0]?.toString();
  const cniText = err.metadata?.get(CNI_CODE_KEY)[0]?.toString();
  const code = fromGrpc.get(err.code) ?? (err.code === grpc.status.UNAVAILABLE ? 'UNAVAILABLE' : 'INTERNAL');
  return new KnitError(code, err.details || err.message, {
    field,
    cniCode: cniText === undefined ? undefined : Number(cniText),
    cause: err,
  });
}
