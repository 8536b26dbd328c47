// knit's DRA driver through the kubelet's two sockets, driven by a kubelet-side client built
// from the test's own copies of the published kubelet protos (both DRAPlugin versions). No
// SR-IOV, IOMMU or RDMA hardware here: the PCI side is a simulated sysfs that answers driver
// binds as the kernel does, the PF's VF table a simulated rtnetlink (test/fixtures/dra-node.ts).
// Claims are the JSON kube-apiserver answers, handed to the driver through its ClaimReader port.
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { RecordStore } from '../../src/store/index.js';
import { DraDriver, type ClaimStore } from '../../src/dra/driver.js';
import { kubeletSockets, startKubeletServer } from '../../src/dra/kubelet-server.js';
import type { ClaimRecord } from '../../src/dra/claim-record.js';
import { KnitError } from '../../src/base/errors.js';
import { withPodDevices } from '../../src/dra/attach.js';
import { cdiSpec } from '../../src/dra/cdi.js';
import { DRA_INTERFACES_LABEL } from '../../src/dra/labels.js';
import type { AttachRequest } from '../../src/base/types.js';
import { createFakeSysfs, createSriovNode, NODE, SimulatedCrash, sriovNodeSpecs, type FakeSysfs } from '../fixtures/fake-sysfs.js';
import { ClaimsInApi, DRIVER, POOL, SimulatedNetlink, resourceClaim, simulatedRunner, tempDir, type ClaimSpec } from '../fixtures/dra-node.js';
import { draClient, kubeletPick, registrationClient, type DraVersion, type WireClaim } from '../fixtures/kubelet-client.js';

interface Env {
  node: FakeSysfs;
  net: SimulatedNetlink;
  api: ClaimsInApi;
  dir: string;
  cdiDir: string;
  sockets: { registration: string; plugin: string };
  registrations: [boolean, string][];
  driver: DraDriver;
  kubelet(version?: DraVersion): ReturnType<typeof draClient>;
  claim(c: ClaimSpec): WireClaim;
  /** A new daemon process on the same records, sysfs and PF (after a kill -9). */
  restart(): Promise<DraDriver>;
}

const UID = (n: number) => `0c1a1b2c-0000-4000-8000-00000000000${n}`;
const POD = '7f1d2c3b-aaaa-4bbb-8ccc-000000000001';
const vfDevice = (i: number) => `pci-0000-3b-01-${i}`;

async function setUp(t: ExecutionContext, prefix: string, nodeOpts: { vfioLoaded?: boolean } = {}): Promise<Env> {
  const node = await createSriovNode(t, { rdmaNetnsMode: 'Y', ...nodeOpts });
  const net = new SimulatedNetlink();
  const dir = tempDir(t, prefix);
  const cdiDir = path.join(dir, 'cdi');
  const api = new ClaimsInApi();
  const open = async () => {
    const store = await RecordStore.open<ClaimRecord>(path.join(dir, 'claims'));
    // A dead process writes no record either.
    const records: ClaimStore = {
      get: (id) => store.get(id),
      ids: () => store.ids(),
      put: (id, doc) => (net.dead ? Promise.reject(new Error('dead')) : store.put(id, doc)),
      remove: (id) => (net.dead ? Promise.reject(new Error('dead')) : store.remove(id)),
    };
    return new DraDriver({ driverName: DRIVER, nodeName: POOL, cdiDir, sysfs: node.kernel, claims: api, records, runner: simulatedRunner(node, net) });
  };
  const driver = await open();
  const sockets = kubeletSockets(path.join(dir, 'plugins_registry'), path.join(dir, 'plugins'), DRIVER);
  const registrations: [boolean, string][] = [];
  const server = await startKubeletServer({ sockets, driver, onRegistration: (r, e) => registrations.push([r, e]) });
  t.teardown(() => server.close(0));
  const env: Env = {
    node, net, api, dir, cdiDir, sockets, registrations, driver,
    kubelet(version = 'v1') {
      const c = draClient(sockets.plugin, version);
      t.teardown(() => c.close());
      return c;
    },
    claim: (c) => api.add(resourceClaim({ podUid: POD, ...c })),
    async restart() {
      node.kernel.restartDaemon();
      net.dead = false;
      return open();
    },
  };
  return env;
}

