// deploy/: every manifest validates against the Kubernetes OpenAPI schemas (kubernetes-models
// ships them and validates with them, offline); the DaemonSet has what a node network daemon
// needs; the ConfigMap, deploy/config.yaml and the README example are one text knit accepts.
import test from 'ava';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { DaemonSet } from 'kubernetes-models/apps/v1';
import { ConfigMap, Namespace, ServiceAccount } from 'kubernetes-models/v1';
import { ClusterRole, ClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { parseConfigText } from '../../src/config/index.js';
import { podSettings } from '../../src/cni-frontend/annotations.js';
import { SHIM_NAME } from '../../src/cni-frontend/install.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const deploy = path.join(root, 'deploy');

const models: Record<string, new (data: any) => { validate(): void }> = {
  'apps/v1 DaemonSet': DaemonSet,
  'v1 ConfigMap': ConfigMap,
  'v1 Namespace': Namespace,
  'v1 ServiceAccount': ServiceAccount,
  'rbac.authorization.k8s.io/v1 ClusterRole': ClusterRole,
  'rbac.authorization.k8s.io/v1 ClusterRoleBinding': ClusterRoleBinding,
};

/** deploy/kubevirt holds KubeVirt's and Multus' custom resources: checked on their own, below. */
const KUBEVIRT_DIR = path.join(deploy, 'kubevirt');

function manifestFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = path.join(dir, f);
    // deploy/dra is the DRA add-on (kubectl apply -k), checked by deploy-dra.test.ts, and
    // deploy/secondary-networks the Multus one, by deploy-secondary-networks.test.ts;
    // deploy/kubevirt holds KubeVirt's objects, checked below.
    if (p === KUBEVIRT_DIR) return [];
    if (statSync(p).isDirectory()) return f === 'dra' || f === 'secondary-networks' ? [] : manifestFiles(p);
    return f.endsWith('.yaml') && f !== 'config.yaml' ? [p] : [];
  });
}

function objects(file: string): any[] {
  return parseAllDocuments(readFileSync(file, 'utf8')).map((doc) => {
    if (doc.errors.length) throw new Error(`${file}: ${doc.errors[0]!.message}`);
    return doc.toJS();
  });
}

const all = () => manifestFiles(deploy).flatMap((f) => objects(f).map((o) => ({ file: path.relative(root, f), o })));
const find = (kind: string, name: string) => all().find(({ o }) => o.kind === kind && o.metadata?.name === name)!.o;

test('every manifest in deploy/ validates against the Kubernetes OpenAPI schema of its kind', (t) => {
  const found = all();
  t.is(found.length, 9, `${found.length} objects`);
  for (const { file, o } of found) {
    const Model = models[`${o.apiVersion} ${o.kind}`];
    if (!Model) {
      t.fail(`${file}: no schema for ${o.apiVersion} ${o.kind}`);
      continue;
    }
    t.notThrows(() => new Model(o).validate(), `${file} ${o.kind}/${o.metadata?.name}`);
  }
});

test('the validator refuses a broken DaemonSet (it is not a check that cannot fail)', (t) => {
  const ds = structuredClone(find('DaemonSet', 'knit'));
  ds.spec.template.spec.containers[0].livenessProbe.httpGet.port = { number: 9465 };
  t.throws(() => new DaemonSet(ds).validate(), { message: /livenessProbe\/httpGet\/port/ });
  const noSelector = structuredClone(find('DaemonSet', 'knit'));
  delete noSelector.spec.selector;
  t.throws(() => new DaemonSet(noSelector).validate(), { message: /selector/ });
});

