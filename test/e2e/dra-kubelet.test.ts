// knit's DRA driver with a real kubelet, end to end: kube-apiserver, kube-scheduler,
// kube-controller-manager, a kubelet and containerd 2 built from the module proxy
// (test/fixtures/kube-*.ts), knit-cni as the node's only CNI config, and knit serving the
// kubelet's plugin sockets under its --root-dir with deploy/dra's ServiceAccount and RBAC. A
// ResourceClaimTemplate and a Pod applied with kubectl are scheduled against knit's
// ResourceSlice, the kubelet finds knit's registration socket and calls Prepare, containerd's
// knit-cni ADD brings the VF netdev into the pod with the claim's name, addresses and routes,
// the claim's status shows it; deleting the pod gives the VF back and the kubelet unprepares.
// A Kata-runtime and a KubeVirt-runtime pod (knit.dev/runtime, which containerd passes to
// knit-cni) get the VFIO hand-off of their claim's VF, and containerd injects the claim's CDI
// device nodes into the container. kill -9 of knit serve between Prepare and the attach, during
// the attach and during Prepare (KNIT_FAILPOINT), then a restart: the kubelet's retry gets the
// pod its device, and nothing is left in the host, the pod, the CDI dir or knit's records.
// Stand-in hardware: the VF netdev is a veth end whose peer is in a fabric netns, its PCI side
// a simulated sysfs (test/kernel/device-standin.ts); /dev/vfio nodes are /dev/null's (1:3)
// under a test-made root that config dra.devRoot names.
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { cleanupDaemon, eventually, ipJson, startDaemon, CLI, type Daemon } from '../helpers/daemon.js';
import { fromStruct } from '../../src/api/struct.js';
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
  // VF 0: netdev claims (runc pods); VF 1 and 2: VFIO claims (a Kata pod, a KubeVirt pod).
  s = await makeStandIn(scope, P, 3);
  execFileSync('ip', ['-n', s.fabric, 'addr', 'add', '192.0.2.1/24', 'dev', s.vfs[0]!.peer]);
  // VFs 1 and 2 bound to vfio-pci beforehand, as an operator does for VMs: the simulated sysfs
  // answers a driver bind only for writes made in this process (its FakeKernel), not for the
  // knit daemon's, so the binding at Prepare is covered in-process (test/kernel/dra-attach).
  for (const i of [1, 2]) {
    const bdf = s.vfs[i]!.bdf;
    await s.node.kernel.write(`bus/pci/devices/${bdf}/driver_override`, 'vfio-pci');
    await s.node.kernel.write('bus/pci/drivers/iavf/unbind', bdf);
    await s.node.kernel.write('bus/pci/drivers_probe', bdf);
  }
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
    devRoot: standInDevRoot(path.join(d.dir, 'devroot')),
  };
  writeFileSync(d.configPath, JSON.stringify(config, null, 2));
  await d.stop();
  d = await d.restart();
});

/**
 * (stand-in /dev/vfio) The char devices the kernel's vfio driver would make when a VF's group is
 * bound: /dev/vfio/<group> and /dev/vfio/vfio, under a test-made root that knit's config
 * dra.devRoot names (the CDI specs' hostPath). Each is /dev/null's node (1:3), harmless to
 * open; the container sees it at /dev/vfio/<group>.
 */
function standInDevRoot(root: string): string {
  mkdirSync(path.join(root, 'dev', 'vfio'), { recursive: true });
  for (const name of [...s.vfs.map((_, i) => String(GROUP(i))), 'vfio']) {
    execFileSync('mknod', ['-m', '0666', path.join(root, 'dev', 'vfio', name), 'c', '1', '3']);
  }
  return root;
}

/** The stand-in's IOMMU group of VF i (test/kernel/device-standin.ts). */
const GROUP = (i: number) => 71 + i;
const vfIndex = (i: number) => `device.attributes["dra.net"].vfIndex == ${i}`;

/** A ResourceClaimTemplate for stand-in VF i and a Pod using it (busybox sleeping). */
function podWithClaim(name: string, o: { className: string; vf: number; parameters: object; annotations?: Record<string, string> }) {
  return [
    { apiVersion: 'resource.k8s.io/v1', kind: 'ResourceClaimTemplate', metadata: { name, namespace: 'default' }, spec: { spec: { devices: {
      requests: [{ name: 'nic', exactly: { deviceClassName: o.className, selectors: [{ cel: { expression: vfIndex(o.vf) } }] } }],
      config: [{ requests: ['nic'], opaque: { driver: DRIVER, parameters: o.parameters } }],
    } } } },
    { apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: 'default', annotations: o.annotations ?? {} }, spec: {
      terminationGracePeriodSeconds: 1, automountServiceAccountToken: false, enableServiceLinks: false,
      resourceClaims: [{ name: 'nic', resourceClaimTemplateName: name }],
      containers: [{ name: 'c', image: BUSYBOX_IMAGE, imagePullPolicy: 'Never', command: ['sleep', '100000'], resources: { claims: [{ name: 'nic' }] } }],
    } },
  ];
}

