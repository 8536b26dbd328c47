// knit as the node's only CNI in Multus's place, end to end: a real control plane with the NAD
// CRD and deploy/secondary-networks' RBAC, a kubelet on containerd 2 whose only CNI config is the
// one `knit install-cni` wrote, and knit reading NetworkAttachmentDefinitions from the API with a
// ServiceAccount token (through a relay the test cuts to take the API away from knit alone).
// Pods annotated as Multus users annotate them get a bridge chain, a macvlan and knit's own
// second network; the network-status annotation is read back; two pods talk over the bridge and
// the macvlan; a NAD deleted while pods use it, the API away at ADD and at DEL, kill -9 between
// two networks of one pod, a pod made again under the same name. Multus itself cannot be built
// here (the Go module proxy refuses it): the pods and NADs are what Multus users write.
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { cleanupDaemon, eventually, removeLinkQuietly, startDaemon, CLI, type Daemon } from '../helpers/daemon.js';
import { uniquePrefix } from '../helpers/names.js';
import { relay } from '../helpers/api-relay.js';
import { fileScope, startControlPlane, startKubelet, type ControlPlane, type Kubelet } from '../fixtures/kube-cluster.js';
import { BUSYBOX_IMAGE } from '../fixtures/kube-node.js';
import { KubeClient, loadKubeAccess, backoffDelay, DEFAULT_BACKOFF } from '../../src/kube/index.js';
import { NetworkStatusWriter } from '../../src/daemon/network-status-writer.js';
import { fileNameOf } from '../../src/store/index.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const deploy = (f: string) => path.join(root, 'deploy', f);

const P = uniquePrefix('ksec');
const NS = `${P}app`.replace(/-/g, '');
const CLUSTER_CIDR = '10.189.0.0/16';
const SUBNET = '10.189.0.0/24'; // the one node's podCIDR: knit's primary network
const STORAGE = `${P}st`; // knit's own second network
const BLUE_BRIDGE = `${P}b1`;
const MASTER = `${P}m0`; // the macvlan's lower device on the host
const STATUS = 'k8s.v1.cni.cncf.io/network-status';
const NETWORKS = 'k8s.v1.cni.cncf.io/networks';
const scope = fileScope(test);
const dir = mkdtempSync(path.join(os.tmpdir(), `knit-${P}`));
const dataDir = path.join(dir, 'ipam');
let d: Daemon;
let cp: ControlPlane;
let node: Kubelet;
let link: Awaited<ReturnType<typeof relay>>;

const hostLocal = (subnet: string) => ({ type: 'host-local', dataDir, ranges: [[{ subnet }]] });
const NADS: Record<string, object> = {
  blue: { cniVersion: '1.0.0', name: 'blue', plugins: [{ type: 'bridge', bridge: BLUE_BRIDGE, isGateway: true, ipam: hostLocal('10.190.1.0/24') }] },
  red: { cniVersion: '0.4.0', type: 'macvlan', master: MASTER, mode: 'bridge', ipam: hostLocal('10.190.2.0/24') },
  storage: { cniVersion: '1.0.0', type: 'knit', network: STORAGE },
  green: { cniVersion: '1.0.0', name: 'green', type: 'bridge', bridge: `${P}b4`, ipam: hostLocal('10.190.4.0/24') },
};
const nad = (name: string) => ({ apiVersion: 'k8s.cni.cncf.io/v1', kind: 'NetworkAttachmentDefinition', metadata: { name, namespace: 'default' }, spec: { config: JSON.stringify(NADS[name]) } });
const apply = (obj: object) => cp.kubectlInput(JSON.stringify(obj), 'apply', '-f', '-');
const leases = (net: string) => (existsSync(path.join(dataDir, net)) ? readdirSync(path.join(dataDir, net)).filter((f) => /^\d+\.\d+\.\d+\.\d+$/.test(f)) : []);

