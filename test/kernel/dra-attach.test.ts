// A pod's DRA devices reach it at its attach: the kubelet (a test client built from the
// published kubelet protos) prepares the claims, then the pod's network is set up through
// knit.v1's Attach or a knit-cni ADD naming the pod's UID, and knit adds one interface per
// prepared device: the VF netdev moved in with the claim's name, addresses and routes, or for a
// KubeVirt VM the VFIO hand-off. Detach / DEL gives them back; Unprepare restores the rest.
// No SR-IOV hardware: veth ends stand in for the VFs' netdevs (real renames, moves, traffic,
// checked with `ip -j -d`) and the PCI side is a simulated sysfs (device-standin.ts), so core
// runs in process with device actions routed to it, as in device-vfio.test.ts.
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { setInstance } from '../../src/base/names.js';
import { SandboxManager } from '../../src/core/manager.js';
import { Reaper } from '../../src/core/reaper.js';
import type { StepAction } from '../../src/base/plan.js';
import type { ExtensionsPort } from '../../src/core/ports.js';
import type { ActionRunner } from '../../src/core/executor.js';
import type { SandboxRecord } from '../../src/core/record.js';
import type { AttachRequest, SandboxService } from '../../src/base/types.js';
import type { NetworkSpec } from '../../src/base/strategy.js';
import { DEVICE_ACTION_OPS, type DeviceAction } from '../../src/base/ops.js';
import { runDeviceAction, type DeviceActionEnv } from '../../src/devices/actions.js';
import { runHostAction } from '../../src/daemon/host-actions.js';
import { DaemonActionRunner } from '../../src/daemon/action-runner.js';
import { NetnsChecker } from '../../src/daemon/netns-checker.js';
import { Ipam } from '../../src/ipam/index.js';
import { RecordStore } from '../../src/store/index.js';
import { strategies } from '../../runtimes/index.js';
import { DraDriver } from '../../src/dra/driver.js';
import { sandboxHoldingIn, withClaimedDevices } from '../../src/dra/attach.js';
import { kubeletSockets, startKubeletServer } from '../../src/dra/kubelet-server.js';
import type { ClaimRecord } from '../../src/dra/claim-record.js';
import { CniFrontend } from '../../src/cni-frontend/handler.js';
import { PROTOCOL_VERSION } from '../../src/cni-frontend/request.js';
import { ClaimsInApi, DRIVER, POOL, resourceClaim, tempDir, type ClaimSpec } from '../fixtures/dra-node.js';
import { draClient, type WireClaim } from '../fixtures/kubelet-client.js';
import { ipJson, makeNetns, pingFrom, removeNetns } from '../helpers/daemon.js';
import { hostLink, linkIn, makeStandIn, vfState, type StandIn } from './device-standin.js';

setInstance('knit-kdr');

const noExtensions: ExtensionsPort = {
  list: () => [], register: async () => undefined, unregister: async () => undefined, notify: async () => undefined, missingRequired: () => [],
};

interface Env {
  s: StandIn;
  pod: string;
  podPath: string;
  service: SandboxService;
  manager: SandboxManager;
  driver: DraDriver;
  api: ClaimsInApi;
  kubelet: ReturnType<typeof draClient>;
  records: RecordStore<SandboxRecord>;
  claim(c: ClaimSpec): WireClaim;
  /** From now on the runner refuses the first action equal to this one (undefined: none). */
  failOn(action: StepAction | undefined): void;
  /** Resolves once the reaper deleted what a detach or rollback parked (with `reap`). */
  reaped(): Promise<void>;
}

const POD_UID = (n: number) => `5e1f0000-0000-4000-8000-00000000000${n}`;
const CLAIM_UID = (n: number) => `c1a10000-0000-4000-8000-00000000000${n}`;
const standInDevice = (i: number) => `pci-0000-5a-02-${i}`;