const cdiSpecOf = async (env: Env, uid: string) => JSON.parse(await fs.readFile(path.join(env.cdiDir, `${DRIVER}-${uid}.json`), 'utf8'));
const driverOf = (env: Env, bdf: string) => env.node.kernel.linkName(`bus/pci/devices/${bdf}/driver`);
const cdiFiles = async (env: Env) => fs.readdir(env.cdiDir).catch(() => []);

test('registration: GetInfo answers a DRAPlugin with the driver name, the plugin socket and both DRAPlugin versions; NotifyRegistrationStatus reaches knit', async (t) => {
  const env = await setUp(t, 'kdra1');
  const reg = registrationClient(env.sockets.registration);
  t.teardown(() => reg.close());
  const info = await reg.getInfo();
  t.deepEqual(info, { type: 'DRAPlugin', name: DRIVER, endpoint: env.sockets.plugin, supported_versions: ['v1.DRAPlugin', 'v1beta1.DRAPlugin'] });
  t.is(kubeletPick(info), 'v1', 'a 1.34+ kubelet picks v1');
  t.true(env.sockets.registration.endsWith(`/plugins_registry/${DRIVER}-reg.sock`));
  t.true(env.sockets.plugin.endsWith(`/plugins/${DRIVER}/dra.sock`));
  for (const s of [env.sockets.registration, env.sockets.plugin]) t.is((await fs.stat(s)).mode & 0o777, 0o600, `${s} is for root only`);
  await reg.notify(true);
  await reg.notify(false, 'version not supported');
  t.deepEqual(env.registrations, [[true, ''], [false, 'version not supported']]);
});

test('netdev claim (v1): the PF-side VF settings are set at Prepare, the RDMA char devices go into a CDI spec, and the answer carries its ID; a v1beta1 retry answers the same and changes nothing (simulated sysfs and PF)', async (t) => {
  const env = await setUp(t, 'kdra2');
  const ref = env.claim({ name: 'rdma-nic', uid: UID(1), results: [{ device: vfDevice(0) }], config: [
    { source: 'FromClass', parameters: { spoofchk: false } },
    { parameters: { interfaceName: 'rdma0', vlan: 100, trust: true, mac: '02:00:00:00:aa:01', addresses: ['192.0.2.10/24'] } },
  ] });
  const vfBefore = { ...env.net.vf(0) };

  const res = await env.kubelet('v1').prepare([ref]);
  const cdiId = `${DRIVER}/net=${UID(1)}-${vfDevice(0)}`;
  t.deepEqual(res.claims, { [UID(1)]: { devices: [{ request_names: ['nic'], pool_name: POOL, device_name: vfDevice(0), cdi_device_ids: [cdiId] }], error: '' } });
  // The observer: the PF's VF table and the CDI spec on disk.
  t.like(env.net.vf(0), { vlan: 100, qos: 0, spoofchk: false, trust: true, mac: '02:00:00:00:aa:01' });
  t.deepEqual(await cdiSpecOf(env, UID(1)), {
    cdiVersion: '0.5.0', kind: `${DRIVER}/net`,
    devices: [{ name: `${UID(1)}-${vfDevice(0)}`, containerEdits: { deviceNodes: [{ path: '/dev/infiniband/uverbs2' }, { path: '/dev/infiniband/rdma_cm' }] } }],
  });
  t.is(await driverOf(env, NODE.vf(0)), 'mlx5_core', 'netdev mode leaves the driver alone');

  const changes = env.net.changes.length;
  const reads = env.api.reads;
  t.deepEqual((await env.kubelet('v1beta1').prepare([ref])).claims, res.claims);
  t.is(env.net.changes.length, changes, 'a retry changes nothing');
  t.is(env.api.reads, reads, 'a prepared claim is answered from knit\'s record');

  await env.kubelet('v1beta1').unprepare([ref]);
  t.deepEqual(env.net.vf(0), vfBefore, 'the PF side is as before');
  t.deepEqual(await cdiFiles(env), []);
  t.deepEqual([...env.driver.claimsOfPod(POD).prepared], []);
});

