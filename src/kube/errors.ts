// Failures of Kubernetes API calls, each saying which call on which server and what the API
// said. A non-2xx answer carries a meta/v1 Status (code, reason, message); a call that got no
// answer at all (refused, reset, timed out) has status 0. Both map onto knit's error codes so a
// caller that passes one on reports something sensible without inspecting it.
import { KnitError, quote, type KnitErrorCode } from '../base/errors.js';
import type { Status } from './types.js';

export class KubeApiError extends KnitError {
  constructor(
    /** The HTTP status, or 0 when no answer came back. */
    readonly status: number,
    /** The Status reason (NotFound, AlreadyExists, Conflict, Expired, Gone, …), or for status 0 the socket error code. */
    readonly reason: string | undefined,
    /** `METHOD url`: the call that failed. */
    readonly path: string,
    message: string,
    readonly apiStatus?: Status,
  ) {
    super(codeFor(status, reason), `${path}: ${message}`);
    this.name = 'KubeApiError';
  }

  /** True for the answers a list or watch gets for a resourceVersion etcd has compacted away. */
  get gone(): boolean {
    return this.status === 410 || this.reason === 'Expired' || this.reason === 'Gone';
  }
}

function codeFor(status: number, reason: string | undefined): KnitErrorCode {
  if (status === 0 || status === 429 || status >= 500) return 'UNAVAILABLE';
  if (status === 404) return 'NOT_FOUND';
  if (status === 409) return reason === 'AlreadyExists' ? 'ALREADY_EXISTS' : 'FAILED_PRECONDITION';
  if (status === 401 || status === 403) return 'PERMISSION_DENIED';
  if (status === 400 || status === 422) return 'INVALID_ARGUMENT';
  return 'FAILED_PRECONDITION';
}

/** The most of a body that is not a Status an error quotes (a proxy's HTML page, say). */
const BODY_QUOTE_MAX = 200;

/** The error for a non-2xx answer: the Status in the body if there is one, else the body's start. */
export function errorFromResponse(call: string, httpStatus: number, body: string): KubeApiError {
  const status = parseStatus(body);
  if (status) return errorFromStatus(call, status, httpStatus);
  const text = body.trim();
  return new KubeApiError(httpStatus, undefined, call, `HTTP ${httpStatus}${text ? `: ${quote(text, BODY_QUOTE_MAX)}` : ''}`);
}

/** The error for a Status (from a response body or a watch ERROR event). */
export function errorFromStatus(call: string, status: Status, httpStatus = status.code ?? 0): KubeApiError {
  const code = status.code ?? httpStatus;
  const causes = (status.details?.causes ?? [])
    .map((c) => [c.field, c.message].filter(Boolean).join(': '))
    .filter(Boolean);
  const message = status.message ?? '';
  const extra = causes.filter((c) => !message.includes(c));
  const text = [message, ...extra].filter(Boolean).join('; ') || 'no message';
  return new KubeApiError(code, status.reason, call, `${code} ${status.reason ?? 'Failure'}: ${text}`, status);
}

/** A transport failure: nothing came back from the server. */
export function errorFromTransport(call: string, err: Error & { code?: string }): KubeApiError {
  // Node's words for a cut stream are terse ("aborted", "socket hang up"): add the socket's code.
  const message = err.code && !err.message.includes(err.code) ? `${err.message} (${err.code})` : err.message;
  const out = new KubeApiError(0, err.code, call, message);
  out.details.cause = err;
  return out;
}

function parseStatus(body: string): Status | undefined {
  if (!body.startsWith('{')) return undefined;
  try {
    const value = JSON.parse(body);
    return value && value.kind === 'Status' ? (value as Status) : undefined;
  } catch {
    return undefined;
  }
}
