// The Kubernetes API client for the DRA driver, from src/kube, loaded only when the config turns
// the driver on: a node without DRA pays nothing for it (docs/kubernetes-api.md has the import
// cost). KubeClient has the shape of the driver's port (src/dra/kube-port.ts).
import type { KubeApi } from '../dra/kube-port.js';

export async function kubeApi(kubeconfig: string | undefined): Promise<KubeApi> {
  const { KubeClient, loadKubeAccess } = await import('../kube/index.js');
  return new KubeClient(loadKubeAccess(kubeconfig ? { kubeconfig, env: process.env } : { env: process.env }), { userAgent: 'knit-dra', timeoutMs: 10_000 });
}
