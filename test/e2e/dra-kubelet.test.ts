// knit's DRA driver with a real kubelet, end to end: kube-apiserver, kube-scheduler,
// kube-controller-manager, a kubelet and containerd 2 built from the module proxy
// (test/fixtures/kube-*.ts), knit-cni as the node's only CNI config, and knit serving the
// kubelet's plugin sockets under its --root-dir with deploy/dra's ServiceAccount and RBAC. A
// ResourceClaimTemplate and a Pod applied with kubectl are scheduled against knit's
// ResourceSlice, the kubelet finds knit's registration socket and calls Prepare, containerd's
// knit-cni ADD brings the VF netdev into the pod with the claim's name, addresses and routes,
// the claim's status shows it; deleting the pod gives the VF back and the kubelet unprepares.
// Stand-in hardware: the VF netdev is a veth end whose peer is in a fabric netns, its PCI side
// a simulated sysfs (test/kernel/device-standin.ts).
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { cleanupDaemon, eventually, startDaemon, CLI, type Daemon } from '../helpers/daemon.js';
import { uniquePrefix } from '../helpers/names.js';
import { fileScope, startControlPlane, startKubelet, type ControlPlane, type Kubelet } from '../fixtures/kube-cluster.js';
import { BUSYBOX_IMAGE } from '../fixtures/kube-node.js';
import { makeStandIn, vfState, type StandIn } from '../kernel/device-standin.js';

const P = uniquePrefix('kdk');
const CLUSTER_CIDR = '10.248.0.0/16';
const SUBNET = '10.248.0.0/24';
const DRIVER = 'knit.dev';
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..', '..');
const opts = { prefix: P, subnet: SUBNET };
const scope = fileScope(test);
let d: Daemon;
let cp: ControlPlane;
let node: Kubelet;
let s: StandIn;

test.before(async () => {
  s = await makeStandIn(scope, P, 1);
  execFileSync('ip', ['-n', s.fabric, 'addr', 'add', '192.0.2.1/24', 'dev', s.vfs[0]!.peer]);
  d = await startDaemon({ ...opts, config: { sysfsRoot: s.node.root } });
  scope.teardown(() => cleanupDaemon(d, opts)); // registered first: runs last, after the kubelet's pods are gone
  const cniBin = path.join(d.dir, 'cni-bin');
  const cniConf = path.join(d.dir, 'net.d');
  execFileSync(process.execPath, [CLI, 'install-cni', '--bin-dir', cniBin, '--conf-dir', cniConf, '--config', d.configPath, '--network', `${P}net`, '--cni-network', `${P}cni`]);
  cp = await startControlPlane(scope, { prefix: P, clusterCidr: CLUSTER_CIDR });
  node = await startKubelet(scope, cp, { prefix: P, cniConfDir: cniConf, cniBinDir: cniBin });
  await cp.kubectl('create', 'namespace', 'knit-system');
  await cp.kubectl('apply', '-f', path.join(root, 'deploy/dra/rbac.yaml'), '-f', path.join(root, 'deploy/dra/deviceclasses.yaml'));
  const kubeconfig = cp.kubeconfigFor(await cp.serviceAccountToken('knit-system', 'knit'));
  // knit again, now with the driver on, at the kubelet's plugin dirs and containerd's CDI dir.
  const config = JSON.parse(readFileSync(d.configPath, 'utf8'));
  config.dra = {
    driverName: DRIVER, nodeName: node.nodeName, kubeconfig,
    registryDir: path.join(node.dir, 'kubelet', 'plugins_registry'), pluginsDir: path.join(node.dir, 'kubelet', 'plugins'), cdiDir: node.cdiDir,
  };
  writeFileSync(d.configPath, JSON.stringify(config, null, 2));
  await d.stop();
  d = await d.restart();
});

