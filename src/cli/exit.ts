// The knit command's exit codes, stable for scripts.
import { status as grpcStatus } from '@grpc/grpc-js';

export const Exit = {
  ok: 0,
  usage: 1,
  notFound: 2,
  invalidArgument: 3,
  unavailable: 4,
  failure: 5,
  exhausted: 6,
} as const;
export type ExitCode = (typeof Exit)[keyof typeof Exit];

/** An error the command reports as one line on stderr, exiting with exitCode. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: ExitCode,
  ) {
    super(message);
  }
}

export const usageError = (message: string) => new CliError(message, Exit.usage);
export const invalidArgument = (message: string) => new CliError(message, Exit.invalidArgument);

export function exitCodeOf(status: grpcStatus): ExitCode {
  switch (status) {
    case grpcStatus.NOT_FOUND:
      return Exit.notFound;
    case grpcStatus.INVALID_ARGUMENT:
      return Exit.invalidArgument;
    case grpcStatus.UNAVAILABLE:
      return Exit.unavailable;
    case grpcStatus.RESOURCE_EXHAUSTED:
      return Exit.exhausted;
    default:
      return Exit.failure;
  }
}
