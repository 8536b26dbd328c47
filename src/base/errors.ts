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

export function asKnitError(err: unknown): KnitError {
  if (err instanceof KnitError) return err;
  return new KnitError('INTERNAL', (err as Error)?.message ?? String(err), { cause: err });
}