/** Each test its own subnet for eth0: ava runs a file's tests at once, in one host netns. */
async function setUp(t: ExecutionContext, prefix: string, subnet: number, vfs = 1, opts: { reap?: boolean } = {}): Promise<Env> {
  const NETWORK: NetworkSpec = { name: 'pods', mode: 'routed', mtu: 1500, hairpin: false, routes: [], ipv4: { subnet: `10.239.${subnet}.0/24`, gateway: `10.239.${subnet}.1` } };
  const s = await makeStandIn(t, prefix, vfs);
  execFileSync('ip', ['-n', s.fabric, 'addr', 'add', '192.0.2.1/24', 'dev', s.vfs[0]!.peer]);
  const pod = `${prefix}-pod`;
  const podPath = makeNetns(pod);
  t.teardown(() => removeNetns(pod));
  const dir = tempDir(t, `knit-${prefix}`);

  const net = new DaemonActionRunner();
  t.teardown(() => net.close());
  const deviceEnv: DeviceActionEnv = { sysfs: () => s.node.kernel, runOps: (ns, ops) => net.runOps(ns, ops) };
  // A refusal on demand (failOn) of a plan step, as the kernel gives one: the ops before it in
  // the batch took effect. Armed once the attach's journal is written, so the same action
  // read while planning (a link.get) is not the one refused.
  let failing: string | undefined;
  let armed = false;
  const refused = (a: StepAction) => {
    if (!armed || JSON.stringify(a) !== failing) return false;
    failing = undefined;
    return true;
  };
  const refusal = (a: StepAction, index: number) => Object.assign(new Error(`test refusal of ${a.op}`), { index });
  const runner: ActionRunner = {
    async runOps(ns, ops) {
      const at = ops.findIndex(refused);
      if (at < 0) return net.runOps(ns, ops);
      if (at > 0) await net.runOps(ns, ops.slice(0, at));
      throw refusal(ops[at]!, at);
    },
    // Device actions get the simulated sysfs; everything else runs as in the daemon.
    async runHostAction(ns, a) {
      if (refused(a)) throw refusal(a, 0);
      return DEVICE_ACTION_OPS.has(a.op) ? runDeviceAction(ns, a as DeviceAction, deviceEnv) : runHostAction(ns, a, deviceEnv.runOps);
    },
    netnsUsable: (ns, expect) => net.netnsUsable(ns, expect),
  };
  const reaper = opts.reap ? new Reaper(runner, (err) => t.log(`reaper: ${err.message}`)) : { kick: () => undefined, whenReaped: async () => undefined };
  const records = await RecordStore.open<SandboxRecord>(path.join(dir, 'sandboxes'));
  const put = records.put.bind(records);
  records.put = (id, doc) => {
    armed = doc.state === 'attaching';
    return put(id, doc);
  };
  const manager = new SandboxManager({
    networks: () => new Map([[NETWORK.name, NETWORK]]), defaultNetwork: () => NETWORK.name, unreadyNetworks: () => new Map(),
    records, ipam: new Ipam([{ ...NETWORK, ipv4: { subnet: NETWORK.ipv4!.subnet, gateway: NETWORK.ipv4!.gateway, reserved: [] } }]), runner,
    netns: new NetnsChecker(), strategies, extensions: noExtensions,
    reaper, sysfsRoot: () => s.node.root, danDir: () => path.join(dir, 'dans'),
  });
  // Whatever a failed test leaves attached goes (and with it the VFs back to the host).
  t.teardown(async () => {
    for (const r of await manager.list()) await manager.detach(r.request.sandboxId).catch(() => undefined);
    await reaper.whenReaped();
  });

  const api = new ClaimsInApi();
  const claimRecords = await RecordStore.open<ClaimRecord>(path.join(dir, 'claims'));
  const driver = new DraDriver({
    driverName: DRIVER, nodeName: POOL, cdiDir: path.join(dir, 'cdi'), sysfs: s.node.kernel, claims: api, records: claimRecords, runner,
    sandboxHolding: sandboxHoldingIn(manager),
  });
  const sockets = kubeletSockets(path.join(dir, 'registry'), path.join(dir, 'plugins'), DRIVER);
  const server = await startKubeletServer({ sockets, driver });
  t.teardown(() => server.close(0));
  const kubelet = draClient(sockets.plugin, 'v1');
  t.teardown(() => kubelet.close());
  return {
    s, pod, podPath, manager, driver, api, kubelet, records,
    service: withClaimedDevices(manager, driver),
    claim: (c) => api.add(resourceClaim(c)),
    failOn(a) {
      failing = a && JSON.stringify(a);
      armed = false;
    },
    reaped: () => reaper.whenReaped(),
  };
}