function pod(name: string, networks: string) {
  return {
    apiVersion: 'v1', kind: 'Pod',
    metadata: { name, namespace: NS, labels: { app: 'sec' }, annotations: { [NETWORKS]: networks } },
    spec: {
      terminationGracePeriodSeconds: 1, automountServiceAccountToken: false, enableServiceLinks: false,
      containers: [{ name: 'c', image: BUSYBOX_IMAGE, imagePullPolicy: 'Never', command: ['sleep', '1000000'] }],
    },
  };
}
const ready = (name: string, timeout = '180s') => cp.kubectl('wait', '-n', NS, '--for=condition=Ready', `pod/${name}`, `--timeout=${timeout}`);
/** The pod's IPv4 addresses by interface, as `ip` inside it shows them. */
async function addrsIn(name: string): Promise<Record<string, string>> {
  const out = await cp.kubectl('exec', '-n', NS, name, '--', 'ip', '-o', '-4', 'addr', 'show');
  return Object.fromEntries(out.trim().split('\n').map((l) => l.split(/\s+/)).filter((f) => f[1] !== 'lo').map((f) => [f[1]!, f[3]!]));
}
const annotationsOf = async (name: string): Promise<Record<string, string>> => (await cp.getJson('get', 'pod', '-n', NS, name)).metadata.annotations ?? {};
const knitList = (): any[] => {
  const l = JSON.parse(execFileSync(process.execPath, [CLI, 'list', '--json', '--socket', d.socket], { encoding: 'utf8' }));
  return Array.isArray(l) ? l : (l.sandboxes ?? []);
};
const sandboxOf = (name: string) => knitList().find((s) => s.request.pod_name === name && s.request.pod_namespace === NS);

test.before(async () => {
  cp = await startControlPlane(scope, { prefix: P, clusterCidr: CLUSTER_CIDR });
  await cp.kubectl('apply', '-f', deploy('secondary-networks/crd.yaml'));
  await cp.kubectl('wait', '--for=condition=Established', 'crd/network-attachment-definitions.k8s.cni.cncf.io', '--timeout=60s');
  await cp.kubectl('apply', '-f', deploy('namespace.yaml'), '-f', deploy('serviceaccount.yaml'), '-f', deploy('secondary-networks/rbac.yaml'));
  for (const n of ['blue', 'red', 'storage']) await apply(nad(n));
  // knit reaches the API as deploy/'s ServiceAccount, through a relay the tests cut.
  link = await relay(new URL(cp.server));
  scope.teardown(() => link.cut());
  const token = (await cp.kubectl('create', 'token', 'knit', '-n', 'knit-system', '--duration=3600s')).trim();
  const kubeconfig = cp.kubeconfigFor(token);
  writeFileSync(kubeconfig, readFileSync(kubeconfig, 'utf8').replace(cp.server, link.server));

  execFileSync('ip', ['link', 'add', MASTER, 'type', 'veth', 'peer', 'name', `${P}m1`]);
  // Both ends up: a macvlan passes traffic only while its lower device has carrier.
  for (const l of [MASTER, `${P}m1`]) execFileSync('ip', ['link', 'set', l, 'up']);
  scope.teardown(() => {
    for (const l of [MASTER, BLUE_BRIDGE, `${P}b4`, `${P}sb`]) removeLinkQuietly(l);
    rmSync(dir, { recursive: true, force: true });
  });
  const opts = {
    prefix: P, subnet: SUBNET,
    extraNetworks: [{ name: STORAGE, mode: 'bridge', bridge: `${P}sb`, ipv4: { subnet: '10.190.3.0/24' } }],
    config: { secondaryNetworks: { kubeconfig, pluginDirs: ['/usr/lib/cni'], cacheDir: path.join(dir, 'cache'), confDir: path.join(dir, 'conf.d'), lookupTimeoutMs: 1000 } },
  };
  d = await startDaemon(opts);
  scope.teardown(() => cleanupDaemon(d, opts)); // registered before the kubelet's: runs after its pods are gone
  const cniBin = path.join(d.dir, 'cni-bin');
  const cniConf = path.join(d.dir, 'net.d');
  execFileSync(process.execPath, [CLI, 'install-cni', '--bin-dir', cniBin, '--conf-dir', cniConf, '--config', d.configPath, '--network', `${P}net`, '--cni-network', `${P}cni`]);
  node = await startKubelet(scope, cp, { prefix: P, cniConfDir: cniConf, cniBinDir: cniBin });
  await cp.kubectl('create', 'namespace', NS);
});

