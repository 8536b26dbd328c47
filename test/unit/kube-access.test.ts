// Finding the API: kubeconfig files as kubectl reads them (contexts, relative paths, inline and
// file credentials, KUBECONFIG lists), fields knit refuses naming themselves, and the in-cluster
// ServiceAccount (IPv6 host, a token that rotates on disk, what is missing said by name).
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { loadKubeAccess, KubeAccessError } from '../../src/kube/access.js';

const CA = '-----BEGIN CERTIFICATE-----\nMIIBca\n-----END CERTIFICATE-----\n';
const b64 = (s: string) => Buffer.from(s).toString('base64');

async function tempDir(t: { teardown(fn: () => Promise<void>): void }): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'knit-kube-access-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

const twoContexts = `
apiVersion: v1
kind: Config
current-context: admin@one
clusters:
- name: one
  cluster:
    server: https://127.0.0.1:6443/
    certificate-authority: pki/ca.crt
- name: two
  cluster:
    server: https://[fd00::1]:443
    certificate-authority-data: ${b64(CA)}
    tls-server-name: kubernetes.default
contexts:
- name: admin@one
  context: {cluster: one, user: admin, namespace: kube-system}
- name: knit@two
  context: {cluster: two, user: knit}
users:
- name: admin
  user:
    client-certificate-data: ${b64('CERT')}
    client-key-data: ${b64('KEY')}
- name: knit
  user:
    tokenFile: secrets/token
`;

test('kubeconfig: current-context, its cluster and user; relative paths from the file', async (t) => {
  const dir = await tempDir(t);
  await mkdir(path.join(dir, 'pki'));
  await writeFile(path.join(dir, 'pki/ca.crt'), CA);
  await writeFile(path.join(dir, 'config'), twoContexts);
  const a = loadKubeAccess({ kubeconfig: path.join(dir, 'config'), env: {} });
  t.is(a.server, 'https://127.0.0.1:6443');
  t.is(a.ca?.toString(), CA);
  t.is(a.cert?.toString(), 'CERT');
  t.is(a.key?.toString(), 'KEY');
  t.is(a.token, undefined);
  t.is(a.namespace, 'kube-system');
  t.is(a.source, `kubeconfig ${path.join(dir, 'config')} context admin@one`);
});

test('kubeconfig: a named context; a tokenFile is read again on every call (it rotates)', async (t) => {
  const dir = await tempDir(t);
  await mkdir(path.join(dir, 'secrets'));
  await writeFile(path.join(dir, 'secrets/token'), 'first\n');
  await writeFile(path.join(dir, 'config'), twoContexts);
  const a = loadKubeAccess({ kubeconfig: path.join(dir, 'config'), context: 'knit@two', env: {} });
  t.is(a.server, 'https://[fd00::1]:443');
  t.is(a.ca?.toString(), CA);
  t.is(a.tlsServerName, 'kubernetes.default');
  t.is(a.token?.(), 'first');
  await writeFile(path.join(dir, 'secrets/token'), 'second');
  t.is(a.token?.(), 'second');
});

test('KUBECONFIG: a list merges, the first file to name an entry wins, missing files are skipped', async (t) => {
  const dir = await tempDir(t);
  await writeFile(path.join(dir, 'a'), `current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\nusers: [{name: u, user: {token: from-a}}]\n`);
  await writeFile(path.join(dir, 'b'), `current-context: other\nclusters: [{name: k, cluster: {server: "http://127.0.0.1:8080", insecure-skip-tls-verify: true}}]\nusers: [{name: u, user: {token: from-b}}]\n`);
  const env = { KUBECONFIG: [path.join(dir, 'missing'), path.join(dir, 'a'), path.join(dir, 'b')].join(':') };
  const a = loadKubeAccess({ env });
  t.is(a.server, 'http://127.0.0.1:8080');
  t.is(a.token?.(), 'from-a');
  t.true(a.insecureSkipTLSVerify);
  t.is(a.source, `kubeconfig ${path.join(dir, 'a')} context c`);
});