const apply = (objects: object[]) => cp.kubectlInput(objects.map((o) => JSON.stringify(o)).join('\n'), 'apply', '-f', '-');
/** Waits for the pod; on timeout the error carries its events (what the kubelet said). */
async function podReady(name: string, timeout = '90s') {
  try {
    await cp.kubectl('wait', '-n', 'default', '--for=condition=Ready', `pod/${name}`, `--timeout=${timeout}`);
  } catch (err) {
    const events = await cp.kubectl('get', 'events', '-n', 'default', '--field-selector', `involvedObject.name=${name}`).catch((e: Error) => e.message);
    throw new Error(`pod ${name} not Ready: ${(err as Error).message}\n${events}\n${d.logs.filter((l) => l.includes('"level":40') || l.includes('"level":50')).slice(-10).join('\n')}`);
  }
}

/** knit's record of the pod's sandbox (through knit's API), its hand-offs decoded. */
async function knitSandboxOf(podUid: string) {
  const all = (await d.call('List', {})).sandboxes ?? [];
  const sb = all.find((x: any) => x.request?.pod_uid === podUid);
  if (!sb) return undefined;
  return { ...sb, interfaces: (sb.result?.interfaces ?? []).map((i: any) => ({ ...i, handoff: i.handoff ? fromStruct(i.handoff) : undefined })) };
}

/** The simulated sysfs's driver of stand-in VF i. */
const driverOf = (i: number) => s.node.kernel.linkName(`bus/pci/devices/${s.vfs[i]!.bdf}/driver`);

/** What knit leaves on the node once its pods are gone: nothing of theirs. Its records (knit's
 * API and its claim journal), its CDI specs, the links carrying its tag in the host (its
 * network's bridge aside). */
async function leftovers() {
  const records = ((await d.call('List', {})).sandboxes ?? []).map((x: any) => x.request?.sandbox_id);
  const claims = readdirSync(path.join(d.dir, 'run', 'dra-claims')).filter((f) => f.endsWith('.json'));
  const cdi = readdirSync(node.cdiDir).filter((f) => f.startsWith(`${DRIVER}-`));
  const links = ipJson(['link', 'show']).filter((l: any) => l.ifname !== d.bridge && String(l.ifalias ?? '').startsWith(`knit-${P}:`)).map((l: any) => l.ifname);
  return { records, claims, cdi, links };
}
const NOTHING = { records: [], claims: [], cdi: [], links: [] };

/** A failed test's pod must not hold its VF for the next test. */
function deleteOnFailure(t: ExecutionContext, name: string) {
  t.teardown(async () => {
    await cp.kubectl('delete', 'pod', name, '-n', 'default', '--ignore-not-found', '--timeout=120s').catch(() => undefined);
    await cp.kubectl('delete', 'resourceclaimtemplate', name, '-n', 'default', '--ignore-not-found').catch(() => undefined);
  });
}

async function deletePod(name: string) {
  await cp.kubectl('delete', 'pod', name, '-n', 'default', '--timeout=120s');
  await cp.kubectl('delete', 'resourceclaimtemplate', name, '-n', 'default');
}

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
      requests: [{ name: 'nic', exactly: { deviceClassName: 'knit-netdev', selectors: [{ cel: { expression: vfIndex(0) } }] } }],
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