test.serial('pods annotated as for Multus get a bridge chain, a macvlan and knit\'s second network, named as asked; network-status is Multus\'s and matches the pod; the pods reach each other over both', async (t) => {
  t.timeout(600_000);
  await apply(pod('web-a', 'default/blue, default/red@macnet, default/storage'));
  await apply(pod('web-b', JSON.stringify([{ name: 'blue', namespace: 'default', interface: 'blue0' }, { name: 'red', namespace: 'default' }])));
  await ready('web-a');
  await ready('web-b');
  const a = await addrsIn('web-a');
  const b = await addrsIn('web-b');
  t.deepEqual(Object.keys(a).sort(), ['eth0', 'macnet', 'net1', 'net3']);
  t.deepEqual(Object.keys(b).sort(), ['blue0', 'eth0', 'net2']);
  t.regex(a.eth0!, /^10\.189\.0\./);
  t.regex(a.net1!, /^10\.190\.1\./);
  t.regex(a.macnet!, /^10\.190\.2\./);
  t.regex(a.net3!, /^10\.190\.3\./);
  // The kubelet's pod IP is the primary's: the ADD answered eth0 alone.
  const podA = await cp.getJson('get', 'pod', '-n', NS, 'web-a');
  t.is(podA.status.podIP, a.eth0!.split('/')[0]);

  // network-status, read back as KubeVirt reads it: one entry per network, in Multus's order.
  await eventually(async () => STATUS in (await annotationsOf('web-a')), 'network-status of web-a written', 60_000);
  const text = (await annotationsOf('web-a'))[STATUS]!;
  t.true(text.startsWith(`[{\n    "name": "${P}cni",\n    "interface": "eth0",\n    "ips": [\n        "${a.eth0!.split('/')[0]}"\n    ],`), text);
  const status = JSON.parse(text);
  t.deepEqual(status.map((s: any) => [s.name, s.interface, s.ips, s.default ?? false]), [
    [`${P}cni`, 'eth0', [a.eth0!.split('/')[0]], true],
    ['default/blue', 'net1', [a.net1!.split('/')[0]], false],
    ['default/red', 'macnet', [a.macnet!.split('/')[0]], false],
    ['default/storage', 'net3', [a.net3!.split('/')[0]], false],
  ]);
  const macnet = (await cp.kubectl('exec', '-n', NS, 'web-a', '--', 'cat', '/sys/class/net/macnet/address')).trim();
  t.is(status[2].mac, macnet);

  // Over the bridge chain and over the macvlan, pod to pod.
  const ping = (from: string, to: string) => cp.kubectl('exec', '-n', NS, from, '--', 'ping', '-c', '1', '-W', '3', to).then(() => true, () => false);
  t.true(await ping('web-a', b.blue0!.split('/')[0]!), 'web-a reaches web-b over blue');
  t.true(await ping('web-b', a.macnet!.split('/')[0]!), 'web-b reaches web-a over the macvlan');
  t.is(leases('blue').length, 2);

  // knit's record holds each network's chain as it ran.
  const rec = JSON.parse(readFileSync(path.join(d.dir, 'run', 'sandboxes', fileNameOf(sandboxOf('web-a').request.sandbox_id)), 'utf8'));
  t.deepEqual(rec.request.interfaces.map((i: any) => [i.name, i.attachment?.name ?? null]), [['eth0', null], ['net1', 'default/blue'], ['macnet', 'default/red'], ['net3', 'default/storage']]);
});

test.serial('the API away from knit: a pod whose NADs knit holds starts and its status is written once the API is back; one whose NAD knit never saw waits (CNI 11) and starts once it is back; DEL needs no API', async (t) => {
  t.timeout(600_000);
  await link.cut();
  await apply(pod('web-c', 'default/blue'));
  await ready('web-c');
  t.regex((await addrsIn('web-c')).net1!, /^10\.190\.1\./);
  t.false(STATUS in (await annotationsOf('web-c')), 'no status while knit cannot reach the API');
  // A NAD made while knit is cut off: its ADD answers try-again-later until knit can read it.
  await apply(nad('green'));
  await apply(pod('web-d', 'default/green'));
  await eventually(async () => {
    const ev = await cp.getJson('get', 'events', '-n', NS, '--field-selector', 'involvedObject.name=web-d');
    return ev.items.some((e: any) => /NetworkAttachmentDefinition default\/green: the Kubernetes API did not answer/.test(e.message));
  }, 'the kubelet saw knit\'s try-again-later', 120_000);
  t.is(sandboxOf('web-d'), undefined);
  await link.mend();
  await eventually(async () => STATUS in (await annotationsOf('web-c')), 'web-c\'s network-status written once the API is back', 120_000);
  await ready('web-d', '300s');
  t.regex((await addrsIn('web-d')).net1!, /^10\.190\.4\./);

  // DEL with the API away: the pod goes, and so do its leases.
  await link.cut();
  const blueBefore = leases('blue').length;
  await cp.kubectl('delete', 'pod', '-n', NS, 'web-c', '--wait=true', '--timeout=120s');
  await eventually(() => sandboxOf('web-c') === undefined, 'knit detached web-c', 60_000);
  t.is(leases('blue').length, blueBefore - 1);
  await link.mend();
});