test('the DaemonSet runs knit as a node network daemon: every taint, node-critical, host network, probes, install-cni', (t) => {
  const spec = find('DaemonSet', 'knit').spec.template.spec;
  t.deepEqual(spec.tolerations, [{ operator: 'Exists' }]);
  t.is(spec.priorityClassName, 'system-node-critical');
  t.true(spec.hostNetwork);
  t.is(spec.serviceAccountName, 'knit');
  t.deepEqual(spec.initContainers[0].command.slice(0, 2), ['knit', 'install-cni']);
  const [knit] = spec.containers;
  const port = Number(parseConfigText(readFileSync(path.join(deploy, 'config.yaml'), 'utf8')).metricsAddress!.split(':').pop());
  t.deepEqual([knit.livenessProbe.httpGet.path, knit.livenessProbe.httpGet.port], ['/healthz', port]);
  t.deepEqual([knit.readinessProbe.httpGet.path, knit.readinessProbe.httpGet.port], ['/readyz', port]);
  const mounts = knit.volumeMounts.map((m: any) => m.mountPath);
  for (const p of ['/run/knit', '/var/lib/knit', '/run/netns', '/sys', '/etc/knit']) t.true(mounts.includes(p), p);
  t.truthy(knit.resources.requests && knit.resources.limits);
  // RBAC: knit reads Nodes, and for NetworkPolicy Pods, Namespaces, NetworkPolicies and
  // ClusterNetworkPolicies, and nothing else; the pod gets the token, and its node's name.
  const read = ['get', 'list', 'watch'];
  t.deepEqual(all().filter(({ o }) => /Role$/.test(o.kind)).map(({ o }) => o.rules), [
    [{ apiGroups: [''], resources: ['nodes'], verbs: read }],
    [{ apiGroups: [''], resources: ['pods', 'namespaces'], verbs: read }, { apiGroups: ['networking.k8s.io'], resources: ['networkpolicies'], verbs: read }, { apiGroups: ['policy.networking.k8s.io'], resources: ['clusternetworkpolicies'], verbs: read },
      { apiGroups: ['apiextensions.k8s.io'], resources: ['customresourcedefinitions'], resourceNames: ['clusternetworkpolicies.policy.networking.k8s.io'], verbs: read }],
  ]);
  for (const name of ['knit-nodes', 'knit-network-policy']) {
    const binding = find('ClusterRoleBinding', name);
    t.deepEqual([binding.roleRef.name, binding.subjects], [name, [{ kind: 'ServiceAccount', name: 'knit', namespace: 'knit-system' }]]);
  }
  // The config turns NetworkPolicy on: exactly the kinds the second role reads.
  t.truthy(parseConfigText(readFileSync(path.join(deploy, 'config.yaml'), 'utf8')).networkPolicy);
  t.true(spec.automountServiceAccountToken);
  t.deepEqual(knit.env.find((e: any) => e.name === 'NODE_NAME').valueFrom, { fieldRef: { fieldPath: 'spec.nodeName' } });
});

test('deploy/config.yaml, the ConfigMap and the README example are the same text, and knit accepts it', (t) => {
  const text = readFileSync(path.join(deploy, 'config.yaml'), 'utf8');
  t.is(find('ConfigMap', 'knit-config').data['config.yaml'], text);
  const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
  t.true(readme.includes('```yaml\n' + text + '```\n'), 'README shows deploy/config.yaml verbatim');
  const config = parseConfigText(text, 'deploy/config.yaml');
  t.deepEqual(config.networks.map((n) => n.name), ['pods']);
  t.like(config.networks[0], { nodeSubnet: [4], crossNode: 'routes', masquerade: true });
  const install = find('DaemonSet', 'knit').spec.template.spec.initContainers[0].command as string[];
  t.is(install[install.indexOf('--network') + 1], 'pods', 'install-cni names a network the config has');
});

test('deploy/kubevirt: the KubeVirt CR registers a tap binding whose NAD is knit-cni, the VM uses that binding, and the README shows all three', (t) => {
  const docs = Object.fromEntries(readdirSync(KUBEVIRT_DIR).map((f) => [f, objects(path.join(KUBEVIRT_DIR, f))[0]]));
  const kv = docs['kubevirt-binding.yaml'];
  t.is(`${kv.apiVersion} ${kv.kind}`, 'kubevirt.io/v1 KubeVirt');
  const [[name, binding]] = Object.entries(kv.spec.configuration.network.binding) as [string, any][];
  t.is(binding.domainAttachmentType, 'tap');
  const nad = docs['binding-nad.yaml'];
  t.is(`${nad.apiVersion} ${nad.kind}`, 'k8s.cni.cncf.io/v1 NetworkAttachmentDefinition');
  t.is(binding.networkAttachmentDefinition, `${nad.metadata.namespace}/${nad.metadata.name}`);
  const conf = JSON.parse(nad.spec.config);
  t.is(conf.type, SHIM_NAME, 'the NAD runs the plugin install-cni puts in place');
  // As Multus calls it for a VMI: with KubeVirt's cni-arg, knit builds a KubeVirt tap.
  t.like(podSettings({ ...conf, args: { cni: { logicNetworkName: 'default' } } }), { runtime: 'kubevirt', binding: { binding: 'tap', logicNetwork: 'default' } });
  const vm = docs['vm.yaml'];
  t.is(`${vm.apiVersion} ${vm.kind}`, 'kubevirt.io/v1 VirtualMachine');
  t.deepEqual(vm.spec.template.spec.domain.devices.interfaces.map((i: any) => i.binding?.name), [name]);
  t.false(vm.spec.template.spec.domain.devices.interfaces.some((i: any) => i.macAddress), 'no macAddress: knit answers the pod interface MAC');
  const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
  for (const f of Object.keys(docs)) {
    const body = readFileSync(path.join(KUBEVIRT_DIR, f), 'utf8').split('\n').filter((l) => !l.startsWith('#')).join('\n');
    t.true(readme.includes(body), `README.md shows deploy/kubevirt/${f} (without its comments)`);
  }
});
