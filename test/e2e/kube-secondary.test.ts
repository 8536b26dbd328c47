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
import pino from 'pino';
import { eventually } from '../helpers/daemon.js';
import { uniquePrefix } from '../helpers/names.js';
import { startSecondaryCluster, STATUS, type SecondaryCluster } from '../helpers/secondary-cluster.js';
import { fileScope } from '../fixtures/kube-cluster.js';
import { KubeClient, loadKubeAccess, backoffDelay, DEFAULT_BACKOFF } from '../../src/kube/index.js';
import { NetworkStatusWriter } from '../../src/daemon/network-status-writer.js';

const P = uniquePrefix('ksec');
const STORAGE = `${P}st`; // knit's own second network
const BLUE_BRIDGE = `${P}b1`;
const MASTER = `${P}m0`; // the macvlan's lower device on the host
const scope = fileScope(test);
let c: SecondaryCluster;
let NS: string;

const hostLocal = (subnet: string) => ({ type: 'host-local', dataDir: c.dataDir, ranges: [[{ subnet }]] });
const NADS: Record<string, () => object> = {
  // No isGateway: it would set the host-wide net.ipv4.ip_forward (these pods' kubelet runs in
  // the machine's own netns); the pods talk over the bridge alone.
  blue: () => ({ cniVersion: '1.0.0', name: 'blue', plugins: [{ type: 'bridge', bridge: BLUE_BRIDGE, ipam: hostLocal('10.190.1.0/24') }] }),
  red: () => ({ cniVersion: '0.4.0', type: 'macvlan', master: MASTER, mode: 'bridge', ipam: hostLocal('10.190.2.0/24') }),
  storage: () => ({ cniVersion: '1.0.0', type: 'knit', network: STORAGE }),
  green: () => ({ cniVersion: '1.0.0', name: 'green', type: 'bridge', bridge: `${P}b4`, ipam: hostLocal('10.190.4.0/24') }),
};
const nad = (name: string) => c.nad(name, NADS[name]!());
const apply = (obj: object) => c.apply(obj);
const pod = (name: string, networks: string) => c.pod(name, networks);
const ready = (name: string, timeout?: string) => c.ready(name, timeout);
const addrsIn = (name: string) => c.addrsIn(name);
const annotationsOf = (name: string) => c.annotationsOf(name);
const sandboxOf = (name: string) => c.sandboxOf(name);
const knitList = () => c.knitList();
const leases = (net: string) => c.leases(net);

test.before(async () => {
  // Both ends up: a macvlan passes traffic only while its lower device has carrier.
  execFileSync('ip', ['link', 'add', MASTER, 'type', 'veth', 'peer', 'name', `${P}m1`]);
  for (const l of [MASTER, `${P}m1`]) execFileSync('ip', ['link', 'set', l, 'up']);
  c = await startSecondaryCluster(scope, {
    prefix: P, clusterCidr: '10.189.0.0/16', subnet: '10.189.0.0/24', hostLinks: [MASTER, BLUE_BRIDGE, `${P}b4`, `${P}sb`],
    daemon: { extraNetworks: [{ name: STORAGE, mode: 'bridge', bridge: `${P}sb`, ipv4: { subnet: '10.190.3.0/24' } }] },
  });
  NS = c.ns;
  for (const n of ['blue', 'red', 'storage']) await apply(nad(n));
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
  const podA = await c.cp.getJson('get', 'pod', '-n', NS, 'web-a');
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
  const macnet = (await c.cp.kubectl('exec', '-n', NS, 'web-a', '--', 'cat', '/sys/class/net/macnet/address')).trim();
  t.is(status[2].mac, macnet);

  // Over the bridge chain and over the macvlan, pod to pod.
  const ping = (from: string, to: string) => c.cp.kubectl('exec', '-n', NS, from, '--', 'ping', '-c', '1', '-W', '3', to).then(() => true, () => false);
  t.true(await ping('web-a', b.blue0!.split('/')[0]!), 'web-a reaches web-b over blue');
  t.true(await ping('web-b', a.macnet!.split('/')[0]!), 'web-b reaches web-a over the macvlan');
  t.is(leases('blue').length, 2);

  // knit's record holds each network's chain as it ran.
  const rec = c.recordOf('web-a');
  t.deepEqual(rec.request.interfaces.map((i: any) => [i.name, i.attachment?.name ?? null]), [['eth0', null], ['net1', 'default/blue'], ['macnet', 'default/red'], ['net3', 'default/storage']]);
});

