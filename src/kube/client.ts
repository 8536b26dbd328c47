// knit's Kubernetes API client: the handful of calls its controllers make (get, list, create,
// patch, replace, delete, watch), JSON over HTTP/1.1 on kept-alive connections. It knows no
// kinds: a caller gives the path (/api/v1/nodes, /apis/resource.k8s.io/v1/namespaces/x/
// resourceclaims/y) and the shape it expects. Why knit does not use @kubernetes/client-node:
// docs/kubernetes-api.md.
import type { Agent } from 'node:http';
import type { KubeAccess } from './access-common.js';
import { errorFromResponse, errorFromStatus, KubeApiError } from './errors.js';
import { abortError, makeAgent, open, readBody, type Open } from './http.js';
import { LineSplitter, LineTooLongError } from './lines.js';
import type { ListMeta, Status, WatchEvent } from './types.js';

export { KubeApiError } from './errors.js';

export interface ClientOptions {
  userAgent?: string;
  /** A call's deadline, until the whole answer is in (a watch: until it starts streaming). */
  timeoutMs?: number;
  /** Connections kept to the server (default MAX_CONNECTIONS). A watch holds one for as long
   * as it streams, and a call beyond them waits for one: a client of N informers needs N + 1,
   * or a watch waits in the queue, sees nothing, and fails at its deadline. */
  connections?: number;
}

export interface ListQuery {
  labelSelector?: string;
  fieldSelector?: string;
  /** Objects per page; the client follows `continue` until the list is whole. */
  limit?: number;
}

export interface WatchQuery {
  resourceVersion: string;
  allowWatchBookmarks?: boolean;
  /** The server ends the stream after this; the client gives up 30 s later. */
  timeoutSeconds?: number;
  labelSelector?: string;
  fieldSelector?: string;
}

export type PatchType = 'merge' | 'json' | 'strategic' | 'apply';

const PATCH_CONTENT_TYPE: Record<PatchType, string> = {
  merge: 'application/merge-patch+json',
  json: 'application/json-patch+json',
  strategic: 'application/strategic-merge-patch+json',
  // Server-side apply takes YAML, and JSON is YAML.
  apply: 'application/apply-patch+yaml',
};

export const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_PAGE = 500;
/** How long after its timeoutSeconds a watch may stream before the client calls it dead: a
 * connection whose peer vanished without a reset would otherwise hang until TCP gives up. */
const WATCH_GRACE_MS = 30_000;
/** A list page of 500 large objects (ResourceSlices) runs to tens of megabytes; past this, the
 * answer is not one a node daemon should hold. */
const MAX_BODY_BYTES = 64 << 20;

export class KubeClient {
  private readonly agent: Agent;
  private readonly timeoutMs: number;
  private readonly userAgent: string;

  constructor(readonly access: KubeAccess, opts: ClientOptions = {}) {
    this.agent = makeAgent(access, opts.connections);
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.userAgent = opts.userAgent ?? 'knit';
  }

  get<T>(path: string, opts: { signal?: AbortSignal } = {}): Promise<T> {
    return this.call<T>({ method: 'GET', path, signal: opts.signal });
  }

  /** Every object, page by page; resourceVersion is the list's, to watch from. */
  async list<T>(path: string, q: ListQuery = {}, opts: { signal?: AbortSignal } = {}): Promise<{ items: T[]; resourceVersion: string }> {
    const items: T[] = [];
    let resourceVersion = '';
    let next: string | undefined;
    do {
      const page = await this.call<{ items?: T[] | null; metadata?: ListMeta }>({
        method: 'GET',
        path,
        query: { labelSelector: q.labelSelector, fieldSelector: q.fieldSelector, limit: String(q.limit ?? DEFAULT_PAGE), continue: next },
        signal: opts.signal,
      });
      if (page.items) items.push(...page.items);
      resourceVersion ||= page.metadata?.resourceVersion ?? '';
      next = page.metadata?.continue || undefined;
    } while (next);
    return { items, resourceVersion };
  }

  create<T>(path: string, body: unknown, q: { fieldManager?: string } = {}): Promise<T> {
    return this.call<T>({ method: 'POST', path, query: { fieldManager: q.fieldManager }, body });
  }

  /** merge (RFC 7386), json (RFC 6902), strategic, or server-side apply (needs fieldManager). */
  patch<T>(path: string, body: unknown, type: PatchType, q: { fieldManager?: string; force?: boolean } = {}): Promise<T> {
    if (!(type in PATCH_CONTENT_TYPE)) throw new TypeError(`patch type ${JSON.stringify(type)}: not merge, json, strategic or apply`);
    if (type === 'apply' && !q.fieldManager) throw new TypeError(`PATCH ${path}: server-side apply needs a fieldManager`);
    if (q.force && type !== 'apply') throw new TypeError(`PATCH ${path}: force is for server-side apply only`);
    const query = { fieldManager: q.fieldManager, force: q.force ? 'true' : undefined };
    return this.call<T>({ method: 'PATCH', path, query, body, contentType: PATCH_CONTENT_TYPE[type] });
  }

  replace<T>(path: string, body: unknown): Promise<T> {
    return this.call<T>({ method: 'PUT', path, body });
  }