const attachReq = (env: Env, id: string, podUid: string, over: Partial<AttachRequest> = {}): AttachRequest => ({
  sandboxId: id, podUid, podName: 'web', podNamespace: 'default', netnsPath: env.podPath, runtime: 'runc',
  interfaces: [{ name: 'eth0', network: 'pods' }], portMappings: [], labels: {}, annotations: {}, ...over,
});

const PARAMS = { interfaceName: 'net1', addresses: ['192.0.2.10/24'], routes: [{ dst: '198.51.100.0/24', gw: '192.0.2.1' }], mtu: 1300 };

test('a runc pod\'s Attach naming its UID gets the prepared VF netdev with the claim\'s name, addresses and routes; Detach gives it back and Unprepare leaves the host as before (stand-in hardware: veth as VF netdev, simulated sysfs)', async (t) => {
  const env = await setUp(t, 'kdr1', 51);
  const vf = env.s.vfs[0]!;
  const before = vfState(vf.name);
  const ref = env.claim({ name: 'web-nic', uid: CLAIM_UID(1), podUid: POD_UID(1), results: [{ device: standInDevice(0) }], config: [{ parameters: PARAMS }] });
  t.is((await env.kubelet.prepare([ref])).claims[CLAIM_UID(1)]!.error, '');
  t.deepEqual(vfState(vf.name), before, 'Prepare of a netdev claim without PF settings leaves the netdev where it is');

  const result = await env.service.attach(attachReq(env, 'kdr1-sb', POD_UID(1)));
  // Independent observer: the VF left the host and is in the pod as net1, configured.
  t.is(hostLink(vf.name), undefined);
  const inPod = linkIn(env.pod, 'net1');
  t.like(inPod, { ifindex: vf.ifindex, mtu: 1300, address: vf.mac });
  t.true(inPod.flags.includes('UP'));
  const addrs = ipJson(['addr', 'show', 'dev', 'net1'], env.pod)[0].addr_info.filter((a: any) => a.scope === 'global').map((a: any) => `${a.local}/${a.prefixlen}`);
  t.deepEqual(addrs, ['192.0.2.10/24']);
  t.like(ipJson(['route', 'show', '198.51.100.0/24'], env.pod)[0], { gateway: '192.0.2.1', dev: 'net1' });
  t.true(pingFrom(env.pod, '192.0.2.1'), 'traffic crosses the moved VF netdev to its fabric');
  t.truthy(linkIn(env.pod, 'eth0'), 'and the pod\'s own network is there as asked');
  // The answer lists it, with KEP-4817's networkData.
  const nic = result.interfaces.find((i) => i.name === 'net1')!;
  t.like(nic, { kind: 'vf', pciId: vf.bdf, sandbox: env.podPath });
  t.like(nic.handoff, { networkData: { interfaceName: 'net1', ips: ['192.0.2.10/24'], hardwareAddress: vf.mac }, draDevice: { device: standInDevice(0), pool: POOL } });

  // A retried Attach (a lost answer) gets the same result and changes nothing.
  t.deepEqual(await env.service.attach(attachReq(env, 'kdr1-sb', POD_UID(1))), result);

  await env.service.detach('kdr1-sb');
  t.deepEqual(vfState(vf.name), before, 'back in the host with its name, MAC, MTU and up state');
  t.is(linkIn(env.pod, 'net1'), undefined);
  env.api.claims.clear(); // the claim may be gone before the kubelet unprepares
  t.deepEqual((await env.kubelet.unprepare([ref])).claims, { [CLAIM_UID(1)]: { error: '' } });
  t.deepEqual(vfState(vf.name), before);
});