test('vfio claim for a VM: Prepare binds the VF to vfio-pci and the CDI spec names /dev/vfio/<group> and /dev/vfio/vfio; Unprepare after the claim is gone from the API rebinds its driver and gives sysfs back exactly (simulated sysfs and PF)', async (t) => {
  const env = await setUp(t, 'kdra3');
  const before = await env.node.snapshot();
  const ref = env.claim({ name: 'vm-nic', uid: UID(2), results: [{ request: 'vf', device: vfDevice(1) }], config: [{ parameters: { mode: 'vfio', mac: '02:00:00:00:aa:02', vlan: 20 } }] });

  const res = await env.kubelet().prepare([ref]);
  t.is(res.claims[UID(2)]!.error, '');
  t.deepEqual(res.claims[UID(2)]!.devices[0]!.cdi_device_ids, [`${DRIVER}/net=${UID(2)}-${vfDevice(1)}`]);
  t.is(await driverOf(env, NODE.vf(1)), 'vfio-pci');
  t.deepEqual(await env.node.kernel.list(`bus/pci/devices/${NODE.vf(1)}/net`), [], 'its netdev left with the host driver');
  t.like(env.net.vf(1), { mac: '02:00:00:00:aa:02', vlan: 20 });
  t.deepEqual((await cdiSpecOf(env, UID(2))).devices[0].containerEdits.deviceNodes, [{ path: `/dev/vfio/${NODE.vfGroup(1)}` }, { path: '/dev/vfio/vfio' }]);

  env.api.claims.clear(); // deleted before the kubelet unprepared it
  const un = await env.kubelet().unprepare([ref]);
  t.deepEqual(un.claims, { [UID(2)]: { error: '' } });
  t.is(await driverOf(env, NODE.vf(1)), 'mlx5_core');
  t.deepEqual(await env.node.snapshot(), before);
  t.like(env.net.vf(1), { mac: '00:00:00:00:00:00', vlan: 0 });
  t.deepEqual(await cdiFiles(env), []);
  t.deepEqual((await env.kubelet('v1beta1').unprepare([ref])).claims, { [UID(2)]: { error: '' } }, 'Unprepare again: nothing left to do');
});

