// A kubeconfig (the file kubectl reads) → KubeAccess. One context: the named one or
// current-context, its cluster (server, CA as a file or inline, tls-server-name,
// insecure-skip-tls-verify) and its user (token, tokenFile, client certificate and key as files
// or inline). Relative paths are relative to the file that names them, as kubectl reads them.
// Several files (a KUBECONFIG list) merge as kubectl merges them: the first to set a name wins.
// What knit cannot honour is refused, naming the field: exec and auth-provider plugins would
// have the daemon run programs a kubeconfig names, and a proxy, basic auth or impersonation
// would be silently dropped otherwise.
import path from 'node:path';
import { plainJson, yamlPackage as yaml } from '../base/plain-json.js';
import { KubeAccessError, readRequired, tokenFromFile, type KubeAccess } from './access-common.js';

export interface KubeconfigText {
  path: string;
  text: string;
}

type Fields = Record<string, unknown>;

interface Found {
  fields: Fields;
  /** The file the entry came from: relative paths in it are relative to that file's folder. */
  file: string;
  /** How a message names it: `users["admin"].user`. */
  field: string;
}

const REFUSED_CLUSTER_FIELDS: Record<string, string> = {
  'proxy-url': 'knit does not go through a proxy to reach the API; remove it or point server at the apiserver',
};

const REFUSED_USER_FIELDS: Record<string, string> = {
  exec: 'exec credential plugins are not supported (the daemon would run the program the file names); use token, tokenFile or a client certificate',
  'auth-provider': 'auth-provider plugins are not supported; use token, tokenFile or a client certificate',
  username: 'basic authentication is not supported (kube-apiserver dropped it in 1.19); use token, tokenFile or a client certificate',
  password: 'basic authentication is not supported (kube-apiserver dropped it in 1.19); use token, tokenFile or a client certificate',
  as: 'impersonation is not supported; give knit credentials of its own',
  'as-uid': 'impersonation is not supported; give knit credentials of its own',
  'as-groups': 'impersonation is not supported; give knit credentials of its own',
  'as-user-extra': 'impersonation is not supported; give knit credentials of its own',
};

export function accessFromKubeconfig(files: readonly KubeconfigText[], contextName?: string): KubeAccess {
  const docs = files.map((f) => ({ path: f.path, doc: parseKubeconfig(f) }));
  const where = `kubeconfig ${files.map((f) => f.path).join(':')}`;
  const name = contextName ?? docs.map((d) => d.doc['current-context']).find((v): v is string => typeof v === 'string' && v !== '');
  if (!name) throw new KubeAccessError(where, 'current-context', 'not set, and no context was named');

  const context = findNamed(docs, where, 'context', name);
  const source = `kubeconfig ${context.file} context ${name}`;
  const clusterName = stringField(context, 'cluster', source);
  if (!clusterName) throw new KubeAccessError(source, `${context.field}.cluster`, 'missing');
  const cluster = findNamed(docs, source, 'cluster', clusterName);
  const userName = stringField(context, 'user', source);
  const user = userName ? findNamed(docs, source, 'user', userName) : undefined;

  const access: KubeAccess = { server: serverOf(cluster, source), source };
  const namespace = stringField(context, 'namespace', source);
  if (namespace) access.namespace = namespace;
  Object.assign(access, clusterTls(cluster, source));
  if (user) Object.assign(access, credentials(user, source));
  return access;
}

