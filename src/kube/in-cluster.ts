// The ServiceAccount Kubernetes mounts into a pod: the API through the `kubernetes` Service's
// environment variables, the token, the cluster CA and the pod's namespace under
// /var/run/secrets/kubernetes.io/serviceaccount.
import { readFileSync } from 'node:fs';
import { isIPv6 } from 'node:net';
import path from 'node:path';
import { KubeAccessError, readRequired, tokenFromFile, type KubeAccess } from './access-common.js';

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

const SOURCE = 'in-cluster';

export function inClusterAccess(env: NodeJS.ProcessEnv, dir = SERVICE_ACCOUNT_DIR): KubeAccess {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) {
    const unset = [!host && 'KUBERNETES_SERVICE_HOST', !port && 'KUBERNETES_SERVICE_PORT'].filter(Boolean).join(' and ');
    throw new KubeAccessError(SOURCE, undefined, `${unset} not set: knit is not running in a pod; give it a kubeconfig (--kubeconfig or KUBECONFIG)`);
  }
  if (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535) {
    throw new KubeAccessError(SOURCE, 'KUBERNETES_SERVICE_PORT', `not a port number: ${JSON.stringify(port.slice(0, 16))}`);
  }
  const token = tokenFromFile(path.join(dir, 'token'), SOURCE);
  token(); // a missing token fails now, at start, not at the first request
  return {
    server: `https://${isIPv6(host) ? `[${host}]` : host}:${port}`,
    ca: readRequired(path.join(dir, 'ca.crt'), SOURCE),
    token,
    namespace: readNamespace(path.join(dir, 'namespace')),
    source: SOURCE,
  };
}

function readNamespace(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8').trim() || undefined;
  } catch {
    return undefined; // only an informational field: the token and CA are what must be there
  }
}
