// src/kube against a real kube-apiserver (test/fixtures/kube-cluster.ts: etcd, apiserver,
// controller manager and scheduler built from the module proxy), with kubectl as the independent
// observer and writer. Calls and paging, every patch type, server-side apply on a status
// subresource, DRA objects, token and certificate access, watches with bookmarks, a 410 Gone,
// and an informer that loses the API (a cut connection, a stopped apiserver) and catches up.
// Serial: one control plane for the file, and one test stops its apiserver.
import anyTest, { type TestFn } from 'ava';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { relay } from '../helpers/api-relay.js';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadKubeAccess } from '../../src/kube/access.js';
import { KubeApiError, KubeClient } from '../../src/kube/client.js';
import { Informer, type InformerState } from '../../src/kube/informer.js';
import type { Node, ResourceClaim, ResourceSlice, WatchEvent } from '../../src/kube/types.js';
import { createNode, fileScope, startControlPlane, type ControlPlane } from '../fixtures/kube-cluster.js';
import { uniquePrefix } from '../helpers/names.js';

const test = anyTest as TestFn<{ cp: ControlPlane; prefix: string; admin: KubeClient }>;
const scope = fileScope(anyTest);

test.before(async (t) => {
  const prefix = uniquePrefix('kcl');
  const cp = await startControlPlane(scope, { prefix });
  const admin = new KubeClient(loadKubeAccess({ kubeconfig: cp.adminKubeconfig, env: {} }), { userAgent: 'knit-e2e' });
  scope.teardown(() => admin.close());
  t.context = { cp, prefix, admin };
});

