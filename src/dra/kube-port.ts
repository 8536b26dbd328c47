// What the DRA driver needs of the Kubernetes API, as a port: src/kube's KubeClient has this
// shape (get/list/create/replace/patch/delete on API paths, errors carrying the HTTP status),
// and tests hand in a client of a real kube-apiserver. Only resource.k8s.io/v1 is used.
import type { ClaimReader, ResourceClaim } from './claim.js';

export interface KubeApi {
  get<T>(path: string): Promise<T>;
  create<T>(path: string, body: unknown, q?: { fieldManager?: string }): Promise<T>;
  replace<T>(path: string, body: unknown): Promise<T>;
  patch<T>(path: string, body: unknown, type: 'merge' | 'json' | 'strategic' | 'apply', q?: { fieldManager?: string; force?: boolean }): Promise<T>;
  delete(path: string): Promise<void>;
}

export const RESOURCE_API = '/apis/resource.k8s.io/v1';

export const claimPath = (namespace: string, name: string) =>
  `${RESOURCE_API}/namespaces/${encodeURIComponent(namespace)}/resourceclaims/${encodeURIComponent(name)}`;

export const isNotFound = (err: unknown) => (err as { status?: number } | null)?.status === 404;

export function claimReader(api: KubeApi): ClaimReader {
  return {
    async getClaim(namespace, name) {
      try {
        return await api.get<ResourceClaim>(claimPath(namespace, name));
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw err;
      }
    },
  };
}
