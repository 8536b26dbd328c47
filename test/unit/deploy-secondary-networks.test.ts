// deploy/secondary-networks, knit in Multus's place: every object validates against the
// Kubernetes OpenAPI schemas (kubernetes-models, offline); the CRD is the NetworkAttachmentDefinition
// knit reads; the ServiceAccount is bound to exactly the rules knit needs; the kustomize patches
// give a DaemonSet that validates and mounts the host's CNI state where the definitions' plugins
// and the config expect it; the ConfigMap carries the config verbatim and knit accepts it.
import test from 'ava';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, parseAllDocuments } from 'yaml';
import { DaemonSet } from 'kubernetes-models/apps/v1';
import { ConfigMap, ServiceAccount } from 'kubernetes-models/v1';
import { ClusterRole, ClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { CustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1';
import { parseConfigText } from '../../src/config/index.js';
import { NAD_PATH } from '../../src/daemon/secondary-networks.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const dir = path.join(root, 'deploy', 'secondary-networks');
const objects = (file: string): any[] =>
  parseAllDocuments(readFileSync(file, 'utf8')).map((doc) => {
    if (doc.errors.length) throw new Error(`${file}: ${doc.errors[0]!.message}`);
    return doc.toJS();
  });
const one = (file: string) => objects(file)[0];

test('the CRD validates and is the NetworkAttachmentDefinition knit reads: k8s.cni.cncf.io/v1, namespaced, spec.config a string', (t) => {
  const crd = one(path.join(dir, 'crd.yaml'));
  t.notThrows(() => new CustomResourceDefinition(crd).validate());
  t.is(crd.metadata.name, 'network-attachment-definitions.k8s.cni.cncf.io');
  t.is(crd.spec.scope, 'Namespaced');
  t.deepEqual(crd.spec.names.shortNames, ['net-attach-def']);
  const [v1] = crd.spec.versions;
  t.like(v1, { name: 'v1', served: true, storage: true });
  t.is(v1.schema.openAPIV3Schema.properties.spec.properties.config.type, 'string');
  t.is(NAD_PATH, `/apis/${crd.spec.group}/${v1.name}/${crd.spec.names.plural}`, 'knit lists what the CRD serves');
  const broken = structuredClone(crd);
  broken.spec.scope = 42;
  t.throws(() => new CustomResourceDefinition(broken).validate(), undefined, 'the validator is not one that cannot fail');
});

test('the ServiceAccount is bound to exactly what knit reads and writes: NADs get/list/watch, pods get/list/watch/patch', (t) => {
  const [role, binding] = objects(path.join(dir, 'rbac.yaml'));
  t.notThrows(() => new ClusterRole(role).validate());
  t.notThrows(() => new ClusterRoleBinding(binding).validate());
  t.deepEqual(role.rules, [
    { apiGroups: ['k8s.cni.cncf.io'], resources: ['network-attachment-definitions'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch', 'patch'] },
  ]);
  t.deepEqual(binding.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role.metadata.name });
  t.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: 'knit', namespace: 'knit-system' }]);
  const sa = one(path.join(dir, 'patches', 'serviceaccount.yaml'));
  t.notThrows(() => new ServiceAccount(sa).validate());
  t.true(sa.automountServiceAccountToken);
});

test('kustomize\'s result: the DaemonSet validates, mounts the host\'s /var/lib/cni and Multus\'s confDir at the same paths, and has a token', (t) => {
  const k = one(path.join(dir, 'kustomization.yaml'));
  t.deepEqual(k.resources, ['../namespace.yaml', '../serviceaccount.yaml', '../rbac.yaml', '../configmap.yaml', '../daemonset.yaml', 'crd.yaml', 'rbac.yaml']);
  t.deepEqual(k.patches.map((p: any) => p.path).sort(), ['patches/configmap.yaml', 'patches/daemonset.yaml', 'patches/serviceaccount.yaml']);
  const base = one(path.join(root, 'deploy', 'daemonset.yaml'));
  const patch = one(path.join(dir, 'patches', 'daemonset.yaml')).spec.template.spec;
  const ds = structuredClone(base);
  const spec = ds.spec.template.spec;
  spec.automountServiceAccountToken = patch.automountServiceAccountToken;
  const knit = spec.containers.find((c: any) => c.name === 'knit');
  knit.volumeMounts.push(...patch.containers[0].volumeMounts);
  spec.volumes.push(...patch.volumes);
  t.notThrows(() => new DaemonSet(ds).validate());
  t.true(spec.automountServiceAccountToken);
  const hostPath = new Map(spec.volumes.map((v: any) => [v.name, v.hostPath?.path]));
  /** Where a path in the container is on the host: under the mount that holds it. */
  const onHost = (at: string) => {
    const m = knit.volumeMounts.filter((v: any) => (at + '/').startsWith(v.mountPath.replace(/\/?$/, '/'))).sort((a: any, b: any) => b.mountPath.length - a.mountPath.length)[0];
    return m && hostPath.get(m.name) ? path.join(hostPath.get(m.name) as string, path.relative(m.mountPath, at)) : undefined;
  };
  const config = parseConfigText(readFileSync(path.join(dir, 'config.yaml'), 'utf8'), 'deploy/secondary-networks/config.yaml');
  const s = config.secondaryNetworks!;
  t.is(s.cacheDir, '/var/lib/knit/cni-cache', 'the default: under stateDir');
  t.is(onHost(s.cacheDir), s.cacheDir, 'the result cache is the host\'s, at the same path');
  t.is(onHost('/var/lib/cni/networks'), '/var/lib/cni/networks', 'host-local\'s leases are the host\'s');
  t.is(onHost(s.confDir), s.confDir);
  t.is(onHost(s.pluginDirs[0]!), '/opt/cni/bin', 'the host\'s CNI plugins');
});

test('the ConfigMap patch carries deploy/secondary-networks/config.yaml verbatim, and knit accepts it: deploy/config.yaml whole plus the secondaryNetworks block', (t) => {
  const text = readFileSync(path.join(dir, 'config.yaml'), 'utf8');
  const cm = one(path.join(dir, 'patches', 'configmap.yaml'));
  t.notThrows(() => new ConfigMap(cm).validate());
  t.is(cm.data['config.yaml'], text);
  const config = parseConfigText(text, 'deploy/secondary-networks/config.yaml');
  const base = parseConfigText(readFileSync(path.join(root, 'deploy', 'config.yaml'), 'utf8'), 'deploy/config.yaml');
  t.deepEqual(config.networks, base.networks);
  const { secondaryNetworks: _block, ...rest } = parse(text);
  t.deepEqual(rest, parse(readFileSync(path.join(root, 'deploy', 'config.yaml'), 'utf8')), 'deploy/config.yaml whole (the cluster network, NetworkPolicy), and only the block added');
  t.like(config.secondaryNetworks, { namespace: 'kube-system', systemNamespaces: ['kube-system'], namespaceIsolation: false, globalNamespaces: ['default'], defaultNetworks: [] });
});