test.serial('a NAD deleted while pods use it: deleting the pods gives every lease and device back from knit\'s record', async (t) => {
  t.timeout(300_000);
  await cp.kubectl('delete', 'network-attachment-definition', '-n', 'default', 'blue', 'red');
  const ids = ['web-a', 'web-b'].map((n) => sandboxOf(n).request.sandbox_id);
  await cp.kubectl('delete', 'pod', '-n', NS, 'web-a', 'web-b', '--wait=true', '--timeout=120s');
  await eventually(() => ids.every((id) => !knitList().some((s) => s.request.sandbox_id === id)), 'knit detached both', 60_000);
  t.deepEqual(leases('blue'), []);
  t.deepEqual(leases('red'), []);
  const ports = JSON.parse(execFileSync('ip', ['-j', 'link', 'show', 'master', BLUE_BRIDGE], { encoding: 'utf8' }) || '[]');
  t.deepEqual(ports, [], 'no veth left on the blue bridge');
  for (const n of ['blue', 'red']) await apply(nad(n));
});

test.serial('kill -9 between two networks of a pod: the next knit takes it back, the kubelet\'s retry makes it whole, no lease is left over', async (t) => {
  t.timeout(600_000);
  // Where the second network's steps start, from a pod of the same shape.
  await apply(pod('probe', 'default/blue, default/red'));
  await ready('probe');
  const rec = JSON.parse(readFileSync(path.join(d.dir, 'run', 'sandboxes', fileNameOf(sandboxOf('probe').request.sandbox_id)), 'utf8'));
  const at = rec.steps.findIndex((s: any) => s.iface === 'net2');
  await cp.kubectl('delete', 'pod', '-n', NS, 'probe', '--wait=true', '--timeout=120s');
  await eventually(() => sandboxOf('probe') === undefined, 'probe detached', 60_000);

  await d.stop();
  const armed = await d.restart({ KNIT_FAILPOINT: `attach:${at}` });
  await apply(pod('web-e', 'default/blue, default/red'));
  await armed.exited; // the failpoint fired inside the pod's ADD
  d = await armed.restart();
  await ready('web-e', '300s');
  t.deepEqual(Object.keys(await addrsIn('web-e')).sort(), ['eth0', 'net1', 'net2']);
  // web-e is the only pod on blue and red now: the crashed attempt's blue lease was given back.
  t.is(leases('blue').length, 1);
  t.is(leases('red').length, 1);
});

test.serial('network-status goes only to the pod the ADD was for: a pod made again under the same name keeps its own, a pod with no annotations gets the map', async (t) => {
  t.timeout(300_000);
  const admin = new KubeClient(loadKubeAccess({ kubeconfig: cp.adminKubeconfig }));
  t.teardown(() => admin.close());
  const writer = new NetworkStatusWriter(admin, pino({ level: 'silent' }), (n) => backoffDelay(n, DEFAULT_BACKOFF));
  t.teardown(() => writer.close());
  // Bound to a node that does not run: no kubelet (and so no knit) ever touches it.
  const bare = { ...pod('again', ''), metadata: { name: 'again', namespace: NS } };
  (bare.spec as any).nodeName = `${P}nowhere`;
  const gone = () => cp.kubectl('delete', 'pod', '-n', NS, 'again', '--grace-period=0', '--force', '--wait=true', '--timeout=60s');
  await apply(bare);
  const first = (await cp.getJson('get', 'pod', '-n', NS, 'again')).metadata.uid;
  await gone();
  await apply(bare);
  const second = (await cp.getJson('get', 'pod', '-n', NS, 'again')).metadata.uid;
  t.not(first, second);
  writer.publish({ namespace: NS, name: 'again', uid: first }, '[{"name":"stale"}]');
  await eventually(() => writer.idle, 'the stale write settled', 30_000);
  t.false(STATUS in (await annotationsOf('again')), 'the predecessor\'s status is not written on the new pod');
  writer.publish({ namespace: NS, name: 'again', uid: second }, '[{"name":"mine"}]');
  await eventually(async () => (await annotationsOf('again'))[STATUS] === '[{"name":"mine"}]', 'the pod\'s own status written, though it had no annotations', 30_000);
  await gone();
});

test.serial('pods deleted: knit detached every one, no lease, device or record is left', async (t) => {
  t.timeout(300_000);
  await cp.kubectl('delete', 'pod', '-n', NS, '-l', 'app=sec', '--wait=true', '--timeout=180s');
  await eventually(() => knitList().filter((s) => s.request.pod_namespace === NS).length === 0, 'knit records gone', 120_000);
  for (const n of ['blue', 'red', 'green']) t.deepEqual(leases(n), [], n);
  const ports = JSON.parse(execFileSync('ip', ['-j', 'link', 'show', 'master', BLUE_BRIDGE], { encoding: 'utf8' }) || '[]');
  t.deepEqual(ports, []);
});