test.serial('VFIO claims through the real kubelet path: a Kata-runtime pod and a KubeVirt-runtime pod (knit.dev/runtime, read by knit-cni from containerd) get the VFIO hand-off of their VF; containerd 2 injects the claim\'s CDI device nodes into the container; deleting the pods leaves the VFs as they were and nothing of knit\'s (stand-in hardware: simulated sysfs with VFs bound to vfio-pci beforehand, stand-in /dev/vfio nodes of /dev/null\'s major:minor)', async (t) => {
  const pods = [
    { name: 'kata', vf: 1, runtime: 'kata', ip: '192.0.2.41/24' },
    { name: 'kubevirt', vf: 2, runtime: 'kubevirt', ip: '192.0.2.42/24' },
  ];
  await apply(pods.flatMap((p) => podWithClaim(p.name, { className: 'knit-vfio', vf: p.vf, parameters: { addresses: [p.ip] }, annotations: { 'knit.dev/runtime': p.runtime } })));
  for (const p of pods) deleteOnFailure(t, p.name);
  for (const p of pods) await podReady(p.name);

  for (const p of pods) {
    const vf = s.vfs[p.vf]!;
    // CDI, seen from inside the container: containerd added the spec's device nodes.
    for (const node of [`/dev/vfio/${GROUP(p.vf)}`, '/dev/vfio/vfio']) {
      t.is((await cp.kubectl('exec', p.name, '--', 'stat', '-c', '%F %t:%T', node)).trim(), 'character special file 1:3', `${p.name}: ${node} in the container`);
    }
    // The hand-off, in knit's record of the sandbox containerd's knit-cni ADD made.
    const uid = (await cp.getJson('get', 'pod', p.name, '-n', 'default')).metadata.uid;
    const sb = await knitSandboxOf(uid);
    t.is(sb?.request.runtime, p.runtime === 'kata' ? 'KATA' : 'KUBEVIRT', `${p.name}: knit-cni took the runtime from the pod annotation`);
    const h = sb!.interfaces.find((i: any) => i.name === 'vfio0');
    t.like(h, { pci_id: vf.bdf });
    t.like(h.handoff, { model: 'vfio', runtime: p.runtime, vfioDevice: `/dev/vfio/${GROUP(p.vf)}`, containerDevice: '/dev/vfio/vfio', networkData: { interfaceName: 'vfio0', ips: [p.ip] } });
    if (p.runtime === 'kata') t.like(h.handoff.dan, { device: { type: 'vfio', pci_device_id: vf.bdf } });
    else t.regex(h.handoff.libvirt.hostdev, new RegExp(`<address domain='0x0000' bus='0x5a' slot='0x02' function='0x${p.vf}'/>`));
    t.true(sb!.interfaces.some((i: any) => i.name === 'eth0' || i.sandbox), `${p.name}: and its pod network`);
  }

  for (const p of pods) await deletePod(p.name);
  await eventually(() => d.logs.filter((l) => l.includes('DRA claim unprepared')).length >= 3, 'the kubelet\'s Unprepare of both claims', 60_000);
  for (const p of pods) t.is(await driverOf(p.vf), 'vfio-pci', `${p.name}: the VF stays on vfio-pci, where it was before`);
  await eventually(async () => JSON.stringify(await leftovers()) === JSON.stringify(NOTHING), 'nothing of the pods left', 60_000);
  t.deepEqual(await leftovers(), NOTHING);
});

/** knit serve restarted with KNIT_FAILPOINT set, registered again with the kubelet. */
async function restartWithFailpoint(failpoint: string) {
  await d.stop();
  d = await d.restart({ KNIT_FAILPOINT: failpoint });
  await eventually(() => d.logs.some((l) => l.includes('registered with the kubelet as a DRA plugin')), 'the kubelet registers the restarted knit', 60_000);
}

/** The failpoint's SIGKILL, then a plain `knit serve` on the same dirs (start-up repair). */
let atCrash: string[] = [];
let cdiAtCrash: string[] = [];
let vfAtCrash: ReturnType<typeof vfState>;
async function afterCrashRestart() {
  const crashed = d;
  const exit = await Promise.race([crashed.exited, new Promise<undefined>((r) => setTimeout(r, 90_000, undefined))]);
  if (exit?.signal !== 'SIGKILL') throw new Error(`the failpoint did not kill knit: ${JSON.stringify(exit)}\n${crashed.logs.slice(-5).join('\n')}`);
  atCrash = journalStates();
  cdiAtCrash = readdirSync(node.cdiDir).filter((f) => f.startsWith(`${DRIVER}-`));
  vfAtCrash = vfState(s.vfs[0]!.name);
  d = await crashed.restart();
}

/** The states in knit's claim journal (its files, read directly: knit is down). */
const journalStates = () =>
  readdirSync(path.join(d.dir, 'run', 'dra-claims')).filter((f) => f.endsWith('.json')).map((f) => JSON.parse(readFileSync(path.join(d.dir, 'run', 'dra-claims', f), 'utf8')).state);

/** A runc pod with VF 0's netdev through a claim, checked from inside (kubectl exec) and against the host. */
async function netdevPodChecks(t: ExecutionContext, name: string, address: string) {
  t.regex(await cp.kubectl('exec', name, '--', 'ip', '-o', 'addr', 'show', 'dev', 'net1'), new RegExp(` inet ${address.replace(/\./g, '\\.')}/24 `));
  t.regex(await cp.kubectl('exec', name, '--', 'ping', '-c', '1', '-W', '2', '192.0.2.1'), /1 packets received/);
  const links = (await cp.kubectl('exec', name, '--', 'ip', '-o', 'link', 'show')).split('\n').filter(Boolean).map((l) => l.split(': ')[1]!.split('@')[0]);
  t.deepEqual(links.sort(), ['eth0', 'lo', 'net1'], `${name}: one eth0 and one net1 in the pod, nothing left from the crashed attempt`);
  t.is(vfState(s.vfs[0]!.name), undefined, 'the VF netdev left the host');
}

