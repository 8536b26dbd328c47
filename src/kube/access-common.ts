// What both ways of finding the API (kubeconfig, in-cluster) produce and share: the access
// record, the error that names the file and field, and reading the files they point at.
import { readFileSync } from 'node:fs';
import { KnitError } from '../base/errors.js';

export interface KubeAccess {
  /** https://host:port, possibly with a path prefix. */
  server: string;
  ca?: Buffer;
  /** The bearer token, read afresh on each call when it comes from a file. */
  token?: () => string;
  cert?: Buffer;
  key?: Buffer;
  insecureSkipTLSVerify?: boolean;
  /** The name the server's certificate must carry when it is not the host in `server`. */
  tlsServerName?: string;
  /** The namespace of the context or of the ServiceAccount, when known. */
  namespace?: string;
  /** "in-cluster" or "kubeconfig <path> context <name>": where this came from, for messages. */
  source: string;
}

/** A setup knit cannot use: names the file (or variable) and the field. */
export class KubeAccessError extends KnitError {
  constructor(source: string, field: string | undefined, message: string) {
    super('FAILED_PRECONDITION', `${source}: ${field ? `${field}: ` : ''}${message}`, { field });
    this.name = 'KubeAccessError';
  }
}

/** A token read from its file on every call: the kubelet rewrites a projected token in place
 * (by default hourly), and a read of a small cached file costs microseconds, less than deciding
 * whether to read it. */
export function tokenFromFile(file: string, source: string, field?: string): () => string {
  return () => {
    const token = readRequired(file, source, field).toString('utf8').trim();
    if (!token) throw new KubeAccessError(source, field, `token file ${file} is empty`);
    return token;
  };
}

export function readRequired(file: string, source: string, field?: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new KubeAccessError(source, field, (err as Error).message);
  }
}
