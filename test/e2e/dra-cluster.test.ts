// knit's DRA driver against a real control plane (kube-apiserver, kube-scheduler and
// kube-controller-manager built from the module proxy, test/fixtures/kube-cluster.ts): knit
// publishes this node's devices as a ResourceSlice with the ServiceAccount and RBAC of
// deploy/dra, the API server takes deploy/dra's DeviceClasses (their CEL compiles), the
// scheduler allocates claims against knit's slice (their CEL selects the right devices), and
// the kubelet's Prepare (a test client written from the published kubelet protos) reads the
// claims the API server stores, sets the PF side, binds for VFIO, and writes the CDI spec; the
// claim's KEP-4817 status lands in the API. The node has no kubelet here, so the test client
// plays its part; its devices are stand-ins: a simulated sysfs and PF (test/fixtures/dra-node.ts).
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { createNode, fileScope, startControlPlane, type ControlPlane } from '../fixtures/kube-cluster.js';
import { uniquePrefix } from '../helpers/names.js';
import { KubeClient, loadKubeAccess } from '../../src/kube/index.js';
import { RecordStore } from '../../src/store/index.js';
import { DraDriver } from '../../src/dra/driver.js';
import { claimReader, type KubeApi } from '../../src/dra/kube-port.js';
import { kubeletSockets, startKubeletServer } from '../../src/dra/kubelet-server.js';
import { publishSlice, removeSlice, sliceName } from '../../src/dra/slices.js';
import { writeClaimStatus } from '../../src/dra/claim-status.js';
import type { ClaimRecord } from '../../src/dra/claim-record.js';
import { scanInventory } from '../../src/devices/inventory.js';
import { createSriovNode, NODE } from '../fixtures/fake-sysfs.js';
import { DRIVER, SimulatedNetlink, simulatedRunner, tempDir } from '../fixtures/dra-node.js';
import { draClient, registrationClient } from '../fixtures/kubelet-client.js';
import { cleanupDaemon, eventually, startDaemon, type DaemonOptions } from '../helpers/daemon.js';
import { existsSync } from 'node:fs';
import { makeNetns, removeNetns, runcAttachReq } from '../helpers/daemon.js';
import { makeStandIn } from '../kernel/device-standin.js';

const P = uniquePrefix('kdc');
const NODE_NAME = `${P}node`;
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..', '..');
let cp: ControlPlane;
let api: KubeApi;
let knitKubeconfig: string;
const scope = fileScope(test);

test.before(async () => {
  cp = await startControlPlane(scope, { prefix: P, clusterCidr: '10.247.0.0/16' });
  await createNode(cp, NODE_NAME, { internalIPs: ['10.99.1.2'], waitPodCidr: false });
  // A node with room for pods (a kubelet would report this).
  const room = { pods: '110', cpu: '4', memory: '8Gi' };
  await cp.kubectl('patch', 'node', NODE_NAME, '--subresource=status', '--type=merge', '-p', JSON.stringify({ status: { capacity: room, allocatable: room } }));
  await cp.kubectl('create', 'namespace', 'knit-system');
  await cp.kubectl('apply', '-f', path.join(root, 'deploy/dra/rbac.yaml'), '-f', path.join(root, 'deploy/dra/deviceclasses.yaml'));
  // knit's own access: a TokenRequest token of the ServiceAccount deploy/dra binds, nothing more.
  knitKubeconfig = cp.kubeconfigFor(await cp.serviceAccountToken('knit-system', 'knit'));
  api = new KubeClient(loadKubeAccess({ kubeconfig: knitKubeconfig }), { userAgent: 'knit-dra-test' });
});

const sliceOpts = { driver: DRIVER, nodeName: NODE_NAME, attributeDomain: 'dra.net' };