test('one claim\'s failure is that claim\'s error, naming claim, device and cause, and changes nothing; the others of the request are prepared (simulated sysfs and PF)', async (t) => {
  const env = await setUp(t, 'kdra4');
  const before = await env.node.snapshot();
  const good = env.claim({ name: 'good', uid: UID(1), results: [{ device: vfDevice(0) }] });
  const ghost = { namespace: 'default', name: 'ghost', uid: UID(2) };
  const elsewhere = env.claim({ name: 'elsewhere', uid: UID(3), results: [{ device: vfDevice(1), pool: 'node-b' }] });
  const badConfig = env.claim({ name: 'bad-config', uid: UID(4), results: [{ device: vfDevice(1) }], config: [{ parameters: { vlan: 5, routes: [{ dst: '198.51.100.0/24', gw: 'not-an-ip' }] } }] });
  const notViable = env.claim({ name: 'not-viable', uid: UID(5), results: [{ device: vfDevice(2) }], config: [{ parameters: { mode: 'vfio', vlan: 7 } }] });
  const unreserved = api(env).add(resourceClaim({ name: 'unreserved', uid: UID(6), results: [{ device: vfDevice(1) }] }));
  const otherDriver = env.claim({ name: 'gpu-only', uid: UID(7), results: [{ device: 'gpu-0', driver: 'gpu.example.com' }] });
  const wrongUid = { ...env.claim({ name: 'recreated', uid: UID(8), results: [{ device: vfDevice(1) }] }), uid: UID(9) };

  const res = (await env.kubelet().prepare([good, ghost, elsewhere, badConfig, notViable, unreserved, otherDriver, wrongUid])).claims;
  t.is(res[UID(1)]!.error, '');
  t.is(res[UID(2)]!.error, `claim default/ghost (uid ${UID(2)}): no such ResourceClaim in the API`);
  t.is(res[UID(3)]!.error, `claim default/elsewhere (uid ${UID(3)}): device ${vfDevice(1)}: status.allocation.devices.results[0].pool: "node-b" is not this node's pool "${POOL}": the claim was allocated to another node`);
  t.is(res[UID(4)]!.error, `claim default/bad-config (uid ${UID(4)}): status.allocation.devices.config[0].opaque.parameters.routes[0].gw: "not-an-ip" is not an IP address`);
  t.regex(res[UID(5)]!.error, new RegExp(`^claim default/not-viable \\(uid ${UID(5)}\\): device ${vfDevice(2)}: .*IOMMU group ${NODE.vfGroup(2)} of ${NODE.vf(2).replace('.', '\\.')} is not viable for VFIO: ${NODE.port2.replace('.', '\\.')} \\(bound to mlx5_core\\)`));
  t.regex(res[UID(6)]!.error, /ResourceClaim default\/unreserved is reserved for no pod/);
  t.deepEqual(res[UID(7)], { devices: [], error: '' }, 'a claim with no result of this driver has nothing to prepare here');
  t.regex(res[UID(9)]!.error, new RegExp(`has UID ${UID(8)}, not ${UID(9)} as the kubelet asked`));
  for (const uid of [UID(2), UID(3), UID(4), UID(5), UID(6), UID(9)]) t.deepEqual(res[uid]!.devices, []);

  t.deepEqual(env.net.changes, [], 'nothing on the PF changed for the refused claims (and the good one asked for nothing)');
  t.deepEqual(await env.node.snapshot(), before);
  t.is(await driverOf(env, NODE.vf(2)), 'mlx5_core');
});

test('a refusal names the field its value came from: the allocation result (counting other drivers\' results) for the device and what this node finds of it, the config entry for a parameter; a driver the node lacks is said of the node (simulated sysfs and PF)', async (t) => {
  const env = await setUp(t, 'kdra9', { vfioLoaded: false });
  const gpu = { request: 'gpu', device: 'gpu-0', driver: 'gpu.example.com' };
  env.net.addrs.set(NODE.vfNetdev(0), [{ index: 10, family: 4, address: '10.1.1.1', prefixLen: 24, scope: 'global', flags: [] }]);
  env.net.links.set('ens1f1', { index: 5, name: 'ens1f1', mtu: 1500, up: true, lowerUp: true, operstate: 'up', group: 0, mac: '0c:42:a1:00:00:01' });
  const absent = env.claim({ name: 'absent', uid: UID(1), results: [gpu, { device: 'pci-0000-3b-09-0' }], config: [{ parameters: { interfaceName: 'net1' } }] });
  const hostUses = env.claim({ name: 'host-uses', uid: UID(2), results: [gpu, gpu, { device: vfDevice(0) }], config: [{ requests: ['nic'], parameters: { vlan: 3 } }] });
  const noVfio = env.claim({ name: 'no-vfio', uid: UID(3), results: [{ device: vfDevice(1) }], config: [
    { source: 'FromClass', parameters: { spoofchk: false } },
    { source: 'FromClaim', requests: ['gpu'], parameters: { mtu: 1400 } },
    { source: 'FromClaim', parameters: { mode: 'vfio' } },
  ] });
  const pfSettingsOnPort = env.claim({ name: 'port-vlan', uid: UID(4), results: [{ device: 'pci-0000-3b-00-1' }], config: [
    { source: 'FromClass', parameters: { mtu: 1500 } },
    { source: 'FromClaim', parameters: { interface: { name: 'eth1' } } },
    { source: 'FromClaim', parameters: { vlan: 7 } },
  ] });
  const res = (await env.kubelet().prepare([absent, hostUses, noVfio, pfSettingsOnPort])).claims;
  t.is(res[UID(1)]!.error, `claim default/absent (uid ${UID(1)}): device pci-0000-3b-09-0: status.allocation.devices.results[1].device: DRA device "pci-0000-3b-09-0" (PCI 0000:3b:09.0) in pool "${POOL}" does not exist on this node`);
  t.is(res[UID(2)]!.error, `claim default/host-uses (uid ${UID(2)}): device ${vfDevice(0)}: status.allocation.devices.results[2].device: ${NODE.vfNetdev(0)} (${NODE.vf(0)}) has address 10.1.1.1/24 in the host; knit does not take devices the host uses`);
  t.is(res[UID(3)]!.error, `claim default/no-vfio (uid ${UID(3)}): device ${vfDevice(1)}: the vfio-pci driver is not loaded on this node (no ${env.node.root}/bus/pci/drivers/vfio-pci); status.allocation.devices.config[2].opaque.parameters.mode "vfio" binds ${NODE.vf(1)} to it: modprobe vfio-pci`);
  t.is(res[UID(4)]!.error, `claim default/port-vlan (uid ${UID(4)}): device pci-0000-3b-00-1: status.allocation.devices.config[2].opaque.parameters.vlan: PF-side settings (mac, vlan, qos, spoofchk, trust, rates, linkState) need an SR-IOV VF; ${NODE.port2} is a NIC without SR-IOV`);
  t.deepEqual(env.net.changes, [], 'nothing changed for any of them');
  t.deepEqual(await cdiFiles(env), []);
});

