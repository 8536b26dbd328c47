// The Kubernetes API client for the DRA driver, built from src/kube (KubeClient, loadKubeAccess)
// and loaded only when the config turns the driver on: src/kube's import costs memory that a
// node without DRA must not pay. The module paths are given as values so this file compiles
// before src/kube is on the branch; the shapes are src/kube's (CONTRACTS: get/list/create/
// replace/patch/delete, KubeApiError.status).
import type { KubeApi } from '../dra/kube-port.js';

interface KubeModules {
  access: { loadKubeAccess(o: { kubeconfig?: string; env?: NodeJS.ProcessEnv }): unknown };
  client: { KubeClient: new (access: unknown, opts?: { userAgent?: string; timeoutMs?: number }) => KubeApi };
}

const ACCESS = '../kube/access.js';
const CLIENT = '../kube/client.js';

export async function kubeApi(kubeconfig: string | undefined): Promise<KubeApi> {
  const [access, client] = (await Promise.all([import(ACCESS), import(CLIENT)])) as [KubeModules['access'], KubeModules['client']];
  const opts = kubeconfig ? { kubeconfig, env: process.env } : { env: process.env };
  return new client.KubeClient(access.loadKubeAccess(opts), { userAgent: 'knit-dra', timeoutMs: 10_000 });
}
