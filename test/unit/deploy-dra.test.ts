// deploy/dra, the DRA add-on: every object (RBAC, DeviceClasses, the example claims and pods)
// validates against the Kubernetes OpenAPI schemas (kubernetes-models, offline), the kustomize
// patches give a DaemonSet that validates and mounts the kubelet's plugin directories and the
// CDI directory, the config knit runs with turns the driver on, the classes select on
// attributes knit publishes, and what knit itself writes to the API (its ResourceSlice, a
// claim's KEP-4817 status) validates against the same schemas.
import test from 'ava';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, parseAllDocuments } from 'yaml';
import { DaemonSet } from 'kubernetes-models/apps/v1';
import { ConfigMap, Pod, ServiceAccount } from 'kubernetes-models/v1';
import { ClusterRole, ClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice } from 'kubernetes-models/resource.k8s.io/v1';
import { parseConfigText } from '../../src/config/index.js';
import { resourceSlice } from '../../src/dra/slices.js';
import { claimStatusPatch } from '../../src/dra/claim-status.js';
import { deviceAttributes } from '../../src/devices/attributes.js';
import { scanInventory } from '../../src/devices/inventory.js';
import type { ClaimRecord } from '../../src/dra/claim-record.js';
import { createSriovNode, NODE } from '../fixtures/fake-sysfs.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const dra = path.join(root, 'deploy', 'dra');

const models: Record<string, new (data: any) => { validate(): void }> = {
  'rbac.authorization.k8s.io/v1 ClusterRole': ClusterRole,
  'rbac.authorization.k8s.io/v1 ClusterRoleBinding': ClusterRoleBinding,
  'resource.k8s.io/v1 DeviceClass': DeviceClass,
  'resource.k8s.io/v1 ResourceClaimTemplate': ResourceClaimTemplate,
  'v1 Pod': Pod,
  'apps/v1 DaemonSet': DaemonSet,
  'v1 ConfigMap': ConfigMap,
  'v1 ServiceAccount': ServiceAccount,
};

const objects = (file: string): any[] =>
  parseAllDocuments(readFileSync(file, 'utf8')).map((doc) => {
    if (doc.errors.length) throw new Error(`${file}: ${doc.errors[0]!.message}`);
    return doc.toJS();
  });
const one = (file: string) => objects(file)[0];
const fullObjects = () =>
  ['rbac.yaml', 'deviceclasses.yaml', ...readdirSync(path.join(dra, 'examples')).filter((f) => f.endsWith('.yaml')).map((f) => `examples/${f}`)]
    .flatMap((f) => objects(path.join(dra, f)).map((o) => ({ file: f, o })));

test('every object of deploy/dra validates against the Kubernetes OpenAPI schema of its kind', (t) => {
  const found = fullObjects();
  t.deepEqual(found.map(({ o }) => o.kind).sort(), [
    'ClusterRole', 'ClusterRoleBinding', 'DeviceClass', 'DeviceClass', 'DeviceClass', 'Pod', 'Pod',
    'ResourceClaimTemplate', 'ResourceClaimTemplate', 'ResourceClaimTemplate',
  ]);
  for (const { file, o } of found) t.notThrows(() => new models[`${o.apiVersion} ${o.kind}`]!(o).validate(), `${file} ${o.kind}/${o.metadata.name}`);
});

test('the validator refuses a broken DeviceClass and a broken claim template (it is not a check that cannot fail)', (t) => {
  const cls = structuredClone(fullObjects().find(({ o }) => o.kind === 'DeviceClass')!.o);
  cls.spec.selectors[0].cel = { expression: 42 };
  t.throws(() => new DeviceClass(cls).validate());
  const tpl = structuredClone(fullObjects().find(({ o }) => o.kind === 'ResourceClaimTemplate')!.o);
  tpl.spec.spec.devices.requests[0].exactly.deviceClassName = ['not', 'a', 'string'];
  t.throws(() => new ResourceClaimTemplate(tpl).validate());
});

