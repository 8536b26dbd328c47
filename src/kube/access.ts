// Where the Kubernetes API is and how to prove who knit is: a kubeconfig file (an explicit path,
// else $KUBECONFIG), else the ServiceAccount Kubernetes mounts into a pod. Loading reads and
// checks everything once, so a bad setup fails at start with its file and field named; only a
// token file is read again on every request (projected tokens rotate on disk).
import { statSync } from 'node:fs';
import { KubeAccessError, readRequired } from './access-common.js';
import { inClusterAccess, SERVICE_ACCOUNT_DIR } from './in-cluster.js';
import { accessFromKubeconfig } from './kubeconfig.js';
import type { KubeAccess } from './access-common.js';

export { KubeAccessError, type KubeAccess } from './access-common.js';
export { SERVICE_ACCOUNT_DIR } from './in-cluster.js';

export interface LoadOptions {
  /** A kubeconfig file; wins over $KUBECONFIG and the in-cluster ServiceAccount. */
  kubeconfig?: string;
  /** A context other than the file's current-context. */
  context?: string;
  env?: NodeJS.ProcessEnv;
  /** Where the ServiceAccount files are (tests; a pod always has them at SERVICE_ACCOUNT_DIR). */
  serviceAccountDir?: string;
}

export function loadKubeAccess(opts: LoadOptions = {}): KubeAccess {
  const env = opts.env ?? process.env;
  if (opts.kubeconfig) return accessFromKubeconfig([readKubeconfig(opts.kubeconfig, 'kubeconfig')], opts.context);
  if (env.KUBECONFIG) {
    // A list, as kubectl reads it: files that do not exist are skipped, the first to set a name wins.
    const paths = env.KUBECONFIG.split(':').filter(Boolean);
    const present = paths.filter(isFile);
    if (present.length === 0) throw new KubeAccessError('KUBECONFIG', undefined, `no such file: ${paths.join(', ')}`);
    return accessFromKubeconfig(present.map((p) => readKubeconfig(p, 'KUBECONFIG')), opts.context);
  }
  if (opts.context) {
    throw new KubeAccessError('in-cluster', undefined, `context ${JSON.stringify(opts.context)} asked for, but there is no kubeconfig (give one, or set KUBECONFIG)`);
  }
  return inClusterAccess(env, opts.serviceAccountDir ?? SERVICE_ACCOUNT_DIR);
}

function readKubeconfig(file: string, source: string): { path: string; text: string } {
  return { path: file, text: readRequired(file, source).toString('utf8') };
}

function isFile(file: string): boolean {
  try {
    return statSync(file).isFile();
  } catch {
    return false;
  }
}