  /** Deleting what is already gone succeeds. */
  async delete(path: string): Promise<void> {
    try {
      await this.call<unknown>({ method: 'DELETE', path });
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 404) return;
      throw err;
    }
  }

  /** Streams events until the server ends the watch (resolves) or the signal aborts (resolves).
   * Rejects when the call fails, the stream breaks, or onEvent throws. An ERROR event is
   * delivered as it came (a Status object; 410 means the resourceVersion is gone: relist). */
  async watch(path: string, q: WatchQuery, onEvent: (e: WatchEvent) => void, signal: AbortSignal): Promise<void> {
    const query = {
      watch: 'true',
      resourceVersion: q.resourceVersion,
      allowWatchBookmarks: q.allowWatchBookmarks ? 'true' : undefined,
      timeoutSeconds: q.timeoutSeconds === undefined ? undefined : String(q.timeoutSeconds),
      labelSelector: q.labelSelector,
      fieldSelector: q.fieldSelector,
    };
    let opened: Open;
    try {
      opened = await this.open({ method: 'GET', path, query, signal });
    } catch (err) {
      if (signal.aborted) return;
      throw err;
    }
    try {
      if (opened.response.statusCode !== 200) {
        throw errorFromResponse(opened.call, opened.response.statusCode ?? 0, await readBody(opened, MAX_BODY_BYTES));
      }
      const lifetime = q.timeoutSeconds === undefined ? undefined : q.timeoutSeconds * 1000 + WATCH_GRACE_MS;
      opened.rearm(lifetime, new Error(`the watch outlived its timeoutSeconds=${q.timeoutSeconds} by ${WATCH_GRACE_MS} ms: connection presumed dead`));
      await this.stream(opened, onEvent);
    } catch (err) {
      if (signal.aborted) return;
      throw err;
    } finally {
      opened.done();
    }
  }

  /** Ends kept-alive connections (and any watch still streaming). */
  close(): void {
    this.agent.destroy();
  }

  private async stream(opened: Open, onEvent: (e: WatchEvent) => void): Promise<void> {
    const lines = new LineSplitter();
    const deliver = (line: string) => {
      let event: WatchEvent;
      try {
        event = JSON.parse(line);
      } catch {
        throw new KubeApiError(0, 'BadEvent', opened.call, `a watch event is not JSON: ${JSON.stringify(line.slice(0, 64))}`);
      }
      onEvent(event);
    };
    // A failure of ours (a line too long, not JSON, onEvent threw) ends the loop, which
    // destroys the response and its connection; a failure of the stream is the transport's.
    let ours: unknown;
    try {
      for await (const chunk of opened.response as AsyncIterable<Buffer>) {
        try {
          for (const line of lines.push(chunk)) deliver(line);
        } catch (err) {
          ours = err instanceof LineTooLongError ? new KubeApiError(0, 'TooLarge', opened.call, err.message) : err;
          break;
        }
      }
    } catch (err) {
      throw opened.failure(err as Error);
    }
    if (ours !== undefined) throw ours;
    const last = lines.end();
    if (last) deliver(last);
  }

  private async call<T>(req: Request): Promise<T> {
    const opened = await this.open(req);
    const text = await readBody(opened, MAX_BODY_BYTES);
    const status = opened.response.statusCode ?? 0;
    if (status < 200 || status >= 300) throw errorFromResponse(opened.call, status, text);
    if (!text) return undefined as T;
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new KubeApiError(status, 'BadResponse', opened.call, `the answer is not JSON: ${JSON.stringify(text.slice(0, 64))}`);
    }
  }

  private open({ method, path, query = {}, body, contentType, signal }: Request): Promise<Open> {
    if (signal?.aborted) return Promise.reject(abortError(signal.reason));
    const url = this.url(path, query);
    const headers: Record<string, string> = { Accept: 'application/json', 'User-Agent': this.userAgent };
    const token = this.access.token?.();
    if (token) headers.Authorization = `Bearer ${token}`;
    let payload: string | undefined;
    if (body !== undefined) {
      payload = JSON.stringify(body);
      headers['Content-Type'] = contentType ?? 'application/json';
      headers['Content-Length'] = String(Buffer.byteLength(payload));
    }
    return open(this.agent, { method, url, headers, body: payload, signal, timeoutMs: this.timeoutMs });
  }

  private url(path: string, query: Query): URL {
    if (!path.startsWith('/')) throw new TypeError(`API path ${JSON.stringify(path.slice(0, 64))}: must start with /`);
    const url = new URL(this.access.server + path);
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') url.searchParams.set(k, v);
    return url;
  }
}

type Query = Record<string, string | undefined>;

interface Request {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  /** Parameters left undefined or empty are not sent. */
  query?: Query;
  /** Sent as JSON, with contentType (application/json by default). */
  body?: unknown;
  contentType?: string;
  signal?: AbortSignal;
}

/** The error a watch ERROR event stands for (its object is a Status). */
export function watchErrorOf(call: string, object: unknown): KubeApiError {
  const status = (object && typeof object === 'object' ? object : { kind: 'Status', message: String(object) }) as Status;
  return errorFromStatus(call, status);
}
