// Errors core raises toward the API. The code maps 1:1 onto a gRPC status (src/api/status.ts);
// cniCode carries the CNI error code where one fits, so a CNI shim can rebuild a CNI error.

export type KnitErrorCode =
  | 'INVALID_ARGUMENT'
  | 'NOT_FOUND'
  | 'ALREADY_EXISTS'
  | 'FAILED_PRECONDITION'
  | 'RESOURCE_EXHAUSTED'
  | 'UNAVAILABLE'
  | 'PERMISSION_DENIED'
  | 'UNIMPLEMENTED'
  | 'INTERNAL';

/** CNI spec error codes (CNI 1.1 §Error). */
export const CniCode = {
  incompatibleVersion: 1,
  unsupportedField: 2,
  containerUnknown: 3,
  invalidEnv: 4,
  ioFailure: 5,
  decodeFailure: 6,
  invalidConfig: 7,
  tryAgainLater: 11,
  pluginNotAvailable: 50,
  limitedConnectivity: 51,
} as const;

export class KnitError extends Error {
  constructor(
    readonly code: KnitErrorCode,
    message: string,
    readonly details: { field?: string; cniCode?: number; cause?: unknown } = {},
  ) {
    super(message);
    this.name = 'KnitError';
  }

  static invalid(field: string, message: string): KnitError {
    return new KnitError('INVALID_ARGUMENT', `${field}: ${message}`, { field, cniCode: CniCode.invalidConfig });
  }
}

/** The most of a caller's value an error message quotes: enough to recognise it, never so much
 * that the message outgrows what a client accepts as metadata (8 KiB by default in grpc-go). */
export const QUOTE_MAX = 64;

/** JSON-quotes a value for an error message, cut to its first QUOTE_MAX characters:
 * quote("a".repeat(1e6)) is `"aaaa…" (1000000 characters)`. */
export function quote(value: string, max = QUOTE_MAX): string {
  if (value.length <= max) return JSON.stringify(value);
  return `${JSON.stringify(value.slice(0, max))}… (${value.length} characters)`;
}

/** The same error said about the name its field has for the caller (a KNI or CNI field, a
 * request nested in another): the field in details and the "<field>: " that starts the message. */
export function renameField(err: KnitError, rename: (field: string) => string): KnitError {
  const field = err.details.field;
  if (!field) return err;
  const renamed = rename(field);
  if (renamed === field) return err;
  const message = err.message.startsWith(`${field}: `) ? `${renamed}: ${err.message.slice(field.length + 2)}` : err.message;
  const out = new KnitError(err.code, message, { ...err.details, field: renamed });
  out.stack = err.stack;
  return out;
}

export function asKnitError(err: unknown): KnitError {
  if (err instanceof KnitError) return err;
  return new KnitError('INTERNAL', (err as Error)?.message ?? String(err), { cause: err });
}