test('a kernel refusal at any step of a pod\'s attach with a claimed VF takes back what ran: the VF in the host as it was, nothing in the pod or the host, no record; then the attach succeeds (stand-in hardware: veth as VF netdev, simulated sysfs)', async (t) => {
  const env = await setUp(t, 'kdr5', 55, 1, { reap: true });
  const vf = env.s.vfs[0]!;
  const before = vfState(vf.name);
  // This sandbox's own host links (knit tags them with its ID); the file's other tests run beside.
  const hostLinks = () => ipJson(['link', 'show']).filter((l: any) => l.ifalias?.includes('sandbox=kdr5-sb')).map((l: any) => l.ifname);
  const podLinks = () => ipJson(['link', 'show'], env.pod).map((l: any) => l.ifname).sort();
  const ref = env.claim({ name: 'refused-nic', uid: CLAIM_UID(5), podUid: POD_UID(5), results: [{ device: standInDevice(0) }], config: [{ parameters: PARAMS }] });
  t.is((await env.kubelet.prepare([ref])).claims[CLAIM_UID(5)]!.error, '');
  // A static address for eth0, so that every attach's plan is the same, step for step.
  const req = attachReq(env, 'kdr5-sb', POD_UID(5), { interfaces: [{ name: 'eth0', network: 'pods', ips: ['10.239.55.10/24'] }] });

  await env.service.attach(req);
  t.is(hostLinks().length, 1, 'the observer sees the sandbox\'s host end while attached');
  const steps = env.records.get('kdr5-sb')!.steps;
  t.deepEqual([...new Set(steps.map((s) => s.iface))], ['eth0', 'net1'], 'eth0\'s steps, then the VF\'s');
  await env.service.detach('kdr5-sb');

  for (const [k, step] of steps.entries()) {
    env.failOn(step.do);
    const err = await t.throwsAsync(env.service.attach(req), undefined, `step ${k}`);
    t.true(err!.message.includes(`(${step.description}) failed`), `step ${k}: ${err!.message}`);
    if (step.do.op === 'link.get' && step.undo) {
      // The VF moved, but the step holding the way back (its check in the sandbox) was refused:
      // the rollback cannot give the VF back from the host, so the record is kept, and Detach
      // finishes the job.
      t.regex(err!.message, /its record is kept/);
      await env.service.detach('kdr5-sb');
    }
    await env.reaped();
    t.deepEqual(vfState(vf.name), before, `refused at step ${k} (${step.description}): the VF is back in the host as it was`);
    t.deepEqual(podLinks(), ['lo'], `refused at step ${k}: nothing in the pod`);
    t.deepEqual(hostLinks(), [], `refused at step ${k}: nothing of the sandbox left in the host`);
    t.is(env.records.get('kdr5-sb'), undefined, `refused at step ${k}: no record`);
  }
  env.failOn(undefined);
  await env.service.attach(req);
  t.like(linkIn(env.pod, 'net1'), { ifindex: vf.ifindex });
  t.truthy(linkIn(env.pod, 'eth0'));
  await env.service.detach('kdr5-sb');
  t.deepEqual(vfState(vf.name), before);
  await env.kubelet.unprepare([ref]);
});