test('an explicit kubeconfig wins over KUBECONFIG and the in-cluster environment', async (t) => {
  const dir = await tempDir(t);
  await writeFile(path.join(dir, 'config'), `current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\nclusters: [{name: k, cluster: {server: "https://10.0.0.1:6443"}}]\n`);
  const env = { KUBECONFIG: '/nonexistent', KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' };
  const a = loadKubeAccess({ kubeconfig: path.join(dir, 'config'), env });
  t.is(a.server, 'https://10.0.0.1:6443');
  t.is(a.token, undefined, 'a context without a user is anonymous');
});

const refused: [string, string, string, RegExp][] = [
  ['exec plugin', 'exec: {command: aws, apiVersion: client.authentication.k8s.io/v1}', 'users["u"].user.exec', /exec credential plugins are not supported/],
  ['auth-provider', 'auth-provider: {name: gcp}', 'users["u"].user.auth-provider', /auth-provider plugins are not supported/],
  ['basic auth', 'username: admin', 'users["u"].user.username', /basic authentication is not supported/],
  ['impersonation', 'as: system:admin', 'users["u"].user.as', /impersonation is not supported/],
];

for (const [what, userYaml, field, message] of refused) {
  test(`kubeconfig: ${what} is refused, naming the field and the file`, async (t) => {
    const dir = await tempDir(t);
    const file = path.join(dir, 'config');
    await writeFile(file, `current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\nclusters: [{name: k, cluster: {server: "https://h:1"}}]\nusers:\n- name: u\n  user:\n    ${userYaml}\n`);
    const err = t.throws(() => loadKubeAccess({ kubeconfig: file, env: {} }), { instanceOf: KubeAccessError });
    t.is(err?.details.field, field);
    t.true(err?.message.startsWith(`kubeconfig ${file} context c: ${field}: `), err?.message);
    t.regex(err?.message ?? '', message);
  });
}

test('kubeconfig: mistakes are named by file and field', async (t) => {
  const dir = await tempDir(t);
  const file = path.join(dir, 'config');
  const cases: [string, RegExp][] = [
    ['clusters: []\n', /: current-context: not set, and no context was named$/],
    ['current-context: nope\ncontexts: []\n', /: contexts: no context named "nope"$/],
    ['current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\n', /context c: clusters: no cluster named "k"$/],
    ['current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\nclusters: [{name: k, cluster: {}}]\n', /context c: clusters\["k"\]\.cluster\.server: missing$/],
    ['current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\nclusters: [{name: k, cluster: {server: "ftp://h"}}]\n', /clusters\["k"\]\.cluster\.server: ftp: is not http: or https:$/],
    ['current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\nclusters: [{name: k, cluster: {server: "https://h:1", proxy-url: "http://p:3128"}}]\n', /clusters\["k"\]\.cluster\.proxy-url: knit does not go through a proxy/],
    [`current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\nclusters: [{name: k, cluster: {server: "https://h:1", insecure-skip-tls-verify: true, certificate-authority-data: ${b64(CA)}}}]\n`, /insecure-skip-tls-verify: set together with a certificate authority/],
    ['current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\nclusters: [{name: k, cluster: {server: "https://h:1", certificate-authority: nothere.crt}}]\n', /clusters\["k"\]\.cluster\.certificate-authority: ENOENT: no such file or directory, open '.*nothere\.crt'$/],
    [`current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\nclusters: [{name: k, cluster: {server: "https://h:1"}}]\nusers: [{name: u, user: {client-certificate-data: ${b64('C')}}}]\n`, /users\["u"\]\.user\.client-key: missing: a client certificate needs its key$/],
    ['current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\nclusters: [{name: k, cluster: {server: "https://h:1"}}]\nusers: [{name: u, user: {tokenFile: gone}}]\n', /users\["u"\]\.user\.tokenFile: ENOENT/],
    ['current-context: [\n', /^kubeconfig .*config: /],
    ['- a list\n', /: not a mapping of fields$/],
  ];
  for (const [text, expected] of cases) {
    await writeFile(file, text);
    const err = t.throws(() => loadKubeAccess({ kubeconfig: file, env: {} }), { instanceOf: KubeAccessError }, text);
    t.regex(err?.message ?? '', expected, text);
    t.is(err?.code, 'FAILED_PRECONDITION');
  }
  t.throws(() => loadKubeAccess({ kubeconfig: path.join(dir, 'absent'), env: {} }), { message: /^kubeconfig: ENOENT: .*absent'$/ });
  t.throws(() => loadKubeAccess({ env: { KUBECONFIG: `${dir}/x:${dir}/y` } }), { message: `KUBECONFIG: no such file: ${dir}/x, ${dir}/y` });
});

test('kubeconfig: one in JSON is read without loading the YAML parser (it stays resident); YAML, or JSON that repeats a key, goes to it', async (t) => {
  const dir = await tempDir(t);
  const json = JSON.stringify({
    'current-context': 'c', contexts: [{ name: 'c', context: { cluster: 'k', user: 'u' } }],
    clusters: [{ name: 'k', cluster: { server: 'https://h:6443', 'certificate-authority-data': b64(CA) } }], users: [{ name: 'u', user: { token: 'T' } }],
  });
  await writeFile(path.join(dir, 'json'), json);
  await writeFile(path.join(dir, 'yaml'), `current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\nclusters: [{name: k, cluster: {server: "https://h:6443"}}]\nusers: [{name: u, user: {token: T}}]\n`);
  await writeFile(path.join(dir, 'repeated'), json.replace('"current-context":"c"', '"current-context":"c","current-context":"c"'));
  // A fresh node per file: this test's own process may have loaded yaml already.
  const access = pathToFileURL(fileURLToPath(import.meta.url).replace(/test\/unit\/kube-access\.test\.js$/, 'src/kube/access.js')).href;
  const load = (file: string): { server?: string; error?: string; yaml: boolean } => JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', `
    import { createRequire } from 'node:module';
    const { loadKubeAccess } = await import(${JSON.stringify(access)});
    let server, error;
    try { server = loadKubeAccess({ kubeconfig: ${JSON.stringify(path.join(dir, file))}, env: {} }).server; } catch (err) { error = err.message; }
    const yaml = Object.keys(createRequire(import.meta.url).cache).some((m) => m.includes('/node_modules/yaml/'));
    console.log(JSON.stringify({ server, error, yaml }));
  `], { encoding: 'utf8' }));
  t.deepEqual(load('json'), { server: 'https://h:6443', yaml: false });
  t.deepEqual(load('yaml'), { server: 'https://h:6443', yaml: true });
  const repeated = load('repeated');
  t.true(repeated.yaml);
  t.regex(repeated.error ?? '', /^kubeconfig .*repeated: Map keys must be unique/);
});

async function serviceAccount(t: { teardown(fn: () => Promise<void>): void }, files: Record<string, string>): Promise<string> {
  const dir = await tempDir(t);
  for (const [name, text] of Object.entries(files)) await writeFile(path.join(dir, name), text);
  return dir;
}

test('in-cluster: the Service environment, the CA, the namespace, a token read afresh each call', async (t) => {
  const dir = await serviceAccount(t, { token: 'tok-1', 'ca.crt': CA, namespace: 'knit-system\n' });
  const a = loadKubeAccess({ env: { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' }, serviceAccountDir: dir });
  t.is(a.server, 'https://10.96.0.1:443');
  t.is(a.ca?.toString(), CA);
  t.is(a.namespace, 'knit-system');
  t.is(a.source, 'in-cluster');
  t.is(a.token?.(), 'tok-1');
  await writeFile(path.join(dir, 'token'), 'tok-2'); // the kubelet rotated it
  t.is(a.token?.(), 'tok-2');
  await writeFile(path.join(dir, 'token'), '');
  t.throws(() => a.token?.(), { message: `in-cluster: token file ${dir}/token is empty` });
});

test('in-cluster: an IPv6 service host is bracketed', async (t) => {
  const dir = await serviceAccount(t, { token: 't', 'ca.crt': CA });
  const a = loadKubeAccess({ env: { KUBERNETES_SERVICE_HOST: 'fd00:10:96::1', KUBERNETES_SERVICE_PORT: '6443' }, serviceAccountDir: dir });
  t.is(a.server, 'https://[fd00:10:96::1]:6443');
  t.is(a.namespace, undefined);
});

test('in-cluster: what is missing is said by name', async (t) => {
  const dir = await serviceAccount(t, { 'ca.crt': CA });
  const env = { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' };
  t.throws(() => loadKubeAccess({ env: {} }), {
    message: 'in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT not set: knit is not running in a pod; give it a kubeconfig (--kubeconfig or KUBECONFIG)',
  });
  t.throws(() => loadKubeAccess({ env: { KUBERNETES_SERVICE_HOST: 'h' } }), { message: /^in-cluster: KUBERNETES_SERVICE_PORT not set/ });
  t.throws(() => loadKubeAccess({ env: { ...env, KUBERNETES_SERVICE_PORT: 'https' } }), { message: 'in-cluster: KUBERNETES_SERVICE_PORT: not a port number: "https"' });
  t.throws(() => loadKubeAccess({ env, serviceAccountDir: dir }), { message: `in-cluster: ENOENT: no such file or directory, open '${dir}/token'` });
  await writeFile(path.join(dir, 'token'), 't');
  await rm(path.join(dir, 'ca.crt'));
  t.throws(() => loadKubeAccess({ env, serviceAccountDir: dir }), { message: `in-cluster: ENOENT: no such file or directory, open '${dir}/ca.crt'` });
  t.throws(() => loadKubeAccess({ env, context: 'x' }), { message: /^in-cluster: context "x" asked for, but there is no kubeconfig/ });
});
