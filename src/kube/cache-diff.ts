// What changed between the informer's cached view and a fresh list: the events a watch would have
// delivered had it not been cut off (by a 410 Gone or an unreachable apiserver). An object whose
// resourceVersion is unchanged is the same object, so it is not reported; the API guarantees a
// new resourceVersion for every write. One deleted and made again under its name while the
// watch was down has a new uid: it is reported as the delete and the add it was.
import type { KubeObject } from './types.js';

/** "namespace/name", or "name" for a cluster-scoped object: the informer's cache key. */
export function objectKey(obj: KubeObject): string {
  const { namespace, name } = obj.metadata;
  return namespace ? `${namespace}/${name}` : name;
}

export interface CacheDiff<T> {
  added: T[];
  updated: { obj: T; old: T }[];
  deleted: T[];
}

/** `byContent`: an object whose resourceVersion is unchanged but whose content differs is
 * reported as updated too: the cached copy was read through a custom resource's old schema,
 * which pruned it (Informer.relistNow). */
export function diffRelist<T extends KubeObject>(cached: ReadonlyMap<string, T>, fresh: readonly T[], byContent = false): CacheDiff<T> {
  const out: CacheDiff<T> = { added: [], updated: [], deleted: [] };
  const seen = new Set<string>();
  for (const obj of fresh) {
    const key = objectKey(obj);
    seen.add(key);
    const old = cached.get(key);
    if (!old) out.added.push(obj);
    else if (old.metadata.uid !== obj.metadata.uid) {
      out.deleted.push(old); // deleted and made again under the same name: a different object
      out.added.push(obj);
    } else if (old.metadata.resourceVersion !== obj.metadata.resourceVersion || (byContent && JSON.stringify(old) !== JSON.stringify(obj))) out.updated.push({ obj, old });
  }
  for (const [key, old] of cached) if (!seen.has(key)) out.deleted.push(old);
  return out;
}