function api(env: Env) {
  return env.api;
}

test('a device another claim holds is refused naming that claim; the kubelet\'s request with a missing field is INVALID_ARGUMENT naming it (simulated sysfs and PF)', async (t) => {
  const env = await setUp(t, 'kdra5');
  const first = env.claim({ name: 'first', uid: UID(1), results: [{ device: vfDevice(0) }] });
  const second = env.claim({ name: 'second', uid: UID(2), results: [{ device: vfDevice(0) }] });
  t.is((await env.kubelet().prepare([first])).claims[UID(1)]!.error, '');
  t.is((await env.kubelet().prepare([second])).claims[UID(2)]!.error, `claim default/second (uid ${UID(2)}): device ${vfDevice(0)}: it is prepared for claim default/first (uid ${UID(1)})`);
  // Two claims for one device in one request (prepared at once): one gets it, the other is refused.
  const a = env.claim({ name: 'a', uid: UID(3), results: [{ device: vfDevice(1) }] });
  const b = env.claim({ name: 'b', uid: UID(4), results: [{ device: vfDevice(1) }] });
  const both = (await env.kubelet().prepare([a, b])).claims;
  t.deepEqual([both[UID(3)]!.error, both[UID(4)]!.error].filter((e) => e === '').length, 1, JSON.stringify(both));
  t.regex(both[UID(3)]!.error + both[UID(4)]!.error, new RegExp(`device ${vfDevice(1)}: (it is prepared for claim default/[ab]|claim uid \\S+ is being prepared with it right now)`));
  const err = await t.throwsAsync(env.kubelet().prepare([{ namespace: 'default', name: 'x', uid: '' }]));
  t.is((err as { code?: number }).code, 3 /* INVALID_ARGUMENT */);
  t.regex(err!.message, /claims\[0\]\.uid: is required/);
});