test.serial('the kubelet registers knit as a DRA plugin; knit\'s ResourceSlice lists the stand-in VF for this node', async (t) => {
  await eventually(() => d.logs.some((l) => l.includes('registered with the kubelet as a DRA plugin')), 'the kubelet\'s NotifyRegistrationStatus', 60_000);
  const slices = await cp.getJson('get', 'resourceslices', '--field-selector', `spec.driver=${DRIVER}`);
  t.is(slices.items.length, 1);
  t.is(slices.items[0].spec.nodeName, node.nodeName);
  t.true(slices.items[0].spec.devices.some((dev: any) => dev.name === 'pci-0000-5a-02-0' && dev.attributes['dra.net/isSriovVf']?.bool === true));
});

test.serial('kubectl apply a ResourceClaimTemplate and a Pod: scheduled, prepared, started through knit-cni with the VF netdev named, addressed and routed as the claim says; the claim\'s status shows it; deleting the pod gives the VF back and unprepares (stand-in hardware: veth as VF netdev, simulated sysfs)', async (t) => {
  const vf = s.vfs[0]!;
  const before = vfState(vf.name);
  const objects = [
    { apiVersion: 'resource.k8s.io/v1', kind: 'ResourceClaimTemplate', metadata: { name: 'vf', namespace: 'default' }, spec: { spec: { devices: {
      requests: [{ name: 'nic', exactly: { deviceClassName: 'knit-netdev', selectors: [{ cel: { expression: '"isSriovVf" in device.attributes["dra.net"]' } }] } }],
      config: [{ requests: ['nic'], opaque: { driver: DRIVER, parameters: { interfaceName: 'net1', addresses: ['192.0.2.10/24'], routes: [{ dst: '198.51.100.0/24', gw: '192.0.2.1' }] } } }],
    } } } },
    { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'web', namespace: 'default' }, spec: {
      terminationGracePeriodSeconds: 1, automountServiceAccountToken: false, enableServiceLinks: false,
      resourceClaims: [{ name: 'vf', resourceClaimTemplateName: 'vf' }],
      containers: [{ name: 'web', image: BUSYBOX_IMAGE, imagePullPolicy: 'Never', command: ['sleep', '100000'], resources: { claims: [{ name: 'vf' }] } }],
    } },
  ];
  await cp.kubectlInput(objects.map((o) => JSON.stringify(o)).join('\n'), 'apply', '-f', '-');
  await cp.kubectl('wait', '-n', 'default', '--for=condition=Ready', 'pod/web', '--timeout=120s');

  // In the pod, seen by the pod (kubectl exec through the kubelet): net1 with the claim's address and route.
  t.regex(await cp.kubectl('exec', 'web', '--', 'ip', '-o', 'addr', 'show', 'dev', 'net1'), / inet 192\.0\.2\.10\/24 /);
  t.regex(await cp.kubectl('exec', 'web', '--', 'ip', 'route', 'show', '198.51.100.0/24'), /via 192\.0\.2\.1 dev net1/);
  t.regex(await cp.kubectl('exec', 'web', '--', 'ping', '-c', '1', '-W', '2', '192.0.2.1'), /1 packets received/);
  t.is(vfState(vf.name), undefined, 'the VF netdev left the host');

  const pod = await cp.getJson('get', 'pod', 'web', '-n', 'default');
  const claimName = pod.status.resourceClaimStatuses[0].resourceClaimName;
  let claim: any;
  for (const until = Date.now() + 30_000; !claim?.status?.devices?.length && Date.now() < until; await new Promise((r) => setTimeout(r, 250))) {
    claim = await cp.getJson('get', 'resourceclaim', claimName, '-n', 'default');
  }
  t.like(claim.status.devices[0], { driver: DRIVER, pool: node.nodeName, device: 'pci-0000-5a-02-0', networkData: { interfaceName: 'net1', ips: ['192.0.2.10/24'] } });
  t.like(claim.status.devices[0].conditions[0], { type: 'Ready', status: 'True' });

  await cp.kubectl('delete', 'pod', 'web', '-n', 'default', '--timeout=120s');
  await eventually(() => JSON.stringify(vfState(vf.name)) === JSON.stringify(before), 'the VF back in the host as it was', 60_000);
  await eventually(() => d.logs.some((l) => l.includes('DRA claim unprepared')), 'the kubelet\'s Unprepare', 60_000);
  t.deepEqual(vfState(vf.name), before);
});