test('knit-cni ADD with K8S_POD_UID: the CNI result lists the VF interface; a claim not prepared yet answers CNI error 11 naming it and attaches nothing; DEL of eth0 gives the VF back (stand-in hardware: veth as VF netdev, simulated sysfs)', async (t) => {
  const env = await setUp(t, 'kdr2', 52);
  const vf = env.s.vfs[0]!;
  const before = vfState(vf.name);
  const cni = new CniFrontend(env.service);
  const conf = JSON.stringify({ cniVersion: '1.1.0', name: 'kdr2-net', type: 'knit-cni', network: 'pods' });
  const call = (command: string, podUid: string) =>
    cni.handle({ v: PROTOCOL_VERSION, command, containerId: 'kdr2-sb', netns: env.podPath, ifname: 'eth0', args: `K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;K8S_POD_UID=${podUid}`, path: '', config: conf });

  const ref = env.claim({ name: 'web-nic', uid: CLAIM_UID(1), podUid: POD_UID(2), results: [{ device: standInDevice(0) }], config: [{ parameters: PARAMS }] });
  // The kubelet's Prepare is still running when the runtime calls ADD: what knit has is a journal entry.
  const records = (env.driver as unknown as { o: { records: RecordStore<ClaimRecord> } }).o.records;
  await records.put(CLAIM_UID(1), { version: 1, uid: CLAIM_UID(1), namespace: 'default', name: 'web-nic', state: 'preparing', podUids: [POD_UID(2)], devices: [], steps: [], preparedAt: '' });
  const early = await call('ADD', POD_UID(2));
  t.is(early.exitCode, 1);
  t.like(JSON.parse(early.stdout), { code: 11, msg: `pod default/web (uid ${POD_UID(2)}): claim default/web-nic (uid ${CLAIM_UID(1)}) is not prepared on this node yet (preparing); try again` });
  t.is(linkIn(env.pod, 'eth0'), undefined, 'no pod network without its device');
  await records.remove(CLAIM_UID(1));

  t.is((await env.kubelet.prepare([ref])).claims[CLAIM_UID(1)]!.error, '');
  const add = await call('ADD', POD_UID(2));
  t.is(add.exitCode, 0, add.stdout);
  const out = JSON.parse(add.stdout);
  const names = out.interfaces.filter((i: any) => i.sandbox).map((i: any) => i.name);
  t.deepEqual(names.sort(), ['eth0', 'net1']);
  t.like(out.interfaces.find((i: any) => i.name === 'net1'), { sandbox: env.podPath, pciID: vf.bdf });
  t.true(out.ips.some((ip: any) => ip.address === '192.0.2.10/24' && out.interfaces[ip.interface].name === 'net1'));
  t.like(linkIn(env.pod, 'net1'), { ifindex: vf.ifindex });
  const again = await call('ADD', POD_UID(2));
  t.deepEqual(JSON.parse(again.stdout).interfaces.filter((i: any) => i.sandbox).map((i: any) => i.name).sort(), ['eth0', 'net1'], 'a repeated ADD answers the same interfaces');

  const del = await call('DEL', POD_UID(2));
  t.is(del.exitCode, 0, del.stdout);
  t.deepEqual(vfState(vf.name), before, 'DEL of the pod\'s CNI interface gives the VF back');
  t.is(env.manager.lookup('kdr2-sb'), undefined, 'the whole sandbox is gone, not just eth0');
  await env.kubelet.unprepare([ref]);
});