test('dranet\'s opaque config (interface, routes) is read as knit\'s parameters; what knit does not do is refused naming the field (simulated sysfs and PF)', async (t) => {
  const env = await setUp(t, 'kdra6');
  const dranet = env.claim({ name: 'dranet-style', uid: UID(1), results: [{ device: vfDevice(0) }], config: [{ parameters: {
    interface: { name: 'eth1', addresses: ['192.0.2.20/24'], mtu: 1400, hardwareAddr: '02:00:00:00:bb:01' },
    routes: [{ destination: '198.51.100.0/24', gateway: '192.0.2.1' }],
  } }] });
  const dhcp = env.claim({ name: 'dhcp', uid: UID(2), results: [{ device: vfDevice(1) }], config: [{ parameters: { interface: { name: 'eth1', dhcp: true } } }] });
  const res = (await env.kubelet().prepare([dranet, dhcp])).claims;
  t.is(res[UID(1)]!.error, '');
  t.like(env.driver.claimsOfPod(POD).prepared[0]!.devices[0]!.parameters, {
    interfaceName: 'eth1', addresses: ['192.0.2.20/24'], mtu: 1400, mac: '02:00:00:00:bb:01', routes: [{ dst: '198.51.100.0/24', gw: '192.0.2.1' }],
  });
  t.is(res[UID(2)]!.error, `claim default/dhcp (uid ${UID(2)}): status.allocation.devices.config[0].opaque.parameters.interface.dhcp: dranet's interface.dhcp is not supported by knit`);
});

test('kill -9 in the middle of a vfio Prepare: the next start rolls it back from the journal (PF side, driver, CDI spec), and the kubelet\'s retry prepares it whole (simulated sysfs and PF)', async (t) => {
  const env = await setUp(t, 'kdra7');
  const before = await env.node.snapshot();
  const vfBefore = { ...env.net.vf(1) };
  const ref = env.claim({ name: 'vm-nic', uid: UID(1), results: [{ device: vfDevice(1) }], config: [{ parameters: { mode: 'vfio', vlan: 30 } }] });
  // Dies after unbinding the host driver, before the probe that binds vfio-pci.
  env.node.kernel.crashBefore = (file) => file === 'bus/pci/drivers_probe';
  const res = (await env.kubelet().prepare([ref])).claims[UID(1)]!;
  t.regex(res.error, /bind 0000:3b:01\.1 to vfio-pci .*daemon crashed before writing bus\/pci\/drivers_probe/);
  t.is(await driverOf(env, NODE.vf(1)), undefined, 'the crash left the VF unbound');
  t.like(env.net.vf(1), { vlan: 30 }, 'and its PF side changed');

  const next = await env.restart();
  t.deepEqual(await next.recover(), { rolledBack: ['default/vm-nic'], finished: [], failed: [] });
  t.is(await driverOf(env, NODE.vf(1)), 'mlx5_core');
  t.deepEqual(await env.node.snapshot(), before);
  t.deepEqual(env.net.vf(1), vfBefore);
  // The kubelet never got an answer and will ask again; until then the pod's attach must wait.
  t.deepEqual(next.claimsOfPod(POD).pending.map((c) => [c.name, c.state]), [['vm-nic', 'interrupted']]);
  t.deepEqual(await next.recover(), { rolledBack: [], finished: [], failed: [] }, 'a second start has nothing more to repair');

  const again = (await next.prepare([ref])).get(UID(1))!;
  t.false('error' in again, JSON.stringify(again));
  t.is(await driverOf(env, NODE.vf(1)), 'vfio-pci');
  t.deepEqual(next.claimsOfPod(POD).prepared.map((c) => c.name), ['vm-nic']);
});