/** kustomize's strategic merge for the fields the patches touch: lists merged by name. */
function mergeByName(base: any[] = [], patch: any[] = []): any[] {
  const out = base.map((b) => ({ ...b }));
  for (const p of patch) {
    const i = out.findIndex((b) => b.name === p.name);
    if (i < 0) out.push(p);
    else out[i] = { ...out[i], ...p, env: mergeByName(out[i].env, p.env), volumeMounts: mergeByName(out[i].volumeMounts, p.volumeMounts) };
  }
  return out;
}

test('kustomize\'s result: the DaemonSet mounts the kubelet plugin dirs and the CDI dir at the same paths, knows its node, has a token; the ServiceAccount is bound to exactly the driver\'s rules', (t) => {
  const kustomization = one(path.join(dra, 'kustomization.yaml'));
  t.true(kustomization.resources.includes('../rbac.yaml'), 'the base RBAC: the cluster network and NetworkPolicy read Nodes, pods, namespaces and policies');
  t.deepEqual(kustomization.patches.map((p: any) => p.path).sort(), ['patches/configmap.yaml', 'patches/daemonset.yaml', 'patches/serviceaccount.yaml']);
  const base = one(path.join(root, 'deploy', 'daemonset.yaml'));
  const patch = one(path.join(dra, 'patches', 'daemonset.yaml'));
  const ds = structuredClone(base);
  ds.spec.template.spec.automountServiceAccountToken = patch.spec.template.spec.automountServiceAccountToken;
  ds.spec.template.spec.containers = mergeByName(base.spec.template.spec.containers, patch.spec.template.spec.containers);
  ds.spec.template.spec.volumes = mergeByName(base.spec.template.spec.volumes, patch.spec.template.spec.volumes);
  t.notThrows(() => new DaemonSet(ds).validate());
  const knit = ds.spec.template.spec.containers.find((c: any) => c.name === 'knit');
  const volumes = new Map(ds.spec.template.spec.volumes.map((v: any) => [v.name, v.hostPath?.path]));
  for (const dir of ['/var/lib/kubelet/plugins', '/var/lib/kubelet/plugins_registry', '/var/run/cdi']) {
    const m = knit.volumeMounts.find((v: any) => v.mountPath === dir);
    t.truthy(m, dir);
    t.is(volumes.get(m.name), dir, `${dir}: the same path on the host (the kubelet dials the path knit reports)`);
  }
  t.deepEqual(knit.env.find((e: any) => e.name === 'NODE_NAME').valueFrom, { fieldRef: { fieldPath: 'spec.nodeName' } });
  t.true(ds.spec.template.spec.automountServiceAccountToken);
  t.true(one(path.join(dra, 'patches', 'serviceaccount.yaml')).automountServiceAccountToken);

  const [role, binding] = objects(path.join(dra, 'rbac.yaml'));
  t.deepEqual(role.rules, [
    { apiGroups: ['resource.k8s.io'], resources: ['resourceclaims'], verbs: ['get'] },
    { apiGroups: ['resource.k8s.io'], resources: ['resourceclaims/status'], verbs: ['patch'] },
    { apiGroups: ['resource.k8s.io'], resources: ['resourceslices'], verbs: ['get', 'create', 'update', 'delete'] },
  ]);
  t.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: 'knit', namespace: 'knit-system' }]);
});

test('the ConfigMap patch carries deploy/dra/config.yaml verbatim: deploy/config.yaml plus the dra block; knit accepts it with the driver on, and every class and example names that driver', (t) => {
  const text = readFileSync(path.join(dra, 'config.yaml'), 'utf8');
  t.is(one(path.join(dra, 'patches', 'configmap.yaml')).data['config.yaml'], text);
  const config = parseConfigText(text, 'deploy/dra/config.yaml');
  const { dra: _block, ...rest } = parse(text);
  t.deepEqual(rest, parse(readFileSync(path.join(root, 'deploy', 'config.yaml'), 'utf8')), 'deploy/config.yaml whole (the cluster network, NetworkPolicy), and only the dra block added');
  t.like(config.dra, { driverName: 'knit.dev', attributeDomain: 'dra.net', registryDir: '/var/lib/kubelet/plugins_registry', pluginsDir: '/var/lib/kubelet/plugins', cdiDir: '/var/run/cdi' });
  for (const { o } of fullObjects()) {
    const configs = o.kind === 'DeviceClass' ? o.spec.config : o.kind === 'ResourceClaimTemplate' ? o.spec.spec.devices.config : [];
    for (const c of configs ?? []) t.is(c.opaque.driver, config.dra!.driverName, `${o.kind}/${o.metadata.name}`);
    for (const sel of o.kind === 'DeviceClass' ? o.spec.selectors : []) t.true(sel.cel.expression.includes(`device.driver == "${config.dra!.driverName}"`));
  }
});