test('a KubeVirt pod gets the VFIO hand-off of a VF its claim had bound to vfio-pci at Prepare; Unprepare rebinds the VF\'s driver (stand-in hardware: simulated sysfs)', async (t) => {
  const env = await setUp(t, 'kdr3', 53);
  const vf = env.s.vfs[0]!;
  const sysfsBefore = await env.s.node.snapshot();
  const ref = env.claim({ name: 'vm-nic', uid: CLAIM_UID(1), podUid: POD_UID(3), results: [{ device: standInDevice(0) }], config: [{ parameters: { mode: 'vfio', addresses: ['192.0.2.30/24'] } }] });
  const prep = (await env.kubelet.prepare([ref])).claims[CLAIM_UID(1)]!;
  t.is(prep.error, '');
  t.deepEqual(prep.devices[0]!.cdi_device_ids, [`${DRIVER}/net=${CLAIM_UID(1)}-${standInDevice(0)}`]);
  t.is(await env.s.node.kernel.linkName(`bus/pci/devices/${vf.bdf}/driver`), 'vfio-pci');

  const result = await env.service.attach(attachReq(env, 'kdr3-vm', POD_UID(3), { runtime: 'kubevirt', interfaces: [] }));
  const h = result.interfaces.find((i) => i.kind === 'vfio');
  t.like(h, { name: 'vfio0', pciId: vf.bdf });
  t.like(h!.handoff, { model: 'vfio', vfioDevice: '/dev/vfio/71', containerDevice: '/dev/vfio/vfio', networkData: { interfaceName: 'vfio0', ips: ['192.0.2.30/24'] } });
  t.regex((h!.handoff as { libvirt?: { hostdev?: string } }).libvirt?.hostdev ?? '', /<address domain='0x0000' bus='0x5a' slot='0x02' function='0x0'\/>/);

  // The kubelet unprepares after the pod's containers stopped; should it come before the
  // sandbox is detached, the VM still owns the VF: knit waits (retryable) and changes nothing.
  const early = (await env.kubelet.unprepare([ref])).claims[CLAIM_UID(1)]!;
  t.regex(early.error, new RegExp(`device ${standInDevice(0)} \\(${vf.bdf.replace('.', '\\.')}\\) is still in sandbox kdr3-vm`));
  t.is(await env.s.node.kernel.linkName(`bus/pci/devices/${vf.bdf}/driver`), 'vfio-pci');

  await env.service.detach('kdr3-vm');
  t.is(await env.s.node.kernel.linkName(`bus/pci/devices/${vf.bdf}/driver`), 'vfio-pci', 'the VM is gone, the claim still holds the device');
  await env.kubelet.unprepare([ref]);
  t.is(await env.s.node.kernel.linkName(`bus/pci/devices/${vf.bdf}/driver`), 'iavf');
  t.deepEqual(await env.s.node.snapshot(), sysfsBefore);
});

test('a Kata pod gets the VFIO hand-off (Kata\'s DAN "vfio" device) of a VF its claim had bound to vfio-pci at Prepare (stand-in hardware: simulated sysfs)', async (t) => {
  const env = await setUp(t, 'kdr4', 54);
  const vf = env.s.vfs[0]!;
  const ref = env.claim({ name: 'kata-nic', uid: CLAIM_UID(1), podUid: POD_UID(4), results: [{ device: standInDevice(0) }], config: [{ parameters: { mode: 'vfio', addresses: ['192.0.2.40/24'] } }] });
  t.is((await env.kubelet.prepare([ref])).claims[CLAIM_UID(1)]!.error, '');
  const result = await env.service.attach(attachReq(env, 'kdr4-vm', POD_UID(4), { runtime: 'kata' }));
  const h = result.interfaces.find((i) => i.kind === 'vfio')!;
  t.like(h, { name: 'vfio0', pciId: vf.bdf });
  t.like(h.handoff, { model: 'vfio', runtime: 'kata', vfioDevice: '/dev/vfio/71', networkData: { interfaceName: 'vfio0', ips: ['192.0.2.40/24'] } });
  t.truthy(result.interfaces.find((i) => i.name === 'eth0' || i.sandbox), 'and the pod network of the Kata sandbox');
  await env.service.detach('kdr4-vm');
  t.deepEqual((await env.kubelet.unprepare([ref])).claims, { [CLAIM_UID(1)]: { error: '' } }, 'once Detach answered, the device is free (the reaper may still be deleting the tap)');
  t.is(await env.s.node.kernel.linkName(`bus/pci/devices/${vf.bdf}/driver`), 'iavf');
});