test('a claim with nothing to change (a VF netdev without PF settings or char devices) is recorded once, as prepared; kill -9 after that write, before the answer: the next start keeps it, the kubelet\'s retry is answered from the record, Unprepare drops it (simulated sysfs and PF)', async (t) => {
  // VF 0 without an RDMA device: no CDI spec either.
  const node = await createFakeSysfs(t, sriovNodeSpecs(1).map((d) => (d.bdf === NODE.vf(0) ? { ...d, rdma: undefined } : d)), { rdmaNetnsMode: 'Y' });
  const net = new SimulatedNetlink();
  const api = new ClaimsInApi();
  const dir = tempDir(t, 'kdrab');
  const written: string[] = [];
  const driverOn = async (failpoint?: { index: number; fire(): void }) => {
    const store = await RecordStore.open<ClaimRecord>(path.join(dir, 'claims'));
    const records: ClaimStore = {
      get: (id) => store.get(id),
      ids: () => store.ids(),
      put: (id, doc) => (written.push(doc.state), store.put(id, doc)),
      remove: (id) => store.remove(id),
    };
    return new DraDriver({ driverName: DRIVER, nodeName: POOL, cdiDir: path.join(dir, 'cdi'), sysfs: node.kernel, claims: api, records, runner: simulatedRunner(node, net), ...(failpoint && { prepareFailpoint: failpoint }) });
  };
  const ref = api.add(resourceClaim({ name: 'plain-nic', uid: UID(1), podUid: POD, results: [{ device: vfDevice(0) }], config: [{ parameters: { interfaceName: 'net1' } }] }));

  // KNIT_FAILPOINT=draprepare:0 kills the daemon there; here the "kill" ends the Prepare unanswered.
  const dying = await driverOn({ index: 0, fire: () => { throw new SimulatedCrash('killed after the record, before the answer'); } });
  const res = (await dying.prepare([ref])).get(UID(1))!;
  t.regex('error' in res ? res.error : '', /killed after the record/);
  t.deepEqual(written, ['prepared'], 'one write, and no journal entry before it');
  t.deepEqual(net.changes, [], 'nothing changed in the kernel');

  const next = await driverOn();
  t.deepEqual(await next.recover(), { rolledBack: [], finished: [], failed: [] }, 'nothing to repair');
  t.deepEqual(next.claimsOfPod(POD).prepared.map((c) => c.name), ['plain-nic'], 'the pod\'s attach finds its device');
  const reads = api.reads;
  const again = (await next.prepare([ref])).get(UID(1))!;
  t.deepEqual(again, { devices: [{ requestNames: ['nic'], poolName: POOL, deviceName: vfDevice(0), cdiDeviceIds: [] }] });
  t.is(api.reads, reads, 'answered from the record');
  t.deepEqual(written, ['prepared']);
  t.deepEqual((await next.unprepare([ref])).get(UID(1)), {});
  t.deepEqual(next.claimsOfPod(POD), { prepared: [], pending: [] });
  t.deepEqual(await fs.readdir(path.join(dir, 'claims')), [], 'no record left');
});

test('kill -9 in the middle of an Unprepare: the next start finishes it (simulated sysfs and PF)', async (t) => {
  const env = await setUp(t, 'kdra8');
  const before = await env.node.snapshot();
  const ref = env.claim({ name: 'vm-nic', uid: UID(1), results: [{ device: vfDevice(0) }], config: [{ parameters: { mode: 'vfio' } }] });
  t.is((await env.kubelet().prepare([ref])).claims[UID(1)]!.error, '');
  env.node.kernel.crashBefore = (file) => file.endsWith('mlx5_core/bind');
  const un = await env.kubelet().unprepare([ref]);
  t.regex(un.claims[UID(1)]!.error, /restoring its devices failed/);
  const next = await env.restart();
  t.deepEqual(await next.recover(), { rolledBack: [], finished: ['default/vm-nic'], failed: [] });
  t.deepEqual(await env.node.snapshot(), before);
  t.deepEqual(await cdiFiles(env), []);
});