test.serial('the API away from knit: a pod whose NADs knit holds starts and its status is written once the API is back; one whose NAD knit never saw waits (CNI 11) and starts once it is back; DEL needs no API', async (t) => {
  t.timeout(600_000);
  await c.link.cut();
  await apply(pod('web-c', 'default/blue'));
  await ready('web-c');
  t.regex((await addrsIn('web-c')).net1!, /^10\.190\.1\./);
  t.false(STATUS in (await annotationsOf('web-c')), 'no status while knit cannot reach the API');
  // A NAD made while knit is cut off: its ADD answers try-again-later until knit can read it.
  await apply(nad('green'));
  await apply(pod('web-d', 'default/green'));
  await eventually(async () => {
    const ev = await c.cp.getJson('get', 'events', '-n', NS, '--field-selector', 'involvedObject.name=web-d');
    return ev.items.some((e: any) => /NetworkAttachmentDefinition default\/green: the Kubernetes API did not answer/.test(e.message));
  }, 'the kubelet saw knit\'s try-again-later', 120_000);
  t.is(sandboxOf('web-d'), undefined);
  await c.link.mend();
  await eventually(async () => STATUS in (await annotationsOf('web-c')), 'web-c\'s network-status written once the API is back', 120_000);
  await ready('web-d', '300s');
  t.regex((await addrsIn('web-d')).net1!, /^10\.190\.4\./);

  // DEL with the API away: the pod goes, and so do its leases.
  await c.link.cut();
  const blueBefore = leases('blue').length;
  await c.cp.kubectl('delete', 'pod', '-n', NS, 'web-c', '--wait=true', '--timeout=120s');
  await eventually(() => sandboxOf('web-c') === undefined, 'knit detached web-c', 60_000);
  t.is(leases('blue').length, blueBefore - 1);
  await c.link.mend();
});

test.serial('a NAD deleted while pods use it: deleting the pods gives every lease and device back from knit\'s record', async (t) => {
  t.timeout(300_000);
  await c.cp.kubectl('delete', 'network-attachment-definition', '-n', 'default', 'blue', 'red');
  const ids = ['web-a', 'web-b'].map((n) => sandboxOf(n).request.sandbox_id);
  await c.cp.kubectl('delete', 'pod', '-n', NS, 'web-a', 'web-b', '--wait=true', '--timeout=120s');
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
  const rec = c.recordOf('probe');
  const at = rec.steps.findIndex((s: any) => s.iface === 'net2');
  await c.cp.kubectl('delete', 'pod', '-n', NS, 'probe', '--wait=true', '--timeout=120s');
  await eventually(() => sandboxOf('probe') === undefined, 'probe detached', 60_000);

  await c.daemon.stop();
  const armed = await c.daemon.restart({ KNIT_FAILPOINT: `attach:${at}` });
  await apply(pod('web-e', 'default/blue, default/red'));
  await armed.exited; // the failpoint fired inside the pod's ADD
  c.daemon = await armed.restart();
  await ready('web-e', '300s');
  t.deepEqual(Object.keys(await addrsIn('web-e')).sort(), ['eth0', 'net1', 'net2']);
  // web-e is the only pod on blue and red now: the crashed attempt's blue lease was given back.
  t.is(leases('blue').length, 1);
  t.is(leases('red').length, 1);
});