test('the classes select on attributes knit publishes (simulated sysfs)', async (t) => {
  const node = await createSriovNode(t, { rdmaNetnsMode: 'Y' });
  const inv = await scanInventory(node.kernel);
  const published = new Set(inv.devices.flatMap((d) => Object.keys(deviceAttributes(d))));
  for (const { o } of fullObjects()) {
    const exprs = [
      ...(o.kind === 'DeviceClass' ? o.spec.selectors : []),
      ...(o.kind === 'ResourceClaimTemplate' ? o.spec.spec.devices.requests.flatMap((r: any) => r.exactly.selectors ?? []) : []),
    ].map((s: any) => s.cel.expression as string);
    for (const e of exprs) {
      const names = [...e.matchAll(/device\.attributes\["dra\.net"\]\.(\w+)/g), ...e.matchAll(/"(\w+)" in device\.attributes\["dra\.net"\]/g)].map((m) => `dra.net/${m[1]}`);
      for (const n of names) t.true(published.has(n), `${o.metadata.name}: ${n}`);
    }
  }
  t.true(published.has('resource.kubernetes.io/pcieRoot'), 'the AI example aligns on it');
});

test('what knit writes to the API validates: its ResourceSlice and a claim\'s KEP-4817 status (simulated sysfs)', async (t) => {
  const node = await createSriovNode(t, { rdmaNetnsMode: 'Y' });
  const slice = resourceSlice(await scanInventory(node.kernel), { driver: 'knit.dev', nodeName: 'node-a', attributeDomain: 'dra.net' }, 3);
  t.notThrows(() => new ResourceSlice(slice as any).validate());
  const vf0 = (slice as any).spec.devices.find((d: any) => d.name === 'pci-0000-3b-01-0');
  t.like(vf0.attributes, { 'dra.net/isSriovVf': { bool: true }, 'dra.net/ifName': { string: NODE.vfNetdev(0) }, 'resource.kubernetes.io/pcieRoot': { string: 'pci0000:3a' } });
  t.deepEqual((slice as any).spec.pool, { name: 'node-a', generation: 3, resourceSliceCount: 1 });

  const claim: ClaimRecord = {
    version: 1, uid: 'u1', namespace: 'default', name: 'c', state: 'prepared', podUids: ['p'], steps: [], preparedAt: '',
    devices: [{ request: 'nic', pool: 'node-a', device: 'pci-0000-3b-01-0', pciAddress: NODE.vf(0), mode: 'netdev', parameters: { mode: 'netdev', addresses: [], routes: [] }, charDevices: [] }],
  };
  const status = claimStatusPatch('knit.dev', claim, {
    sandboxId: 's', netnsPath: '/run/netns/x', runtime: 'runc', ips: [], routes: [],
    interfaces: [{ name: 'net1', kind: 'vf', handoff: { draDevice: { device: 'pci-0000-3b-01-0', pool: 'node-a' }, networkData: { interfaceName: 'net1', ips: ['192.0.2.10/24'], hardwareAddress: '02:00:00:00:00:01' } } as any }],
  }, new Date('2026-11-26T08:00:00.123Z'));
  t.notThrows(() => new ResourceClaim({ ...(status as any), spec: { devices: { requests: [] } } }).validate());
  t.deepEqual((status as any).status.devices, [{
    driver: 'knit.dev', pool: 'node-a', device: 'pci-0000-3b-01-0',
    conditions: [{ type: 'Ready', status: 'True', reason: 'NetworkDeviceReady', message: `${NODE.vf(0)} is net1 in the pod`, lastTransitionTime: '2026-11-26T08:00:00Z' }],
    networkData: { interfaceName: 'net1', ips: ['192.0.2.10/24'], hardwareAddress: '02:00:00:00:00:01' },
  }]);
});
