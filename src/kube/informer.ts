// A local, eventually consistent view of one kind of object: list, then watch from the list's
// resourceVersion (with bookmarks, so a quiet watch still moves its resourceVersion forward).
// A watch the server ends is resumed from the last resourceVersion. Anything else (410 Gone, an
// unreachable apiserver, a broken stream) leads to a relist after a capped, jittered backoff;
// the relist is diffed against the cache, so onChange sees exactly the adds, updates and
// deletes the lost watch would have carried. Meanwhile the last view stays readable, and
// onState says "unreachable" with the failing call.
import { backoffDelay, DEFAULT_BACKOFF, type BackoffPolicy } from './backoff.js';
import { diffRelist, objectKey } from './cache-diff.js';
import { watchErrorOf, type KubeClient } from './client.js';
import { KubeApiError } from './errors.js';
import { abortError, callName } from './http.js';
import type { WatchEvent } from './types.js';

export type InformerState = 'starting' | 'synced' | 'unreachable';
export type ChangeKind = 'add' | 'update' | 'delete';

type Named = { metadata: { name: string; namespace?: string; resourceVersion?: string; uid?: string } };

export interface InformerOptions<T = unknown> {
  labelSelector?: string;
  fieldSelector?: string;
  /** Every resyncMs, onChange('update', obj, obj) for every cached object: a nudge to
   * reconcile again (obj === old tells it from a real update). 0 or absent: never. */
  resyncMs?: number;
  backoff?: BackoffPolicy;
  /** Objects per list page. */
  pageSize?: number;
  /** Trims each object before it is cached (client-go's SetTransform): a Node is kilobytes of
   * status a reader may never look at, times every node of the cluster. The result must keep
   * metadata's name, namespace, uid and resourceVersion. */
  transform?: (obj: T) => T;
  /** For a custom resource whose CRD may not be installed: what to tell the operator when the
   * list answers 404. The informer then holds nothing and counts as synced (no object of a
   * kind the server does not serve can exist), says so in its detail, and lists again after a
   * backoff, to see the CRD once it comes. Absent: a 404 is a failure like any other. */
  notServed?: string;
}

/** The server ends each watch after 5 to 10 minutes (as client-go's reflectors ask), so
 * connections spread out over the apiservers behind a load balancer. */
const WATCH_SECONDS = { min: 300, max: 600 };

export class Informer<T extends Named> {
  private readonly cache = new Map<string, T>();
  private readonly changeFns: ((kind: ChangeKind, obj: T, old?: T) => void)[] = [];
  private readonly stateFns: ((s: InformerState, detail: string) => void)[] = [];
  private current: InformerState = 'starting';
  private servedNow = true;
  /** Between start() and stop(): a relist starts the watch again only then. */
  private wanted = false;
  /** The next list reports objects whose content changed under the same resourceVersion. */
  private nextListByContent = false;
  private lastDetail = '';
  /** Watch events applied since the last list: whether a watch got anywhere before it failed. */
  private eventsSinceList = 0;
  private stopper?: AbortController;
  private running?: Promise<void>;
  private resyncTimer?: NodeJS.Timeout;
  private syncedWaiters: (() => void)[] = [];

  constructor(
    private readonly client: KubeClient,
    private readonly path: string,
    private readonly opts: InformerOptions<T> = {},
  ) {}

  onChange(fn: (kind: ChangeKind, obj: T, old?: T) => void): void {
    this.changeFns.push(fn);
  }

  onState(fn: (s: InformerState, detail: string) => void): void {
    this.stateFns.push(fn);
  }

  get state(): InformerState {
    return this.current;
  }

  /** False while the server answers 404 for an informer with notServed. */
  get served(): boolean {
    return this.servedNow;
  }

  /** Why the state is what it is, kept up to date: while unreachable, the latest failure
   * (onState hears only the first of a run). */
  get detail(): string {
    return this.lastDetail;
  }

  list(): T[] {
    return [...this.cache.values()];
  }

  /** key: "namespace/name", or "name" for a cluster-scoped kind. */
  get(key: string): T | undefined {
    return this.cache.get(key);
  }

  start(): void {
    this.wanted = true;
    if (this.stopper) return;
    const stopper = new AbortController();
    this.stopper = stopper;
    this.running = this.run(stopper.signal);
    if (this.opts.resyncMs) {
      this.resyncTimer = setInterval(() => this.resync(), this.opts.resyncMs);
      this.resyncTimer.unref();
    }
  }

  async stop(): Promise<void> {
    this.wanted = false;
    await this.halt();
  }

  /** Lists again now, whatever the watch has seen, and watches on from there; onChange hears
   * what differs. For a view no event will correct: objects a server sent while it pruned them
   * by a custom resource's old schema stay so until they change. */
  async relistNow(): Promise<void> {
    if (!this.stopper) return;
    await this.halt();
    this.nextListByContent = true;
    if (this.wanted) this.start();
  }

  private async halt(): Promise<void> {
    clearInterval(this.resyncTimer);
    this.stopper?.abort();
    await this.running;
    this.stopper = undefined;
    this.running = undefined;
  }

