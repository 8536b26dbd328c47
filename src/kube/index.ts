// The Kubernetes API client in one import, for the daemon to load only when a feature uses the
// API: `const kube = await import('../kube/index.js')`. Nothing here runs on import.
export { loadKubeAccess, KubeAccessError, SERVICE_ACCOUNT_DIR, type KubeAccess, type LoadOptions } from './access.js';
export { KubeClient, KubeApiError, type ClientOptions, type ListQuery, type PatchType, type WatchQuery } from './client.js';
export { Informer, type ChangeKind, type InformerOptions, type InformerState } from './informer.js';
export { objectKey } from './cache-diff.js';
export { backoffDelay, DEFAULT_BACKOFF, type BackoffPolicy } from './backoff.js';
export type * from './types.js';