async function waitFor<T>(what: string, fn: () => Promise<T | undefined>, ms = 60_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what} (scheduler log: ${cp.dir}/kube-scheduler.log)`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** This node's devices (simulated sysfs and PF) in knit's slice, and a driver reading claims from the API. */
async function simulatedNode(t: ExecutionContext, tag: string) {
  const node = await createSriovNode(t, { rdmaNetnsMode: 'Y' });
  await publishSlice(api, await scanInventory(node.kernel), sliceOpts);
  const net = new SimulatedNetlink();
  const dir = tempDir(t, `${P}${tag}`);
  const records = await RecordStore.open<ClaimRecord>(path.join(dir, 'claims'));
  const driver = new DraDriver({ driverName: DRIVER, nodeName: NODE_NAME, cdiDir: path.join(dir, 'cdi'), sysfs: node.kernel, claims: claimReader(api), records, runner: simulatedRunner(node, net) });
  return { node, net, dir, driver };
}

/** A claim (class, config) and a pod using it, pinned to the node by a selector: the scheduler allocates. */
async function claimAndPod(name: string, deviceClassName: string, parameters: object, selector?: string) {
  const objects = [
    { apiVersion: 'resource.k8s.io/v1', kind: 'ResourceClaim', metadata: { name, namespace: 'default' },
      spec: { devices: { requests: [{ name: 'nic', exactly: { deviceClassName, ...(selector ? { selectors: [{ cel: { expression: selector } }] } : {}) } }], config: [{ requests: ['nic'], opaque: { driver: DRIVER, parameters } }] } } },
    { apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: 'default' },
      spec: { nodeSelector: { 'kubernetes.io/hostname': NODE_NAME }, tolerations: [{ operator: 'Exists' }], resourceClaims: [{ name: 'nic', resourceClaimName: name }],
        containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10', resources: { claims: [{ name: 'nic' }] } }] } },
  ];
  await cp.kubectlInput(objects.map((o) => JSON.stringify(o)).join('\n'), 'create', '-f', '-');
  const claim = await waitFor(`claim ${name} allocated and reserved`, async () => {
    const c = await cp.getJson('get', 'resourceclaim', name, '-n', 'default');
    return c.status?.allocation && c.status?.reservedFor?.length ? c : undefined;
  });
  const pod = await cp.getJson('get', 'pod', name, '-n', 'default');
  return { claim, pod, ref: { namespace: 'default', name, uid: claim.metadata.uid as string } };
}

test.serial('knit publishes its devices as a ResourceSlice with deploy/dra\'s RBAC; an unchanged inventory writes nothing; the API server takes the DeviceClasses (simulated sysfs)', async (t) => {
  const node = await createSriovNode(t, { rdmaNetnsMode: 'Y' });
  const inv = await scanInventory(node.kernel);
  t.true(await publishSlice(api, inv, sliceOpts));
  t.false(await publishSlice(api, inv, sliceOpts), 'the same devices: no write');
  const slice = await cp.getJson('get', 'resourceslice', sliceName(sliceOpts));
  t.like(slice.spec, { driver: DRIVER, nodeName: NODE_NAME, pool: { name: NODE_NAME, generation: 1, resourceSliceCount: 1 } });
  t.deepEqual(slice.spec.devices.map((d: any) => d.name).sort(), inv.devices.map((d) => d.name).sort());
  t.deepEqual(slice.spec.devices.find((d: any) => d.name === 'pci-0000-3b-01-1').attributes['resource.kubernetes.io/pcieRoot'], { string: 'pci0000:3a' });
  // The inventory changes (a VF's driver rebound to vfio-pci, say): the slice follows, its pool's generation raised.
  await node.kernel.write(`bus/pci/devices/${NODE.vf(1)}/driver_override`, 'vfio-pci');
  await node.kernel.write('bus/pci/drivers/mlx5_core/unbind', NODE.vf(1));
  await node.kernel.write('bus/pci/drivers_probe', NODE.vf(1));
  t.true(await publishSlice(api, await scanInventory(node.kernel), sliceOpts));
  const updated = await cp.getJson('get', 'resourceslice', sliceName(sliceOpts));
  t.is(updated.spec.pool.generation, 2);
  const vf1 = updated.spec.devices.find((d: any) => d.name === 'pci-0000-3b-01-1').attributes;
  t.deepEqual(vf1['dra.net/driver'], { string: 'vfio-pci' });
  t.is(vf1['dra.net/ifName'], undefined, 'its netdev went with the host driver');
  const classes = await cp.getJson('get', 'deviceclasses');
  t.deepEqual(classes.items.map((c: any) => c.metadata.name).sort(), ['knit-netdev', 'knit-rdma', 'knit-vfio']);
});

test.serial('the scheduler allocates a knit-netdev claim against knit\'s slice; Prepare reads the stored claim, sets the PF side and answers the CDI ID; the KEP-4817 status lands; Unprepare after the pod and claim are deleted (simulated sysfs and PF)', async (t) => {
  const { node, net, dir, driver } = await simulatedNode(t, 'n');
  const sockets = kubeletSockets(path.join(dir, 'registry'), path.join(dir, 'plugins'), DRIVER);
  const server = await startKubeletServer({ sockets, driver });
  t.teardown(() => server.close(0));
  const kubelet = draClient(sockets.plugin, 'v1');
  t.teardown(() => kubelet.close());

  // The class takes a VF or a NIC without SR-IOV; a VLAN is set on a PF for a VF, so ask for one.
  const { claim, pod, ref } = await claimAndPod(`${P}web`, 'knit-netdev', { interfaceName: 'net1', vlan: 42, addresses: ['192.0.2.10/24'] }, '"isSriovVf" in device.attributes["dra.net"]');
  const [result] = claim.status.allocation.devices.results;
  t.like(result, { request: 'nic', driver: DRIVER, pool: NODE_NAME });
  const vf = NODE.vf(Number(result.device.slice(-1)));
  t.regex(result.device, /^pci-0000-3b-01-\d$/, 'a VF (not the PF, not the NVMe)');
  t.deepEqual(claim.status.reservedFor.map((r: any) => r.uid), [pod.metadata.uid]);

  const res = (await kubelet.prepare([ref])).claims[ref.uid]!;
  t.is(res.error, '');
  t.deepEqual(res.devices.map((d) => [d.pool_name, d.device_name]), [[NODE_NAME, result.device]]);
  t.like(net.vf(Number(vf.slice(-1))), { vlan: 42 });
  t.deepEqual(driver.claimsOfPod(pod.metadata.uid).prepared.map((c) => c.name), [ref.name]);

  const [record] = driver.claimsOfPod(pod.metadata.uid).prepared;
  await writeClaimStatus(api, DRIVER, record!, {
    sandboxId: 'sb', netnsPath: '/run/netns/x', runtime: 'runc', ips: [], routes: [],
    interfaces: [{ name: 'net1', kind: 'vf', handoff: { draDevice: { device: result.device, pool: NODE_NAME }, networkData: { interfaceName: 'net1', ips: ['192.0.2.10/24'], hardwareAddress: '02:00:00:00:00:01' } } as any }],
  });
  const status = (await cp.getJson('get', 'resourceclaim', ref.name, '-n', 'default')).status.devices;
  t.like(status[0], { driver: DRIVER, pool: NODE_NAME, device: result.device, networkData: { interfaceName: 'net1', ips: ['192.0.2.10/24'], hardwareAddress: '02:00:00:00:00:01' } });
  t.like(status[0].conditions[0], { type: 'Ready', status: 'True', reason: 'NetworkDeviceReady' });

  await cp.kubectl('delete', 'pod', ref.name, '-n', 'default', '--grace-period=0', '--force');
  await cp.kubectl('delete', 'resourceclaim', ref.name, '-n', 'default', '--wait=false');
  t.deepEqual((await kubelet.unprepare([ref])).claims, { [ref.uid]: { error: '' } });
  t.like(net.vf(Number(vf.slice(-1))), { vlan: 0 });
});

test.serial('knit-vfio claims: the scheduler picks VFs by the class CEL; Prepare binds a VF with a viable IOMMU group to vfio-pci with a CDI spec naming the group, and refuses one whose group is not viable, naming it (simulated sysfs and PF)', async (t) => {
  const { node, net, dir, driver } = await simulatedNode(t, 'v');
  const cdiDir = path.join(dir, 'cdi');
  const vfIndex = (i: number) => `device.attributes["dra.net"].vfIndex == ${i}`;

  const good = await claimAndPod(`${P}vm1`, 'knit-vfio', { mac: '02:00:00:00:aa:07' }, vfIndex(1));
  t.is(good.claim.status.allocation.devices.results[0].device, 'pci-0000-3b-01-1');
  const answer = (await driver.prepare([good.ref])).get(good.ref.uid)!;
  t.false('error' in answer, JSON.stringify(answer));
  t.is(await node.kernel.linkName(`bus/pci/devices/${NODE.vf(1)}/driver`), 'vfio-pci');
  t.like(net.vf(1), { mac: '02:00:00:00:aa:07' });
  const spec = JSON.parse(await fs.readFile(path.join(cdiDir, `${DRIVER}-${good.ref.uid}.json`), 'utf8'));
  t.deepEqual(spec.devices[0].containerEdits.deviceNodes.map((n: any) => n.path), [`/dev/vfio/${NODE.vfGroup(1)}`, '/dev/vfio/vfio']);

  // VF2 shares its IOMMU group with a port under mlx5_core: the slice says which group, not
  // whether it is viable, so the scheduler may hand it out and Prepare must refuse it.
  const bad = await claimAndPod(`${P}vm2`, 'knit-vfio', {}, vfIndex(2));
  const refused = (await driver.prepare([bad.ref])).get(bad.ref.uid)!;
  t.true('error' in refused);
  t.regex((refused as { error: string }).error, new RegExp(`^claim default/${P}vm2 \\(uid ${bad.ref.uid}\\): device pci-0000-3b-01-2: .*IOMMU group 43 of 0000:3b:01\\.2 is not viable for VFIO`));
  t.is(await node.kernel.linkName(`bus/pci/devices/${NODE.vf(2)}/driver`), 'mlx5_core');

  await driver.unprepare([good.ref, bad.ref]);
  t.is(await node.kernel.linkName(`bus/pci/devices/${NODE.vf(1)}/driver`), 'mlx5_core');
  for (const r of [good.ref, bad.ref]) await cp.kubectl('delete', 'pod', r.name, '-n', 'default', '--grace-period=0', '--force');
});

test.serial('knit serve with a dra block registers at the kubelet sockets it reports, publishes its slice with the kubeconfig it is given, and reads claims from the API; it takes the sockets away when it stops (simulated sysfs)', async (t) => {
  const node = await createSriovNode(t, { rdmaNetnsMode: 'Y' });
  const dir = tempDir(t, `${P}d`);
  const nodeName = `${P}node2`;
  const dra = {
    nodeName, kubeconfig: knitKubeconfig,
    registryDir: path.join(dir, 'plugins_registry'), pluginsDir: path.join(dir, 'plugins'), cdiDir: path.join(dir, 'cdi'),
  };
  const o: DaemonOptions = { prefix: `${P.slice(0, -1)}d`, subnet: '10.231.91.0/24', config: { sysfsRoot: node.root, dra } };
  const d = await startDaemon(o);
  t.teardown(() => cleanupDaemon(d, o));
  const sockets = kubeletSockets(dra.registryDir, dra.pluginsDir, DRIVER);
  const reg = registrationClient(sockets.registration);
  t.teardown(() => reg.close());
  t.like(await reg.getInfo(), { type: 'DRAPlugin', name: DRIVER, endpoint: sockets.plugin });
  await reg.notify(true);
  await eventually(() => d.logs.some((l) => l.includes('registered with the kubelet as a DRA plugin')), 'the registration logged');

  const slice = await cp.getJson('get', 'resourceslice', sliceName({ ...sliceOpts, nodeName }));
  t.is(slice.spec.nodeName, nodeName);
  const kubelet = draClient(sockets.plugin, 'v1beta1');
  t.teardown(() => kubelet.close());
  const ghost = { namespace: 'default', name: `${P}ghost`, uid: '00000000-0000-4000-8000-000000000000' };
  t.deepEqual((await kubelet.prepare([ghost])).claims, { [ghost.uid]: { devices: [], error: `claim default/${P}ghost (uid ${ghost.uid}): no such ResourceClaim in the API` } });

  await d.stop();
  t.false(existsSync(sockets.registration), 'the kubelet drops a plugin whose registration socket is gone');
  await removeSlice(api, { ...sliceOpts, nodeName });
});

test.serial('kill -9 of knit serve with a prepared claim, then a restart: the registration socket answers again, the kubelet\'s retry of the Prepare is answered from the record, and Unprepare and a new Prepare work (simulated sysfs)', async (t) => {
  const node = await createSriovNode(t, { rdmaNetnsMode: 'Y' });
  // VF 1 bound to vfio-pci beforehand: the simulated sysfs answers binds only for this process's writes.
  await node.kernel.write(`bus/pci/devices/${NODE.vf(1)}/driver_override`, 'vfio-pci');
  await node.kernel.write('bus/pci/drivers/mlx5_core/unbind', NODE.vf(1));
  await node.kernel.write('bus/pci/drivers_probe', NODE.vf(1));
  const dir = tempDir(t, `${P}k`);
  const dra = { nodeName: NODE_NAME, kubeconfig: knitKubeconfig, registryDir: path.join(dir, 'registry'), pluginsDir: path.join(dir, 'plugins'), cdiDir: path.join(dir, 'cdi') };
  const o: DaemonOptions = { prefix: `${P.slice(0, -1)}k`, subnet: '10.231.95.0/24', config: { sysfsRoot: node.root, dra } };
  let d = await startDaemon(o);
  t.teardown(() => cleanupDaemon(d, o));
  const sockets = kubeletSockets(dra.registryDir, dra.pluginsDir, DRIVER);
  const { ref } = await claimAndPod(`${P}rs`, 'knit-vfio', {}, 'device.attributes["dra.net"].vfIndex == 1');
  t.teardown(() => cp.kubectl('delete', 'pod', ref.name, '-n', 'default', '--grace-period=0', '--force', '--ignore-not-found').then(() => undefined, () => undefined));
  let kubelet = draClient(sockets.plugin, 'v1');
  const first = (await kubelet.prepare([ref])).claims[ref.uid]!;
  kubelet.close();
  t.is(first.error, '');

  const gone = d.exited;
  d.child.kill('SIGKILL');
  t.is((await gone).signal, 'SIGKILL');
  d = await d.restart();
  const reg = registrationClient(sockets.registration);
  t.teardown(() => reg.close());
  t.like(await reg.getInfo(), { type: 'DRAPlugin', name: DRIVER, endpoint: sockets.plugin });
  kubelet = draClient(sockets.plugin, 'v1');
  t.teardown(() => kubelet.close());
  t.deepEqual((await kubelet.prepare([ref])).claims[ref.uid], first, 'the retry is answered from the record: the same devices and CDI IDs');
  t.deepEqual((await kubelet.unprepare([ref])).claims, { [ref.uid]: { error: '' } });
  t.false(existsSync(path.join(dra.cdiDir, `${DRIVER}-${ref.uid}.json`)), 'its CDI spec is gone');
  t.deepEqual((await kubelet.prepare([ref])).claims[ref.uid], first, 'prepared afresh from the API');
  t.deepEqual((await kubelet.unprepare([ref])).claims, { [ref.uid]: { error: '' } });
});

test.serial('KEP-4817 status through knit serve: an attach of the pod writes Ready True with its networkData; when the device leaves the pod (Detach) knit\'s entry goes and another driver\'s entry and the allocation stay; a device knit itself took back (its pod\'s netns gone) loses its entry at Unprepare (stand-in hardware: veth as VF netdev, simulated sysfs)', async (t) => {
  t.timeout(240_000);
  const nodeName = `${P}node3`;
  const GPU = 'gpu.example.com';
  await createNode(cp, nodeName, { internalIPs: ['10.99.1.3'], waitPodCidr: false });
  const room = { pods: '110', cpu: '4', memory: '8Gi' };
  await cp.kubectl('patch', 'node', nodeName, '--subresource=status', '--type=merge', '-p', JSON.stringify({ status: { capacity: room, allocatable: room } }));
  // Another driver's device on the node, so a claim has a result (and a status entry) knit does not own.
  const gpuObjects = [
    { apiVersion: 'resource.k8s.io/v1', kind: 'DeviceClass', metadata: { name: `${P}gpu` }, spec: { selectors: [{ cel: { expression: `device.driver == "${GPU}"` } }] } },
    { apiVersion: 'resource.k8s.io/v1', kind: 'ResourceSlice', metadata: { name: `${P}gpu` }, spec: { driver: GPU, nodeName, pool: { name: nodeName, generation: 1, resourceSliceCount: 1 }, devices: [{ name: 'gpu-0' }, { name: 'gpu-1' }] } },
  ];
  await cp.kubectlInput(gpuObjects.map((o) => JSON.stringify(o)).join('\n'), 'create', '-f', '-');
  t.teardown(async () => {
    await cp.kubectl('delete', 'resourceslice', `${P}gpu`, '--ignore-not-found').catch(() => undefined);
    await cp.kubectl('delete', 'deviceclass', `${P}gpu`, '--ignore-not-found').catch(() => undefined);
  });

  // VF 0: a netdev claim (runc pod); VF 1: a vfio claim (KubeVirt pod), bound to vfio-pci
  // beforehand: the simulated sysfs answers binds only for this process's writes.
  const s = await makeStandIn(t, `${P}s`, 2);
  execFileSync('ip', ['-n', s.fabric, 'addr', 'add', '192.0.2.1/24', 'dev', s.vfs[0]!.peer]);
  await s.node.kernel.write(`bus/pci/devices/${s.vfs[1]!.bdf}/driver_override`, 'vfio-pci');
  await s.node.kernel.write('bus/pci/drivers/iavf/unbind', s.vfs[1]!.bdf);
  await s.node.kernel.write('bus/pci/drivers_probe', s.vfs[1]!.bdf);
  const dir = tempDir(t, `${P}st`);
  const dra = { nodeName, kubeconfig: knitKubeconfig, registryDir: path.join(dir, 'registry'), pluginsDir: path.join(dir, 'plugins'), cdiDir: path.join(dir, 'cdi') };
  const o: DaemonOptions = { prefix: `${P.slice(0, -1)}t`, subnet: '10.231.92.0/24', config: { sysfsRoot: s.node.root, goneNetnsSweepSeconds: 1, dra } };
  const d = await startDaemon(o);
  t.teardown(() => cleanupDaemon(d, o));
  t.teardown(() => removeSlice(api, { ...sliceOpts, nodeName }).catch(() => undefined));
  const kubelet = draClient(kubeletSockets(dra.registryDir, dra.pluginsDir, DRIVER).plugin, 'v1');
  t.teardown(() => kubelet.close());

  const vfIndex = (i: number) => `device.attributes["dra.net"].vfIndex == ${i}`;
  const claimed = async (name: string, className: string, vf: number, parameters: object) => {
    const objects = [
      { apiVersion: 'resource.k8s.io/v1', kind: 'ResourceClaim', metadata: { name, namespace: 'default' }, spec: { devices: {
        requests: [{ name: 'gpu', exactly: { deviceClassName: `${P}gpu` } }, { name: 'nic', exactly: { deviceClassName: className, selectors: [{ cel: { expression: vfIndex(vf) } }] } }],
        config: [{ requests: ['nic'], opaque: { driver: DRIVER, parameters } }],
      } } },
      { apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: 'default' },
        spec: { nodeSelector: { 'kubernetes.io/hostname': nodeName }, tolerations: [{ operator: 'Exists' }], resourceClaims: [{ name: 'c', resourceClaimName: name }],
          containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10', resources: { claims: [{ name: 'c' }] } }] } },
    ];
    await cp.kubectlInput(objects.map((x) => JSON.stringify(x)).join('\n'), 'create', '-f', '-');
    t.teardown(async () => {
      await cp.kubectl('delete', 'pod', name, '-n', 'default', '--grace-period=0', '--force', '--ignore-not-found').catch(() => undefined);
      await cp.kubectl('delete', 'resourceclaim', name, '-n', 'default', '--ignore-not-found', '--wait=false').catch(() => undefined);
    });
    const claim = await waitFor(`claim ${name} allocated and reserved`, async () => {
      const c = await cp.getJson('get', 'resourceclaim', name, '-n', 'default');
      return c.status?.allocation && c.status?.reservedFor?.length ? c : undefined;
    });
    // The other driver reports its device, as its own field manager.
    const gpuDevice = claim.status.allocation.devices.results.find((r: any) => r.driver === GPU).device;
    const gpuStatus = { apiVersion: 'resource.k8s.io/v1', kind: 'ResourceClaim', metadata: { name, namespace: 'default' }, status: { devices: [{
      driver: GPU, pool: nodeName, device: gpuDevice, conditions: [{ type: 'Ready', status: 'True', reason: 'GpuReady', message: '', lastTransitionTime: '2026-01-01T00:00:00Z' }],
    }] } };
    await cp.kubectlInput(JSON.stringify(gpuStatus), 'apply', '--server-side', `--field-manager=${GPU}`, '--subresource=status', '-f', '-');
    const ref = { namespace: 'default', name, uid: claim.metadata.uid as string };
    t.is((await kubelet.prepare([ref])).claims[ref.uid]!.error, '');
    return { ref, podUid: (await cp.getJson('get', 'pod', name, '-n', 'default')).metadata.uid as string };
  };
  const statusOf = async (name: string) => {
    const c = await cp.getJson('get', 'resourceclaim', name, '-n', 'default');
    return { allocated: Boolean(c.status?.allocation), devices: (c.status?.devices ?? []) as any[] };
  };
  const knitEntry = async (name: string) => (await statusOf(name)).devices.find((x) => x.driver === DRIVER);

  // Detach: the netdev claim's entry goes, the GPU's stays, the claim is still allocated.
  const web = await claimed(`${P}web`, 'knit-netdev', 0, { interfaceName: 'net1', addresses: ['192.0.2.10/24'] });
  const webNs = `${P}webns`;
  const webPath = makeNetns(webNs);
  t.teardown(() => removeNetns(webNs));
  await d.call('Attach', runcAttachReq(`${P}web`, webPath, { podName: web.ref.name, extra: { pod_uid: web.podUid } }));
  const ready = await waitFor('knit\'s status entry', () => knitEntry(web.ref.name), 30_000);
  t.like(ready, { pool: nodeName, device: 'pci-0000-5a-02-0', networkData: { interfaceName: 'net1', ips: ['192.0.2.10/24'] } });
  t.like(ready.conditions[0], { type: 'Ready', status: 'True', reason: 'NetworkDeviceReady' });
  await d.call('Detach', { sandbox_id: `${P}web` });
  await waitFor('knit\'s entry gone after the Detach', async () => ((await knitEntry(web.ref.name)) ? undefined : true), 30_000);
  const afterDetach = await statusOf(web.ref.name);
  t.true(afterDetach.allocated, 'the claim is still allocated: the API server did not drop it');
  t.deepEqual(afterDetach.devices.map((x) => x.driver), [GPU], 'the other driver\'s entry stays');
  t.is((await kubelet.unprepare([web.ref])).claims[web.ref.uid]!.error, '');

  // knit detaches a sandbox whose netns is gone by itself (no Detach came): the entry stays
  // until the kubelet's Unprepare, which takes it away.
  const vm = await claimed(`${P}vm`, 'knit-vfio', 1, { addresses: ['192.0.2.30/24'] });
  const vmNs = `${P}vmns`;
  const vmPath = makeNetns(vmNs);
  t.teardown(() => removeNetns(vmNs));
  await d.call('Attach', runcAttachReq(`${P}vm`, vmPath, { podName: vm.ref.name, extra: { pod_uid: vm.podUid, runtime: 'KUBEVIRT' } }));
  t.like((await waitFor('knit\'s status entry for the VM', () => knitEntry(vm.ref.name), 30_000)).conditions[0], { type: 'Ready', status: 'True', reason: 'VfioDeviceReady' });
  removeNetns(vmNs);
  await waitFor('the gone-netns sweep detaching the VM pod', async () => (((await d.call('List', {})).sandboxes ?? []).length === 0 ? true : undefined), 30_000);
  t.truthy(await knitEntry(vm.ref.name), 'still there after knit\'s own detach: what follows shows the Unprepare takes it away');
  t.is((await kubelet.unprepare([vm.ref])).claims[vm.ref.uid]!.error, '');
  await waitFor('knit\'s entry gone after the Unprepare', async () => ((await knitEntry(vm.ref.name)) ? undefined : true), 30_000);
  const afterUnprepare = await statusOf(vm.ref.name);
  t.true(afterUnprepare.allocated);
  t.deepEqual(afterUnprepare.devices.map((x) => x.driver), [GPU]);
});

test.serial('uninstall: knit removes its ResourceSlice with its own ServiceAccount', async (t) => {
  await removeSlice(api, sliceOpts);
  const left = await cp.getJson('get', 'resourceslices', '--field-selector', `spec.driver=${DRIVER}`);
  t.deepEqual(left.items, []);
});
