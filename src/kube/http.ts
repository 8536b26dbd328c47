// One HTTP exchange with the apiserver over a kept-alive connection: the request goes out, and
// the answer comes back as a stream, under a deadline and the caller's AbortSignal. Everything
// that is not an answer (refused, reset, TLS, timed out) becomes a KubeApiError with status 0
// that names the call, e.g. "GET https://10.0.0.1:6443/api/v1/nodes: connect ECONNREFUSED …".
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { errorFromTransport, KubeApiError } from './errors.js';
import type { KubeAccess } from './access-common.js';

export interface Exchange {
  method: string;
  url: URL;
  headers: Record<string, string>;
  body?: string;
  /** The caller's: aborting ends the exchange with an AbortError. */
  signal?: AbortSignal;
  /** From the start of the call until the answer's headers (and, for a whole body, its end). */
  timeoutMs: number;
}

/** "GET https://host:port/api/v1/nodes": how errors name a call. The query is left out (it can
 * be long), except that a watch says it is one. */
export function callName(method: string, url: URL): string {
  return `${method} ${url.origin}${url.pathname}${url.searchParams.get('watch') === 'true' ? '?watch=true' : ''}`;
}

export function makeAgent(access: KubeAccess, connections = MAX_CONNECTIONS): http.Agent {
  // HTTP/1.1 carries one call per connection, so the agent opens one for each call in flight
  // and keeps it: unlimited, a burst of claims prepared at once left 15 TLS connections open to
  // the API server. Four carry a watch and the calls beside it; more calls wait for one. A
  // client with more watches says how many it needs.
  const keepAlive = { keepAlive: true, scheduling: 'lifo' as const, maxSockets: connections };
  if (access.server.startsWith('http:')) return new http.Agent(keepAlive);
  return new https.Agent({
    ...keepAlive,
    ca: access.ca,
    cert: access.cert,
    key: access.key,
    rejectUnauthorized: !access.insecureSkipTLSVerify,
    servername: access.tlsServerName,
  });
}

/** Connections per client; a watch holds one for as long as it streams. */
export const MAX_CONNECTIONS = 4;

/** A running exchange: the answer's headers have arrived. */
export interface Open {
  response: IncomingMessage;
  /** "GET https://…/api/v1/nodes" */
  call: string;
  /** Ends the exchange from inside (a watch whose consumer failed); the stream then errors and
   * failure() answers this reason. */
  abort(reason: Error): void;
  /** Moves the deadline: ms from now, or undefined for none (a watch, once it streams). */
  rearm(ms: number | undefined, reason?: Error): void;
  /** The error to surface for a failure of the stream: the caller's abort as an AbortError,
   * a deadline or abort() as its reason, anything else as a status-0 KubeApiError. */
  failure(err: Error): Error;
  /** Ends the deadline and the abort wiring: call it when the body is read or the stream over. */
  done(): void;
}

export function open(agent: http.Agent, ex: Exchange, retried = false): Promise<Open> {
  const call = callName(ex.method, ex.url);
  const inner = new AbortController();
  const onAbort = () => inner.abort(ex.signal!.reason);
  ex.signal?.addEventListener('abort', onAbort, { once: true });
  let timer: NodeJS.Timeout | undefined;
  const rearm = (ms: number | undefined, reason: Error = new Error(`no answer within ${ex.timeoutMs} ms`)) => {
    clearTimeout(timer);
    timer = ms === undefined ? undefined : setTimeout(() => inner.abort(reason), ms);
  };
  const done = () => {
    clearTimeout(timer);
    ex.signal?.removeEventListener('abort', onAbort);
  };
  const failure = (err: Error): Error => {
    if (ex.signal?.aborted) return abortError(ex.signal.reason);
    const reason: unknown = inner.signal.aborted ? inner.signal.reason : undefined;
    if (reason instanceof KubeApiError) return reason;
    return errorFromTransport(call, reason instanceof Error ? reason : err);
  };
  rearm(ex.timeoutMs);
  if (ex.signal?.aborted) inner.abort(ex.signal.reason);

  const mod = ex.url.protocol === 'http:' ? http : https;
  return new Promise<Open>((resolve, reject) => {
    const req = mod.request(ex.url, { method: ex.method, headers: ex.headers, agent, signal: inner.signal });
    let answered = false;
    req.on('response', (response) => {
      answered = true;
      resolve({ response, call, abort: (reason) => inner.abort(reason), rearm, failure, done });
    });
    req.on('error', (err: Error & { code?: string }) => {
      if (answered) return; // the response stream reports it to whoever reads it
      done();
      // A kept-alive connection the server closed just as we reused it: the request never
      // reached the server, so one retry on a fresh connection is safe for a read.
      if (!retried && req.reusedSocket && err.code === 'ECONNRESET' && ex.method === 'GET' && !inner.signal.aborted) {
        open(agent, ex, true).then(resolve, reject);
        return;
      }
      reject(failure(err));
    });
    req.end(ex.body);
  });
}

/** The whole body of an answer as text, refused past `limit` bytes. */
export async function readBody(opened: Open, limit: number): Promise<string> {
  const parts: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of opened.response as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > limit) {
        const tooLarge = new KubeApiError(0, 'TooLarge', opened.call, `the answer is larger than ${limit} bytes`);
        opened.abort(tooLarge);
        throw tooLarge;
      }
      parts.push(chunk);
    }
  } catch (err) {
    throw opened.failure(err as Error);
  } finally {
    opened.done();
  }
  return Buffer.concat(parts, size).toString('utf8');
}

/** An Error named AbortError (a signal's default reason is a DOMException, which is not one). */
export function abortError(reason: unknown): Error {
  const err = new Error('the operation was aborted', { cause: reason });
  err.name = 'AbortError';
  return err;
}