for (const c of [
  { name: 'crash-between', failpoint: 'attach:0', when: 'between the kubelet\'s Prepare and the pod\'s attach (knit dies as knit-cni\'s ADD arrives, before it changes anything)' },
  { name: 'crash-attach', failpoint: 'attach:1', when: 'during the pod\'s attach (after its first step, before the VF moves)' },
]) {
  test.serial(`kill -9 of knit serve ${c.when}, then a restart: the kubelet's retry gets the pod its VF netdev with the claim's address, nothing of the crashed attempt stays in the host or the pod, and deleting the pod gives the VF back as it was (stand-in hardware: veth as VF netdev, simulated sysfs)`, async (t) => {
    t.timeout(300_000);
    const before = vfState(s.vfs[0]!.name);
    deleteOnFailure(t, c.name);
    await restartWithFailpoint(c.failpoint);
    await apply(podWithClaim(c.name, { className: 'knit-netdev', vf: 0, parameters: { interfaceName: 'net1', addresses: ['192.0.2.11/24'] } }));
    await afterCrashRestart();
    t.deepEqual(atCrash, ['prepared'], 'the claim was prepared when knit died');
    t.deepEqual(vfAtCrash, before, 'the VF had not moved yet when knit died');
    await podReady(c.name, '180s');
    await netdevPodChecks(t, c.name, '192.0.2.11');
    await deletePod(c.name);
    await eventually(() => JSON.stringify(vfState(s.vfs[0]!.name)) === JSON.stringify(before), 'the VF back in the host as it was', 60_000);
    await eventually(async () => JSON.stringify(await leftovers()) === JSON.stringify(NOTHING), 'nothing of the pod left', 60_000);
    t.deepEqual(await leftovers(), NOTHING);
    t.deepEqual(vfState(s.vfs[0]!.name), before);
  });
}

test.serial('kill -9 of knit serve during the kubelet\'s Prepare (the VF\'s bind done, its CDI spec not yet written), then a restart: start-up repair rolls the claim back, the kubelet\'s retry prepares it whole and the Kata pod gets its VFIO hand-off and CDI device nodes; nothing left after deletion (stand-in hardware: simulated sysfs with the VF bound to vfio-pci beforehand, stand-in /dev/vfio nodes)', async (t) => {
  t.timeout(300_000);
  deleteOnFailure(t, 'crash-prepare');
  await restartWithFailpoint('draprepare:1');
  await apply(podWithClaim('crash-prepare', { className: 'knit-vfio', vf: 1, parameters: { addresses: ['192.0.2.43/24'] }, annotations: { 'knit.dev/runtime': 'kata' } }));
  await afterCrashRestart();
  t.deepEqual(atCrash, ['preparing'], 'knit died inside the claim\'s Prepare');
  t.deepEqual(cdiAtCrash, [], 'before its CDI spec was written');
  await eventually(() => d.logs.some((l) => l.includes('DRA start-up repair') && l.includes('rolledBack')), 'start-up repair of the interrupted Prepare', 10_000);
  await podReady('crash-prepare', '180s');
  t.is((await cp.kubectl('exec', 'crash-prepare', '--', 'stat', '-c', '%F %t:%T', `/dev/vfio/${GROUP(1)}`)).trim(), 'character special file 1:3');
  const uid = (await cp.getJson('get', 'pod', 'crash-prepare', '-n', 'default')).metadata.uid;
  const h = (await knitSandboxOf(uid))!.interfaces.find((i: any) => i.name === 'vfio0');
  t.like(h.handoff, { model: 'vfio', runtime: 'kata', vfioDevice: `/dev/vfio/${GROUP(1)}`, networkData: { interfaceName: 'vfio0', ips: ['192.0.2.43/24'] } });
  t.like(JSON.parse(readFileSync(path.join(node.cdiDir, readdirSync(node.cdiDir).find((f) => f.startsWith(`${DRIVER}-`))!), 'utf8')).devices[0].containerEdits.deviceNodes[0], { path: `/dev/vfio/${GROUP(1)}` });
  await deletePod('crash-prepare');
  await eventually(async () => JSON.stringify(await leftovers()) === JSON.stringify(NOTHING), 'nothing of the pod left', 60_000);
  t.deepEqual(await leftovers(), NOTHING);
  t.is(await driverOf(1), 'vfio-pci');
});