  /** Resolves once the first list is in the cache (at once if it already is). */
  waitSynced(signal?: AbortSignal): Promise<void> {
    if (this.current === 'synced') return Promise.resolve();
    if (signal?.aborted) return Promise.reject(abortError(signal.reason));
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        this.syncedWaiters = this.syncedWaiters.filter((w) => w !== done);
        reject(abortError(signal!.reason));
      };
      const done = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      this.syncedWaiters.push(done);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  private async run(signal: AbortSignal): Promise<void> {
    let failures = 0;
    let relistedForGone = false;
    let resourceVersion: string | undefined; // undefined: relist before watching
    while (!signal.aborted) {
      try {
        if (resourceVersion === undefined) {
          resourceVersion = await this.listAll(signal);
          failures = 0;
          this.servedNow = true;
          this.setState('synced', `listed ${this.cache.size} from ${this.describe()}`);
        }
        resourceVersion = await this.watchFrom(resourceVersion, signal);
      } catch (err) {
        if (signal.aborted) break;
        resourceVersion = undefined;
        // The watch fell behind what the server keeps: relist at once, not a failure of the
        // server. Twice in a row with no event in between is one, and waits like any other.
        if (err instanceof KubeApiError && err.gone && (this.eventsSinceList > 0 || !relistedForGone)) {
          relistedForGone = true;
          continue;
        }
        failures++;
        if (this.opts.notServed && err instanceof KubeApiError && err.status === 404) {
          this.servedNow = false;
          this.replaceCache([]);
          this.setState('synced', `${this.describe()} answers 404, not served: ${this.opts.notServed}`);
        } else this.setState('unreachable', (err as Error).message);
        await sleep(backoffDelay(failures, this.opts.backoff ?? DEFAULT_BACKOFF), signal);
      }
    }
  }

  /** Lists, replaces the cache with the result, and tells onChange what differs. */
  private async listAll(signal: AbortSignal): Promise<string> {
    const { items, resourceVersion } = await this.client.list<T>(
      this.path,
      { labelSelector: this.opts.labelSelector, fieldSelector: this.opts.fieldSelector, limit: this.opts.pageSize },
      { signal },
    );
    this.eventsSinceList = 0;
    const trim = this.opts.transform;
    if (trim) for (let i = 0; i < items.length; i++) items[i] = trim(items[i]!);
    this.replaceCache(items, this.nextListByContent);
    this.nextListByContent = false;
    return resourceVersion;
  }

  /** The cache becomes `items`; onChange hears what differs. */
  private replaceCache(items: T[], byContent = false): void {
    const diff = diffRelist(this.cache, items, byContent);
    this.cache.clear();
    for (const obj of items) this.cache.set(objectKey(obj), obj);
    for (const obj of diff.deleted) this.emit('delete', obj, undefined);
    for (const obj of diff.added) this.emit('add', obj, undefined);
    for (const { obj, old } of diff.updated) this.emit('update', obj, old);
  }

  /** Watches until the server ends the stream; answers the resourceVersion to resume from.
   * Throws on a failure, a 410 included (an ERROR event or the answer's status). */
  private async watchFrom(resourceVersion: string, signal: AbortSignal): Promise<string> {
    let latest = resourceVersion;
    const timeoutSeconds = WATCH_SECONDS.min + Math.floor(Math.random() * (WATCH_SECONDS.max - WATCH_SECONDS.min));
    await this.client.watch(
      this.path,
      { resourceVersion, allowWatchBookmarks: true, timeoutSeconds, labelSelector: this.opts.labelSelector, fieldSelector: this.opts.fieldSelector },
      (event) => {
        latest = this.apply(event) ?? latest;
      },
      signal,
    );
    return latest;
  }

  /** One watch event into the cache and out to onChange; answers its resourceVersion. */
  private apply(event: WatchEvent<T>): string | undefined {
    if (event.type === 'ERROR') throw watchErrorOf(this.describe(true), event.object);
    this.eventsSinceList++;
    const obj = event.object;
    const rv = obj?.metadata?.resourceVersion;
    if (event.type === 'BOOKMARK') return rv;
    const key = objectKey(obj);
    const kept = this.opts.transform ? this.opts.transform(obj) : obj;
    const old = this.cache.get(key);
    if (event.type === 'DELETED') {
      this.cache.delete(key);
      this.emit('delete', kept, undefined);
    } else {
      this.cache.set(key, kept);
      this.emit(old ? 'update' : 'add', kept, old);
    }
    return rv;
  }

  private resync(): void {
    if (this.current !== 'synced') return; // the view is stale; a relist will report what changed
    for (const obj of this.cache.values()) this.emit('update', obj, obj);
  }

  /** A consumer's exception must neither stop the others' view nor go unseen: it is thrown
   * again outside the informer, where it surfaces as any uncaught exception does. */
  private emit(kind: ChangeKind, obj: T, old: T | undefined): void {
    for (const fn of this.changeFns) {
      try {
        fn(kind, obj, old);
      } catch (err) {
        queueMicrotask(() => {
          throw err;
        });
      }
    }
  }

  private setState(state: InformerState, detail: string): void {
    this.lastDetail = detail;
    if (state === this.current) return;
    this.current = state;
    for (const fn of this.stateFns) fn(state, detail);
    if (state === 'synced') for (const wake of this.syncedWaiters.splice(0)) wake();
  }

  /** "GET https://…/api/v1/nodes", as the client names that call in its errors. */
  private describe(watch = false): string {
    return callName('GET', new URL(`${this.client.access.server}${this.path}${watch ? '?watch=true' : ''}`));
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
  });
}