test('the attach of a pod gets one interface per prepared device with the claim\'s config; a claim still preparing makes it UNAVAILABLE (CNI 11) naming the claim (simulated sysfs and PF)', async (t) => {
  const env = await setUp(t, 'kdra9');
  const nic = env.claim({ name: 'nic', uid: UID(1), results: [{ device: vfDevice(0) }], config: [{ parameters: { interfaceName: 'net1', vlan: 9, addresses: ['192.0.2.40/24'] } }] });
  const vm = env.claim({ name: 'vm', uid: UID(2), results: [{ device: vfDevice(1) }], config: [{ parameters: { mode: 'vfio' } }] });
  await env.kubelet().prepare([nic, vm]);
  const req: AttachRequest = {
    sandboxId: 'sb1', podUid: POD, podName: 'p', podNamespace: 'default', netnsPath: '/run/netns/x', runtime: 'runc',
    interfaces: [{ name: 'eth0' }], portMappings: [], labels: {}, annotations: {},
  };
  const { req: full, claims } = withPodDevices(req, env.driver);
  t.deepEqual(claims.map((c) => c.name), ['nic', 'vm']);
  t.deepEqual(full.interfaces.map((i) => i.name), ['eth0', 'net1', 'vfio0']);
  t.deepEqual(full.interfaces[1]!.device, { pool: POOL, name: vfDevice(0), parameters: { mode: 'netdev', interfaceName: 'net1', addresses: ['192.0.2.40/24'], routes: [] } }, 'the PF side was done at Prepare: not again at the attach');
  t.is(full.labels[DRA_INTERFACES_LABEL], 'net1,vfio0');
  const otherPod = { ...req, podUid: 'another-pod' };
  t.is(withPodDevices(otherPod, env.driver).req, otherPod, 'a pod without claims here is attached as asked');

  const clash = withPodDevicesError(() => withPodDevices({ ...req, interfaces: [{ name: 'net1' }] }, env.driver));
  t.is(clash?.code, 'ALREADY_EXISTS');

  // A claim whose Prepare has not finished (a journal entry still "preparing").
  const records = (env.driver as unknown as { o: { records: ClaimStore } }).o.records;
  await records.put(UID(3), { ...records.get(UID(1))!, uid: UID(3), name: 'late', state: 'preparing', devices: [], steps: [] });
  const err = withPodDevicesError(() => withPodDevices(req, env.driver));
  t.is(err?.code, 'UNAVAILABLE');
  t.is(err?.details.cniCode, 11);
  t.is(err?.message, `pod default/p (uid ${POD}): claim default/late (uid ${UID(3)}) is not prepared on this node yet (preparing); try again`);
});

function withPodDevicesError(fn: () => unknown): KnitError | undefined {
  try {
    fn();
    return undefined;
  } catch (err) {
    return err as KnitError;
  }
}

test('a CDI spec file knit did not write is never replaced: that claim\'s Prepare fails naming the file and config dra.cdiDir, and its VF is left as it was (simulated sysfs and PF)', async (t) => {
  const env = await setUp(t, 'kdraa');
  const before = await env.node.snapshot();
  const ref = env.claim({ name: 'vm-nic', uid: UID(1), results: [{ device: vfDevice(1) }], config: [{ parameters: { mode: 'vfio' } }] });
  const stale = path.join(env.cdiDir, `${DRIVER}-${UID(1)}.json`);
  await fs.mkdir(env.cdiDir, { recursive: true });
  await fs.writeFile(stale, '{"someone": "else"}\n');
  const res = (await env.kubelet().prepare([ref])).claims[UID(1)]!;
  t.true(res.error.startsWith(`claim default/vm-nic (uid ${UID(1)}): `), res.error);
  t.true(res.error.includes(`${stale} already exists and knit did not write it (config dra.cdiDir)`), res.error);
  t.false(res.error.includes('kata'), res.error);
  t.is(await fs.readFile(stale, 'utf8'), '{"someone": "else"}\n');
  t.deepEqual(await env.node.snapshot(), before, 'the vfio-pci binding that ran first was undone');
});

test('config dra.devRoot: the CDI spec\'s device nodes keep their /dev path in the container and take their hostPath under devRoot; "/" writes no hostPath', (t) => {
  const devices = [{ device: 'pci-0000-3b-01-1', charDevices: ['/dev/vfio/42', '/dev/vfio/vfio'] }];
  const nodes = (devRoot?: string) => (cdiSpec(DRIVER, UID(1), devices, devRoot) as any).devices[0].containerEdits.deviceNodes;
  t.deepEqual(nodes(), [{ path: '/dev/vfio/42' }, { path: '/dev/vfio/vfio' }]);
  t.deepEqual(nodes('/'), nodes());
  t.deepEqual(nodes('/srv/host'), [{ path: '/dev/vfio/42', hostPath: '/srv/host/dev/vfio/42' }, { path: '/dev/vfio/vfio', hostPath: '/srv/host/dev/vfio/vfio' }]);
});