test.serial('network-status goes only to the pod the ADD was for: a pod made again under the same name keeps its own, a pod with no annotations gets the map', async (t) => {
  t.timeout(300_000);
  const admin = new KubeClient(loadKubeAccess({ kubeconfig: c.cp.adminKubeconfig }));
  t.teardown(() => admin.close());
  const writer = new NetworkStatusWriter(admin, pino({ level: 'silent' }), (n) => backoffDelay(n, DEFAULT_BACKOFF));
  t.teardown(() => writer.close());
  // Bound to a node that does not run: no kubelet (and so no knit) ever touches it.
  const bare: any = { ...pod('again', ''), metadata: { name: 'again', namespace: NS } };
  bare.spec.nodeName = `${P}nowhere`;
  const gone = () => c.cp.kubectl('delete', 'pod', '-n', NS, 'again', '--grace-period=0', '--force', '--wait=true', '--timeout=60s');
  await apply(bare);
  const first = (await c.cp.getJson('get', 'pod', '-n', NS, 'again')).metadata.uid;
  await gone();
  await apply(bare);
  const second = (await c.cp.getJson('get', 'pod', '-n', NS, 'again')).metadata.uid;
  t.not(first, second);
  writer.publish({ namespace: NS, name: 'again', uid: first }, '[{"name":"stale"}]');
  await eventually(() => writer.idle, 'the stale write settled', 30_000);
  t.false(STATUS in (await annotationsOf('again')), 'the predecessor\'s status is not written on the new pod');
  writer.publish({ namespace: NS, name: 'again', uid: second }, '[{"name":"mine"}]');
  await eventually(async () => (await annotationsOf('again'))[STATUS] === '[{"name":"mine"}]', 'the pod\'s own status written, though it had no annotations', 30_000);
  await gone();
});

test.serial('hot-plug: a running pod\'s networks annotation changed gets the new network added and the dropped one removed, each in the pod, the leases and network-status', async (t) => {
  t.timeout(300_000);
  await apply(pod('web-h', 'default/blue@hp1'));
  await ready('web-h');
  t.deepEqual(Object.keys(await addrsIn('web-h')).sort(), ['eth0', 'hp1']);
  const blueLeases = leases('blue').length;
  await c.cp.kubectl('annotate', '--overwrite', '-n', NS, 'pod/web-h', `k8s.v1.cni.cncf.io/networks=default/blue@hp1, default/green@hp2`);
  await eventually(async () => 'hp2' in (await addrsIn('web-h')), 'hp2 added to the running pod', 120_000);
  t.regex((await addrsIn('web-h')).hp2!, /^10\.190\.4\./);
  await eventually(async () => JSON.parse((await annotationsOf('web-h'))[STATUS] ?? '[]').some((s: any) => s.name === 'default/green' && s.interface === 'hp2'), 'network-status lists hp2', 60_000);
  await c.cp.kubectl('annotate', '--overwrite', '-n', NS, 'pod/web-h', `k8s.v1.cni.cncf.io/networks=default/green@hp2`);
  await eventually(async () => !('hp1' in (await addrsIn('web-h'))), 'hp1 removed from the running pod', 120_000);
  t.is(leases('blue').length, blueLeases - 1, 'hp1\'s blue lease given back');
  t.deepEqual(Object.keys(await addrsIn('web-h')).sort(), ['eth0', 'hp2']);
  await eventually(async () => !JSON.parse((await annotationsOf('web-h'))[STATUS]).some((s: any) => s.name === 'default/blue'), 'network-status no longer lists blue', 60_000);
  const rec = c.recordOf('web-h');
  t.deepEqual(rec.request.interfaces.map((i: any) => i.name), ['eth0', 'hp2']);
});

test.serial('pods deleted: knit detached every one, no lease, device or record is left', async (t) => {
  t.timeout(300_000);
  await c.cp.kubectl('delete', 'pod', '-n', NS, '-l', 'app=sec', '--wait=true', '--timeout=180s');
  await eventually(() => knitList().filter((s) => s.request.pod_namespace === NS).length === 0, 'knit records gone', 120_000);
  for (const n of ['blue', 'red', 'green']) t.deepEqual(leases(n), [], n);
  const ports = JSON.parse(execFileSync('ip', ['-j', 'link', 'show', 'master', BLUE_BRIDGE], { encoding: 'utf8' }) || '[]');
  t.deepEqual(ports, []);
});