function parseKubeconfig(file: KubeconfigText): Fields {
  let doc: unknown;
  try {
    // A kubeconfig in JSON (as some tools write it) is read without loading the YAML parser;
    // what it loads stays resident in the daemon (src/base/plain-json.ts).
    doc = (plainJson(file.text) ?? { value: yaml().parse(file.text) }).value;
  } catch (err) {
    throw new KubeAccessError(`kubeconfig ${file.path}`, undefined, (err as Error).message.split('\n')[0]!.replace(/:$/, ''));
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new KubeAccessError(`kubeconfig ${file.path}`, undefined, 'not a mapping of fields');
  return doc as Fields;
}

/** The entry of that name in contexts, clusters or users, first file first. */
function findNamed(docs: { path: string; doc: Fields }[], source: string, kind: 'context' | 'cluster' | 'user', name: string): Found {
  const list = `${kind}s`;
  for (const { path: file, doc } of docs) {
    const entries = doc[list];
    if (entries === undefined || entries === null) continue;
    if (!Array.isArray(entries)) throw new KubeAccessError(`kubeconfig ${file}`, list, 'not a list');
    const entry = entries.find((e) => isFields(e) && e.name === name) as Fields | undefined;
    if (!entry) continue;
    const field = `${list}[${JSON.stringify(name)}].${kind}`;
    const fields = entry[kind] ?? {};
    if (!isFields(fields)) throw new KubeAccessError(`kubeconfig ${file}`, field, 'not a mapping of fields');
    return { fields, file, field };
  }
  throw new KubeAccessError(source, `${list}`, `no ${kind} named ${JSON.stringify(name)}`);
}

function serverOf(cluster: Found, source: string): string {
  const server = stringField(cluster, 'server', source);
  if (!server) throw new KubeAccessError(source, `${cluster.field}.server`, 'missing');
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw new KubeAccessError(source, `${cluster.field}.server`, `not a URL: ${JSON.stringify(server.slice(0, 64))}`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new KubeAccessError(source, `${cluster.field}.server`, `${url.protocol} is not http: or https:`);
  }
  return server.replace(/\/+$/, '');
}

function clusterTls(cluster: Found, source: string): Partial<KubeAccess> {
  refuse(cluster, REFUSED_CLUSTER_FIELDS, source);
  const out: Partial<KubeAccess> = {};
  const ca = bytesField(cluster, 'certificate-authority', source);
  const insecure = cluster.fields['insecure-skip-tls-verify'];
  if (insecure !== undefined && typeof insecure !== 'boolean') {
    throw new KubeAccessError(source, `${cluster.field}.insecure-skip-tls-verify`, 'not true or false');
  }
  if (insecure && ca) {
    // kubectl refuses the pair too: the file would promise a check that is not made.
    throw new KubeAccessError(source, `${cluster.field}.insecure-skip-tls-verify`, 'set together with a certificate authority; keep one of them');
  }
  if (ca) out.ca = ca;
  if (insecure) out.insecureSkipTLSVerify = true;
  const serverName = stringField(cluster, 'tls-server-name', source);
  if (serverName) out.tlsServerName = serverName;
  return out;
}

function credentials(user: Found, source: string): Partial<KubeAccess> {
  refuse(user, REFUSED_USER_FIELDS, source);
  const out: Partial<KubeAccess> = {};
  const tokenFile = stringField(user, 'tokenFile', source);
  const token = stringField(user, 'token', source);
  if (tokenFile) {
    out.token = tokenFromFile(path.resolve(path.dirname(user.file), tokenFile), source, `${user.field}.tokenFile`);
    out.token(); // a missing token fails now, at start
  } else if (token) {
    out.token = () => token;
  }
  const cert = bytesField(user, 'client-certificate', source);
  const key = bytesField(user, 'client-key', source);
  if (Boolean(cert) !== Boolean(key)) {
    const missing = cert ? 'client-key' : 'client-certificate';
    throw new KubeAccessError(source, `${user.field}.${missing}`, `missing: a client ${cert ? 'certificate' : 'key'} needs its ${cert ? 'key' : 'certificate'}`);
  }
  if (cert && key) Object.assign(out, { cert, key });
  return out;
}

function refuse(found: Found, refused: Record<string, string>, source: string): void {
  for (const [field, why] of Object.entries(refused)) {
    const value = found.fields[field];
    if (value !== undefined && value !== null && value !== '') throw new KubeAccessError(source, `${found.field}.${field}`, why);
  }
}

/** PEM from `<name>-data` (base64, inline; it wins, as in kubectl) or from the file `<name>` names. */
function bytesField(found: Found, name: string, source: string): Buffer | undefined {
  const data = stringField(found, `${name}-data`, source);
  if (data) {
    const bytes = Buffer.from(data, 'base64');
    if (bytes.length === 0) throw new KubeAccessError(source, `${found.field}.${name}-data`, 'not base64');
    return bytes;
  }
  const file = stringField(found, name, source);
  if (!file) return undefined;
  return readRequired(path.resolve(path.dirname(found.file), file), source, `${found.field}.${name}`);
}

function stringField(found: Found, name: string, source: string): string | undefined {
  const value = found.fields[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw new KubeAccessError(source, `${found.field}.${name}`, `not a string`);
  return value;
}

function isFields(value: unknown): value is Fields {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
