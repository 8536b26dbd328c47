// Writes pods' k8s.v1.cni.cncf.io/network-status in the background, so a CNI ADD never waits
// for the API: a JSON patch (RFC 6902) whose first op tests /metadata/uid, so a pod deleted and
// made again under the same name never gets its predecessor's status. One write per pod at a
// time, the latest text wins; a failed write is tried again with a capped backoff while the API
// is away, and given up for a pod that is gone (404) or whose UID is no longer the one the ADD
// was for (the test op fails: 422).
import type { Logger } from 'pino';
import type { KubeClient } from '../kube/index.js';
import { NETWORK_STATUS_ANNOTATION } from '../netattach/status.js';
import type { PodRef } from '../cni-frontend/pod-networks.js';

/** The HTTP status of a KubeApiError (0: no answer); src/kube is loaded by the caller, not here. */
function statusOf(err: unknown): number | undefined {
  const status = err instanceof Error ? (err as Error & { status?: unknown }).status : undefined;
  return typeof status === 'number' ? status : undefined;
}

/** RFC 6901: "~" and "/" in a key. */
const pointer = (key: string) => key.replace(/~/g, '~0').replace(/\//g, '~1');

interface Pending {
  pod: PodRef;
  text: string;
  failures: number;
}

export class NetworkStatusWriter {
  private readonly pending = new Map<string, Pending>();
  private readonly running = new Set<string>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private closed = false;

  constructor(
    private readonly client: KubeClient,
    private readonly log: Logger,
    /** The wait before the n-th try again (src/kube's backoffDelay). */
    private readonly retryDelay: (failures: number) => number,
  ) {}

  publish(pod: PodRef, text: string): void {
    const key = `${pod.namespace}/${pod.name}`;
    this.pending.set(key, { pod, text, failures: 0 });
    if (!this.running.has(key)) void this.drain(key);
  }

  /** Nothing to write and nothing being written. */
  get idle(): boolean {
    return this.pending.size === 0 && this.running.size === 0;
  }

  private async drain(key: string): Promise<void> {
    this.running.add(key);
    try {
      let next: Pending | undefined;
      while (!this.closed && (next = this.pending.get(key))) {
        this.pending.delete(key);
        const done = await this.write(next);
        if (!done && !this.pending.has(key) && !this.closed) {
          // Not taken: wait, then try again unless a newer text arrived meanwhile.
          next.failures++;
          this.pending.set(key, next);
          await this.sleep(this.retryDelay(next.failures));
        }
      }
    } finally {
      this.running.delete(key);
    }
  }

  /** true: written, or nothing to write any more (pod gone, another pod now). */
  private async write({ pod, text, failures }: Pending): Promise<boolean> {
    const path = `/api/v1/namespaces/${pod.namespace}/pods/${pod.name}`;
    const uid = { op: 'test', path: '/metadata/uid', value: pod.uid };
    try {
      await this.client.patch(path, [uid, { op: 'add', path: `/metadata/annotations/${pointer(NETWORK_STATUS_ANNOTATION)}`, value: text }], 'json');
      return true;
    } catch (err) {
      const status = statusOf(err);
      if (status === undefined) throw err;
      if (status === 404) return true;
      if (status === 422 || status === 500) {
        // The test failed (another pod by that name), or the pod has no annotations at all, so
        // the path does not exist: only the second is worth another try, whole map at once.
        return this.writeWithoutAnnotations(path, pod, text);
      }
      if (failures === 0) this.log.warn({ pod: `${pod.namespace}/${pod.name}`, err: (err as Error).message }, 'network-status not written yet; trying again');
      return false;
    }
  }

  /** A pod with no annotation map: add the map, guarded by its resourceVersion, so an
   * annotation someone adds meanwhile is never overwritten (the test fails and we start over). */
  private async writeWithoutAnnotations(path: string, pod: PodRef, text: string): Promise<boolean> {
    try {
      const current = await this.client.get<{ metadata: { uid?: string; resourceVersion?: string; annotations?: Record<string, string> } }>(path);
      if (current.metadata.uid !== pod.uid) return true; // another pod by that name: not ours to write
      if (current.metadata.annotations) return false; // it has a map now: the plain write will do
      await this.client.patch(path, [
        { op: 'test', path: '/metadata/uid', value: pod.uid },
        { op: 'test', path: '/metadata/resourceVersion', value: current.metadata.resourceVersion },
        { op: 'add', path: '/metadata/annotations', value: { [NETWORK_STATUS_ANNOTATION]: text } },
      ], 'json');
      return true;
    } catch (err) {
      return statusOf(err) === 404;
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.timers.delete(t);
        resolve();
      }, ms);
      t.unref();
      this.timers.add(t);
    });
  }

  close(): void {
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }
}