/** Polls until check() answers true; fails naming what it waited for. */
async function until(what: string, check: () => boolean | Promise<boolean>, ms = 30_000, explain = () => ''): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}${explain() ? `: ${explain()}` : ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const nodeNames = (items: { metadata: { name: string } }[], prefix: string) =>
  items.map((n) => n.metadata.name).filter((n) => n.startsWith(prefix)).sort();

test.serial('get, list page by page with selectors, create, replace, delete; failures name the call and the Status', async (t) => {
  const { cp, prefix, admin } = t.context;
  for (const [i, name] of ['a', 'b', 'c'].entries()) {
    await createNode(cp, `${prefix}${name}`, { internalIPs: [`192.0.2.${i + 1}`], labels: { 'knit.test/group': i < 2 ? 'ab' : 'c' } });
  }
  const byKubectl = nodeNames((await cp.getJson('get', 'nodes')).items, prefix);
  t.deepEqual(byKubectl, [`${prefix}a`, `${prefix}b`, `${prefix}c`]);

  const all = await admin.list<Node>('/api/v1/nodes', { limit: 1 }); // one object a page: three pages and more
  t.deepEqual(nodeNames(all.items, prefix), byKubectl);
  t.regex(all.resourceVersion, /^\d+$/);
  const ab = await admin.list<Node>('/api/v1/nodes', { labelSelector: 'knit.test/group=ab' });
  t.deepEqual(nodeNames(ab.items, prefix), [`${prefix}a`, `${prefix}b`]);
  const byField = await admin.list<Node>('/api/v1/nodes', { fieldSelector: `metadata.name=${prefix}c` });
  t.deepEqual(nodeNames(byField.items, prefix), [`${prefix}c`]);

  const a = await admin.get<Node>(`/api/v1/nodes/${prefix}a`);
  t.deepEqual(a.status?.addresses?.find((x) => x.type === 'InternalIP'), { type: 'InternalIP', address: '192.0.2.1' });

  const missing = await t.throwsAsync(admin.get(`/api/v1/nodes/${prefix}none`), { instanceOf: KubeApiError });
  t.is(missing?.status, 404);
  t.is(missing?.reason, 'NotFound');
  t.is(missing?.code, 'NOT_FOUND');
  t.is(missing?.message, `GET ${cp.server}/api/v1/nodes/${prefix}none: 404 NotFound: nodes "${prefix}none" not found`);

  const ns = `${prefix}ns`;
  await admin.create('/api/v1/namespaces', { metadata: { name: ns } });
  const cm = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cm', namespace: ns }, data: { k: 'v1' } };
  const created = await admin.create<{ metadata: { resourceVersion: string } }>(`/api/v1/namespaces/${ns}/configmaps`, cm, { fieldManager: 'knit-e2e' });
  const again = await t.throwsAsync(admin.create(`/api/v1/namespaces/${ns}/configmaps`, cm), { instanceOf: KubeApiError });
  t.is(again?.code, 'ALREADY_EXISTS');
  t.is(again?.message, `POST ${cp.server}/api/v1/namespaces/${ns}/configmaps: 409 AlreadyExists: configmaps "cm" already exists`);

  await admin.replace(`/api/v1/namespaces/${ns}/configmaps/cm`, { ...cm, metadata: { ...cm.metadata, resourceVersion: created.metadata.resourceVersion }, data: { k: 'v2' } });
  t.is((await cp.getJson('get', 'configmap', 'cm', '-n', ns)).data.k, 'v2');
  const stale = await t.throwsAsync(admin.replace(`/api/v1/namespaces/${ns}/configmaps/cm`, { ...cm, metadata: { ...cm.metadata, resourceVersion: created.metadata.resourceVersion } }), { instanceOf: KubeApiError });
  t.is(stale?.reason, 'Conflict');
  t.is(stale?.code, 'FAILED_PRECONDITION');

  const invalid = await t.throwsAsync(admin.create(`/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: 'Not_A_Name' } }), { instanceOf: KubeApiError });
  t.is(invalid?.status, 422);
  t.is(invalid?.code, 'INVALID_ARGUMENT');
  t.regex(invalid?.message ?? '', /: 422 Invalid: ConfigMap "Not_A_Name" is invalid: metadata\.name: Invalid value/);

  await admin.delete(`/api/v1/namespaces/${ns}/configmaps/cm`);
  await t.throwsAsync(cp.kubectl('get', 'configmap', 'cm', '-n', ns), { message: /NotFound/ });
  await t.notThrowsAsync(admin.delete(`/api/v1/namespaces/${ns}/configmaps/cm`), 'deleting what is gone succeeds');
});

test.serial('patch: merge, JSON, strategic; the status subresource; server-side apply with a field manager, a conflict, and force', async (t) => {
  const { cp, prefix, admin } = t.context;
  const name = `${prefix}p`;
  const nodePath = `/api/v1/nodes/${name}`;
  await createNode(cp, name, { internalIPs: ['192.0.2.10'] });
  const observed = () => cp.getJson('get', 'node', name, '--show-managed-fields');

  await admin.patch(nodePath, { metadata: { labels: { 'knit.test/merge': 'yes' } } }, 'merge');
  await admin.patch(nodePath, [{ op: 'add', path: '/metadata/annotations', value: { 'knit.test/json': 'yes' } }], 'json');
  await admin.patch(nodePath, { spec: { taints: [{ key: 'knit.test/taint', effect: 'NoSchedule' }] } }, 'strategic');
  let node = await observed();
  t.is(node.metadata.labels['knit.test/merge'], 'yes');
  t.is(node.metadata.annotations['knit.test/json'], 'yes');
  t.deepEqual(node.spec.taints, [{ key: 'knit.test/taint', effect: 'NoSchedule' }]);

  // status goes through its subresource: the main resource ignores it
  const addresses = [{ type: 'InternalIP', address: '192.0.2.11' }, { type: 'Hostname', address: name }];
  await admin.patch(nodePath, { status: { addresses: [{ type: 'InternalIP', address: '192.0.2.99' }] } }, 'merge');
  t.is((await observed()).status.addresses[0].address, '192.0.2.10');
  await admin.patch(`${nodePath}/status`, { status: { addresses } }, 'merge');
  t.deepEqual((await observed()).status.addresses, addresses);

  const apply = (value: string) => ({ apiVersion: 'v1', kind: 'Node', metadata: { name, labels: { 'knit.test/owner': value } } });
  await admin.patch(nodePath, apply('knit'), 'apply', { fieldManager: 'knit-e2e' });
  node = await observed();
  t.is(node.metadata.labels['knit.test/owner'], 'knit');
  t.true(node.metadata.managedFields.some((f: { manager: string; operation: string }) => f.manager === 'knit-e2e' && f.operation === 'Apply'));
  const conflict = await t.throwsAsync(admin.patch(nodePath, apply('other'), 'apply', { fieldManager: 'someone-else' }), { instanceOf: KubeApiError });
  t.is(conflict?.status, 409);
  t.is(conflict?.reason, 'Conflict');
  t.regex(conflict?.message ?? '', /conflict with "knit-e2e"/);
  t.is((await observed()).metadata.labels['knit.test/owner'], 'knit', 'a refused apply changes nothing');
  await admin.patch(nodePath, apply('other'), 'apply', { fieldManager: 'someone-else', force: true });
  t.is((await observed()).metadata.labels['knit.test/owner'], 'other');
});

test.serial('DRA objects: a ResourceSlice and a ResourceClaim read back in the shapes knit types; KEP-4817 network data applied to the claim status', async (t) => {
  const { cp, prefix, admin } = t.context;
  const ns = `${prefix}dra`;
  await cp.kubectl('create', 'namespace', ns);
  const driver = 'knit.test';
  const slice: ResourceSlice = {
    apiVersion: 'resource.k8s.io/v1',
    kind: 'ResourceSlice',
    metadata: { name: `${prefix}slice` },
    spec: {
      driver,
      nodeName: `${prefix}a`,
      pool: { name: `${prefix}a`, generation: 1, resourceSliceCount: 1 },
      devices: [{
        name: 'eth1',
        attributes: { 'knit.test/ifName': { string: 'eth1' }, 'knit.test/mtu': { int: 9000 }, 'knit.test/sriov': { bool: false }, 'knit.test/firmware': { version: '1.2.3' } },
        capacity: { 'knit.test/bandwidth': { value: '10G' } },
      }],
    },
  };
  await admin.create('/apis/resource.k8s.io/v1/resourceslices', slice);
  const readSlice = await admin.get<ResourceSlice>(`/apis/resource.k8s.io/v1/resourceslices/${prefix}slice`);
  t.deepEqual(readSlice.spec.devices?.[0]?.attributes, slice.spec.devices![0]!.attributes);
  t.deepEqual(readSlice.spec.pool, slice.spec.pool);
  t.is(readSlice.spec.nodeName, `${prefix}a`);

  const claimPath = `/apis/resource.k8s.io/v1/namespaces/${ns}/resourceclaims/nic`;
  await admin.create(`/apis/resource.k8s.io/v1/namespaces/${ns}/resourceclaims`, {
    apiVersion: 'resource.k8s.io/v1',
    kind: 'ResourceClaim',
    metadata: { name: 'nic', namespace: ns },
    spec: { devices: { requests: [{ name: 'nic', exactly: { deviceClassName: 'knit-nic' } }], config: [{ requests: ['nic'], opaque: { driver, parameters: { mtu: 9000 } } }] } },
  });
  // The pod the claim is for (bound to a node with no kubelet, so it only exists as an object:
  // the claim controller drops reservations for pods that do not exist).
  const pod = await admin.create<{ metadata: { uid: string } }>(`/api/v1/namespaces/${ns}/pods`, {
    metadata: { name: 'pod-1', namespace: ns },
    spec: { nodeName: `${prefix}a`, containers: [{ name: 'c', image: 'registry.invalid/none' }], resourceClaims: [{ name: 'nic', resourceClaimName: 'nic' }] },
  });
  // What the scheduler would write: the allocation, and the pod it is reserved for.
  await admin.patch(`${claimPath}/status`, {
    status: {
      allocation: { devices: { results: [{ request: 'nic', driver, pool: `${prefix}a`, device: 'eth1' }], config: [{ source: 'FromClaim', requests: ['nic'], opaque: { driver, parameters: { mtu: 9000 } } }] } },
      reservedFor: [{ resource: 'pods', name: 'pod-1', uid: pod.metadata.uid }],
    },
  }, 'merge');
  // What a DRA driver writes once the device is in the pod: server-side apply of status.devices.
  const networkData = { interfaceName: 'eth1', ips: ['10.9.8.7/24', 'fd00::7/64'], hardwareAddress: '02:00:00:00:00:07' };
  await admin.patch(`${claimPath}/status`, {
    apiVersion: 'resource.k8s.io/v1',
    kind: 'ResourceClaim',
    metadata: { name: 'nic', namespace: ns },
    status: {
      devices: [{
        driver, pool: `${prefix}a`, device: 'eth1', networkData,
        conditions: [{ type: 'Ready', status: 'True', reason: 'NetworkReady', message: '', lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z') }],
      }],
    },
  }, 'apply', { fieldManager: driver, force: true });

  const claim = await admin.get<ResourceClaim>(claimPath);
  t.deepEqual(claim.spec.devices?.requests?.[0]?.exactly?.deviceClassName, 'knit-nic');
  t.deepEqual(claim.status?.allocation?.devices?.results, [{ request: 'nic', driver, pool: `${prefix}a`, device: 'eth1' }]);
  t.deepEqual(claim.status?.allocation?.devices?.config?.[0]?.opaque, { driver, parameters: { mtu: 9000 } });
  t.is(claim.status?.reservedFor?.[0]?.uid, pod.metadata.uid);
  const observed = await cp.getJson('get', 'resourceclaim', 'nic', '-n', ns, '--show-managed-fields');
  t.deepEqual(observed.status.devices[0].networkData, networkData);
  t.is(observed.status.devices[0].conditions[0].type, 'Ready');
  t.true(observed.metadata.managedFields.some((f: { manager: string; subresource?: string }) => f.manager === driver && f.subresource === 'status'));
});

test.serial('access: a ServiceAccount token from a kubeconfig and in-cluster; 403 until RBAC allows, 401 for a bad token, a rotated token picked up', async (t) => {
  const { cp, prefix } = t.context;
  const ns = `${prefix}sa`;
  const token = await cp.serviceAccountToken(ns, 'knit');
  const viaKubeconfig = new KubeClient(loadKubeAccess({ kubeconfig: cp.kubeconfigFor(token), env: {} }));
  t.teardown(() => viaKubeconfig.close());
  const forbidden = await t.throwsAsync(viaKubeconfig.list('/api/v1/nodes'), { instanceOf: KubeApiError });
  t.is(forbidden?.status, 403);
  t.is(forbidden?.code, 'PERMISSION_DENIED');
  t.regex(forbidden?.message ?? '', new RegExp(`^GET ${cp.server}/api/v1/nodes: 403 Forbidden: nodes is forbidden: User "system:serviceaccount:${ns}:knit" cannot list resource "nodes"`));

  await cp.kubectl('create', 'clusterrole', `${prefix}nodes`, '--verb=get,list,watch', '--resource=nodes');
  await cp.kubectl('create', 'clusterrolebinding', `${prefix}nodes`, `--clusterrole=${prefix}nodes`, `--serviceaccount=${ns}:knit`);
  await until('RBAC to allow the ServiceAccount', () => viaKubeconfig.list('/api/v1/nodes').then(() => true, () => false));

  // The files a pod gets, and the Service environment pointing at this apiserver.
  const dir = await mkdtemp(path.join(tmpdir(), `knit-${prefix}sa-`));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(path.join(dir, 'token'), token);
  await writeFile(path.join(dir, 'ca.crt'), cp.caPem);
  await writeFile(path.join(dir, 'namespace'), ns);
  const port = new URL(cp.server).port;
  const access = loadKubeAccess({ env: { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: port }, serviceAccountDir: dir });
  t.is(access.namespace, ns);
  const inCluster = new KubeClient(access);
  t.teardown(() => inCluster.close());
  t.true((await inCluster.list<Node>('/api/v1/nodes')).items.length > 0);

  await writeFile(path.join(dir, 'token'), 'not-a-token');
  const unauthorized = await t.throwsAsync(inCluster.list('/api/v1/nodes'), { instanceOf: KubeApiError });
  t.is(unauthorized?.status, 401);
  t.is(unauthorized?.code, 'PERMISSION_DENIED');
  const rotated = (await cp.kubectl('create', 'token', 'knit', '-n', ns)).trim(); // what the kubelet writes when it rotates
  t.not(rotated, token);
  await writeFile(path.join(dir, 'token'), rotated);
  t.true((await inCluster.list<Node>('/api/v1/nodes')).items.length > 0);
});

test.serial('TLS: the CA checks the server, tls-server-name picks the name it must carry, insecure-skip-tls-verify skips the check; failures say why', async (t) => {
  const { cp, admin } = t.context;
  const base = { server: cp.server, source: 'e2e', cert: admin.access.cert, key: admin.access.key };
  const tryWith = async (extra: object) => {
    const client = new KubeClient({ ...base, ...extra });
    try {
      return await client.get<{ kind: string }>('/api/v1/namespaces/default');
    } finally {
      client.close();
    }
  };
  t.is((await tryWith({ ca: cp.caPem, tlsServerName: 'kubernetes.default' })).kind, 'Namespace');
  const wrongName = await t.throwsAsync(tryWith({ ca: cp.caPem, tlsServerName: 'wrong.example' }), { instanceOf: KubeApiError });
  t.is(wrongName?.status, 0);
  t.regex(wrongName?.message ?? '', new RegExp(`^GET ${cp.server}/api/v1/namespaces/default: Hostname/IP does not match certificate's altnames: Host: wrong\\.example\\.`));
  const noCa = await t.throwsAsync(tryWith({}), { instanceOf: KubeApiError });
  t.regex(noCa?.message ?? '', /: (unable to verify the first certificate|self-signed certificate in certificate chain|unable to get local issuer certificate) \(\w+\)$/);
  t.is((await tryWith({ insecureSkipTLSVerify: true })).kind, 'Namespace');
});

test.serial('connections: twelve calls at once are all answered over at most four connections, which the next calls reuse (ss)', async (t) => {
  const { cp, admin } = t.context;
  const port = new URL(cp.server).port;
  // This process's connections to the API server, as the kernel lists them (the admin client's
  // kept-alive ones included: counted before, unchanged after).
  const connections = () => execFileSync('ss', ['-tnpH', 'state', 'established', 'dport', `= :${port}`], { encoding: 'utf8' })
    .split('\n').filter((l) => l.includes(`pid=${process.pid},`)).length;
  const before = connections();
  const client = new KubeClient(admin.access, { userAgent: 'knit-e2e-connections' });
  t.teardown(() => client.close());
  const burst = async () => {
    const answers = await Promise.all(Array.from({ length: 12 }, () => client.get<{ kind: string }>('/api/v1/namespaces/default')));
    t.deepEqual(new Set(answers.map((a) => a.kind)), new Set(['Namespace']));
  };
  await burst();
  const opened = connections() - before;
  t.true(opened >= 1 && opened <= 4, `${opened} connections opened`);
  await burst();
  t.is(connections() - before, opened, 'the second burst reused them');
});

test.serial('watch: kubectl changes arrive as events, a bookmark before timeoutSeconds ends the stream', async (t) => {
  const { cp, prefix, admin } = t.context;
  const selector = `knit.test/watch=${prefix.slice(0, -1)}`;
  const { resourceVersion } = await admin.list<Node>('/api/v1/nodes', { labelSelector: selector });
  const events: WatchEvent<Node>[] = [];
  const started = Date.now();
  const stop = new AbortController();
  t.teardown(() => stop.abort()); // should the test fail before the server ends the watch
  const watching = admin.watch('/api/v1/nodes', { resourceVersion, allowWatchBookmarks: true, timeoutSeconds: 8, labelSelector: selector }, (e) => events.push(e), stop.signal);
  const name = `${prefix}w`;
  await createNode(cp, name, { internalIPs: ['192.0.2.20'], labels: { 'knit.test/watch': prefix.slice(0, -1) } });
  await cp.kubectl('label', 'node', name, 'knit.test/extra=1');
  await cp.kubectl('delete', 'node', name);
  await watching; // the server ends it after timeoutSeconds
  t.true(Date.now() - started >= 7000, 'the server, not an error, ended the watch');

  const changes = events.filter((e) => e.type !== 'BOOKMARK');
  t.is(changes[0]?.type, 'ADDED');
  t.is(changes.at(-1)?.type, 'DELETED');
  t.true(changes.every((e) => e.object.metadata.name === name));
  t.true(changes.some((e) => e.type === 'MODIFIED' && e.object.metadata.labels?.['knit.test/extra'] === '1'));
  const bookmarks = events.filter((e) => e.type === 'BOOKMARK');
  t.true(bookmarks.length >= 1, `no bookmark in ${JSON.stringify(events.map((e) => e.type))}`);
  const deletedAt = Number(changes.at(-1)!.object.metadata.resourceVersion);
  t.true(Number(bookmarks.at(-1)!.object.metadata.resourceVersion) >= deletedAt, 'the bookmark carries the latest resourceVersion');
});

test.serial('informer: a synced view; cut off, it keeps the view and says so; mended, it relists and reports what changed meanwhile; the apiserver stopped and started', async (t) => {
  const { cp, prefix, admin } = t.context;
  const label = `knit.test/informer=${prefix.slice(0, -1)}`;
  const make = (n: string) => createNode(cp, `${prefix}${n}`, { internalIPs: ['192.0.2.30'], labels: { 'knit.test/informer': prefix.slice(0, -1) } });
  await make('i1');
  await make('i2');
  await make('i3');

  const link = await relay(new URL(cp.server));
  t.teardown(() => link.cut());
  const client = new KubeClient({ ...admin.access, server: link.server });
  t.teardown(() => client.close());
  const informer = new Informer<Node>(client, '/api/v1/nodes', { labelSelector: label, backoff: { initialMs: 100, maxMs: 400 } });
  const changes: string[] = [];
  const states: [InformerState, string][] = [];
  informer.onChange((kind, obj) => changes.push(`${kind} ${obj.metadata.name.slice(prefix.length)}`));
  informer.onState((s, detail) => states.push([s, detail]));
  informer.start();
  t.teardown(() => informer.stop());
  await informer.waitSynced(AbortSignal.timeout(30_000));
  t.deepEqual(changes.sort(), ['add i1', 'add i2', 'add i3']);
  t.deepEqual(informer.list().map((n) => n.metadata.name).sort(), [`${prefix}i1`, `${prefix}i2`, `${prefix}i3`]);

  changes.length = 0;
  await cp.kubectl('label', 'node', `${prefix}i1`, 'knit.test/seen=watch');
  await until('the watch to deliver the label', () => informer.get(`${prefix}i1`)?.metadata.labels?.['knit.test/seen'] === 'watch');
  t.true(changes.includes('update i1'), JSON.stringify(changes));
  // The node controllers may touch the nodes too (taints for a node with no kubelet): updates only.
  t.true(changes.every((c) => c.startsWith('update ')), JSON.stringify(changes));

  // Cut off: the view stays, the state says why.
  changes.length = 0;
  await link.cut();
  await until('the informer to notice the cut', () => informer.state === 'unreachable');
  t.regex(states.at(-1)![1], new RegExp(`^GET ${link.server}/api/v1/nodes(\\?watch=true)?: .*(ECONNREFUSED|ECONNRESET)`));
  await until('a retry to find the way closed', () => informer.detail.endsWith(`/api/v1/nodes: connect ECONNREFUSED 127.0.0.1:${new URL(link.server).port}`));
  t.is(informer.list().length, 3);
  // Meanwhile, through the apiserver itself: one deleted, one changed, one made.
  await cp.kubectl('delete', 'node', `${prefix}i2`);
  await cp.kubectl('label', 'node', `${prefix}i3`, 'knit.test/seen=relist');
  await make('i4');
  t.deepEqual(changes, [], 'nothing reaches an informer that is cut off');
  await link.mend();
  await until('the informer to resync', () => informer.state === 'synced');
  for (const c of ['delete i2', 'add i4', 'update i3']) t.true(changes.includes(c), `${c} in ${JSON.stringify(changes)}`);
  // The controller-manager goes on writing Nodes (i4's podCIDR, taints): updates of the
  // nodes that are there may follow the relist; nothing else may.
  t.true(changes.every((c) => ['delete i2', 'add i4', 'update i3', 'update i1', 'update i4'].includes(c)), JSON.stringify(changes));
  t.is(informer.get(`${prefix}i3`)?.metadata.labels?.['knit.test/seen'], 'relist');
  t.is(informer.get(`${prefix}i2`), undefined);

  // The apiserver itself goes away and comes back; a second informer talks to it directly.
  const direct = new Informer<Node>(admin, '/api/v1/nodes', { labelSelector: label, backoff: { initialMs: 100, maxMs: 400 } });
  direct.start();
  t.teardown(() => direct.stop());
  await direct.waitSynced(AbortSignal.timeout(30_000));
  let down = true;
  t.teardown(async () => {
    if (down) await cp.startApiserver(); // the tests after this one need it
  });
  await cp.stopApiserver();
  await until('the informers to notice the stopped apiserver', () => informer.state === 'unreachable' && direct.state === 'unreachable');
  const port = new URL(cp.server).port;
  await until('a retry to be refused', () => direct.detail === `GET ${cp.server}/api/v1/nodes: connect ECONNREFUSED 127.0.0.1:${port}`, 30_000, () => direct.detail);
  t.is(informer.list().length, 3, 'the last view is kept');
  t.is(direct.list().length, 3, 'the last view is kept');
  await cp.startApiserver();
  down = false;
  await until('the informers to resync', () => informer.state === 'synced' && direct.state === 'synced', 60_000);
  changes.length = 0;
  await cp.kubectl('delete', 'node', `${prefix}i4`);
  await until('the delete to arrive', () => changes.includes('delete i4'));
  t.deepEqual(informer.list().map((n) => n.metadata.name).sort(), [`${prefix}i1`, `${prefix}i3`]);
  await until('the direct informer to see it too', () => direct.list().length === 2);
  t.log(states);
  const seen = states.map(([s]) => s);
  t.deepEqual(seen.slice(0, 4), ['synced', 'unreachable', 'synced', 'unreachable'], JSON.stringify(states));
  t.is(seen.at(-1), 'synced');
});

test.serial('informer: a resync hands every cached object to onChange again, as an update with obj === old', async (t) => {
  const { prefix, admin } = t.context;
  const informer = new Informer<Node>(admin, '/api/v1/nodes', { labelSelector: `knit.test/group=ab`, resyncMs: 200 });
  const resynced = new Map<string, number>();
  let realUpdates = 0;
  informer.onChange((kind, obj, old) => {
    if (kind === 'update' && obj === old) resynced.set(obj.metadata.name, (resynced.get(obj.metadata.name) ?? 0) + 1);
    else if (kind === 'update') realUpdates++;
  });
  informer.start();
  t.teardown(() => informer.stop());
  await informer.waitSynced(AbortSignal.timeout(30_000));
  await until('two resyncs of both nodes', () => [`${prefix}a`, `${prefix}b`].every((n) => (resynced.get(n) ?? 0) >= 2));
  t.deepEqual([...resynced.keys()].filter((n) => n.startsWith(prefix)).sort(), [`${prefix}a`, `${prefix}b`]);
  t.is(realUpdates, 0);
});

/** etcd's client URL, from the command line of the fixture's etcd process. */
function etcdUrl(cp: ControlPlane): string {
  const etcd = cp.services.find((s) => s.name === 'etcd');
  if (!etcd) throw new Error('the control plane has no etcd service');
  const flag = readFileSync(`/proc/${etcd.pid}/cmdline`, 'utf8').split('\0').find((a) => a.startsWith('--listen-client-urls='));
  return flag!.slice('--listen-client-urls='.length).split(',')[0]!;
}

/** Compacts etcd's history up to its current revision, through etcd's own JSON gateway (what the
 * apiserver does every 5 minutes), and answers that revision. */
async function compactEtcd(cp: ControlPlane): Promise<number> {
  const url = etcdUrl(cp);
  const post = (p: string, body: object) => fetch(`${url}${p}`, { method: 'POST', body: JSON.stringify(body) }).then((r) => r.json() as Promise<any>);
  const { header } = await post('/v3/kv/range', { key: Buffer.from('/').toString('base64') });
  const answer = await post('/v3/kv/compaction', { revision: header.revision, physical: true });
  if (!answer.header) throw new Error(`etcd compaction to ${header.revision}: ${JSON.stringify(answer)}`);
  return Number(header.revision);
}

test.serial('watch: from a resourceVersion etcd has compacted away is 410 Gone, as an answer or an ERROR event', async (t) => {
  const { cp, prefix, admin } = t.context;
  for (let i = 0; i < 3; i++) await cp.kubectl('annotate', '--overwrite', 'node', `${prefix}a`, `knit.test/n=${i}`);
  const compacted = await compactEtcd(cp);
  t.true(compacted > 10);
  // The apiserver's watch cache still holds the history it saw: a restart starts it afresh.
  await cp.stopApiserver();
  await cp.startApiserver();
  const events: WatchEvent[] = [];
  let failure: unknown;
  await admin.watch('/api/v1/nodes', { resourceVersion: '2', timeoutSeconds: 5 }, (e) => events.push(e), new AbortController().signal).catch((err) => (failure = err));
  const errorEvent = events.find((e) => e.type === 'ERROR');
  t.truthy(failure ?? errorEvent, `neither a failure nor an ERROR event: ${JSON.stringify(events.map((e) => e.type))}`);
  t.log(failure ? `answered: ${String(failure)}` : `ERROR event: ${JSON.stringify(errorEvent!.object)}`);
  if (failure) {
    t.true(failure instanceof KubeApiError && failure.gone, String(failure));
  } else {
    t.is(errorEvent!.object.code, 410);
    t.regex(errorEvent!.object.message, /too old resource version/);
    t.deepEqual(events.map((e) => e.type), ['ERROR'], 'nothing but the error');
  }
});
