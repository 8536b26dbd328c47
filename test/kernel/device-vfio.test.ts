// Devices in vfio mode through core's SandboxManager (in process, real netns and netlink): the
// VF is rebound to vfio-pci for a VM and given back to its driver, also after a crash at any
// step. No IOMMU, SR-IOV or vfio-pci here: the PCI side is a simulated sysfs whose FakeKernel
// reacts to driver writes as the kernel does (the netdev leaves sysfs on unbind and comes back
// on rebind) and can die before any write; veth ends stand in for the VFs' netdevs (a veth
// does not vanish on unbind as a VF netdev would). The daemon process cannot host FakeKernel,
// so these tests build core in process and route device actions to it (the ActionRunner seam).
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KnitError } from '../../src/base/errors.js';
import { SandboxManager } from '../../src/core/manager.js';
import type { ExtensionsPort, ManagerHooks, RecordStorePort } from '../../src/core/ports.js';
import { Reaper } from '../../src/core/reaper.js';
import { recover } from '../../src/core/recovery.js';
import { setInstance } from '../../src/base/names.js';
import type { ActionRunner } from '../../src/core/executor.js';
import type { SandboxRecord } from '../../src/core/record.js';
import type { AttachRequest } from '../../src/base/types.js';
import { runDeviceAction, type DeviceActionEnv } from '../../src/devices/actions.js';
import { Ipam } from '../../src/ipam/index.js';
import { runHostAction } from '../../src/daemon/host-actions.js';
import { DEVICE_ACTION_OPS, type DeviceAction } from '../../src/base/ops.js';
import { DaemonActionRunner } from '../../src/daemon/action-runner.js';
import { RecordStore } from '../../src/store/index.js';
import { NetnsChecker } from '../../src/daemon/netns-checker.js';
import { strategies } from '../../runtimes/index.js';
import type { NetworkSpec } from '../../src/base/strategy.js';
import { SimulatedCrash } from '../fixtures/fake-sysfs.js';
import { makeNetns, removeNetns } from '../helpers/daemon.js';
import { makeStandIn, vfState, type StandIn } from './device-standin.js';

// This worker's core only ever sees objects of its own instance.
setInstance('knit-kdf');

const NETWORK: NetworkSpec = { name: 'fab', mode: 'routed', mtu: 1500, hairpin: false, routes: [] };
const noExtensions: ExtensionsPort = {
  list: () => [], register: async () => undefined, unregister: async () => undefined, notify: async () => undefined, missingRequired: () => [],
};

class Crashed extends Error {}

/** One "daemon process": core over a record dir, a runner that dies with it. */
class Node {
  dead = false;
  readonly net = new DaemonActionRunner();
  readonly runner: ActionRunner;
  records!: RecordStorePort<SandboxRecord>;
  manager!: SandboxManager;

  constructor(private readonly s: StandIn, private readonly dir: string) {
    const guard = () => {
      if (this.dead) throw new Crashed('daemon is dead');
    };
    const deviceEnv: DeviceActionEnv = { sysfs: () => s.node.kernel, runOps: (ns, ops) => this.net.runOps(ns, ops) };
    this.runner = {
      runOps: async (ns, ops) => (guard(), this.net.runOps(ns, ops)),
      runHostAction: async (ns, a) => {
        guard();
        try {
          // Device actions get the simulated sysfs; everything else runs as in the daemon.
          if (DEVICE_ACTION_OPS.has(a.op)) return await runDeviceAction(ns, a as DeviceAction, deviceEnv);
          return await runHostAction(ns, a, deviceEnv.runOps);
        } catch (err) {
          if (err instanceof SimulatedCrash) this.dead = true;
          throw err;
        }
      },
      netnsUsable: (ns, expect) => this.net.netnsUsable(ns, expect),
    };
  }

  /** Opens the records and repairs what they say, as `knit serve` does at start-up. */
  async start(hooks: ManagerHooks = {}) {
    const store = await RecordStore.open<SandboxRecord>(this.dir);
    // A dead process writes nothing more.
    this.records = {
      get: (id) => store.get(id),
      values: () => store.values(),
      put: (id, doc) => (this.dead ? Promise.reject(new Crashed('dead')) : store.put(id, doc)),
      remove: (id) => (this.dead ? Promise.reject(new Crashed('dead')) : store.remove(id)),
    };
    const ipam = new Ipam([]);
    const reaper = new Reaper(this.runner, () => undefined);
    const report = await recover(this.records, ipam, this.runner, reaper);
    reaper.stop();
    this.manager = new SandboxManager({
      networks: () => new Map([[NETWORK.name, NETWORK]]), defaultNetwork: () => NETWORK.name, unreadyNetworks: () => new Map(),
      records: this.records, ipam, runner: this.runner, netns: new NetnsChecker(), strategies, extensions: noExtensions,
      reaper: { kick: () => undefined, whenReaped: async () => undefined }, hooks, sysfsRoot: () => this.s.node.root,
    });
    return report;
  }

  /** Hooks that make this process die at attach step n / detach inverse n. */
  failAt(kind: 'attach' | 'detach', n: number): ManagerHooks {
    const fp = { index: n, fire: () => { this.dead = true; throw new Crashed(`killed before ${kind} ${n}`); } };
    return kind === 'attach' ? { attachFailpoint: fp } : { detachFailpoint: fp };
  }

  close() {
    this.net.close();
  }
}

interface Env { s: StandIn; pod: string; dir: string; req: (id?: string) => AttachRequest }

async function setUp(t: ExecutionContext, prefix: string): Promise<Env> {
  const s = await makeStandIn(t, prefix, 1);
  const pod = makeNetns(`${prefix}-pod`);
  t.teardown(() => removeNetns(`${prefix}-pod`));
  const dir = mkdtempSync(path.join(os.tmpdir(), `knit-${prefix}-`));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const req = (id = `${prefix}-vm`): AttachRequest => ({
    sandboxId: id, netnsPath: pod, runtime: 'kubevirt', portMappings: [], labels: {}, annotations: {},
    interfaces: [{ name: 'net1', device: { bdf: s.vfs[0].bdf, parameters: { mode: 'vfio', addresses: ['192.0.2.30/24'] } } }],
  });
  return { s, pod, dir, req };
}

/** A new "process" on env's record dir; `arm` may make it die at a chosen point. */
async function start(t: ExecutionContext, env: Env, arm?: (node: Node) => ManagerHooks) {
  const node = new Node(env.s, env.dir);
  t.teardown(() => node.close());
  const report = await node.start(arm?.(node));
  return { node, report };
}

const driverOf = (env: Env) => env.s.node.kernel.linkName(`bus/pci/devices/${env.s.vfs[0].bdf}/driver`);

test('vfio mode: attach binds the VF to vfio-pci and answers /dev/vfio/<group> and a libvirt hostdev; detach rebinds its driver, sysfs and netdev exactly as before (simulated sysfs, simulated VF)', async (t) => {
  const env = await setUp(t, 'kdf1');
  const { node } = await start(t, env);
  const before = await env.s.node.snapshot();
  const netdev = vfState(env.s.vfs[0].name);

  const result = await node.manager.attach(env.req());
  t.is(await driverOf(env), 'vfio-pci');
  t.like(result.interfaces[0], { name: 'net1', kind: 'vfio', pciId: env.s.vfs[0].bdf });
  t.like(result.interfaces[0].handoff, {
    model: 'vfio', iommuGroup: 71, vfioDevice: '/dev/vfio/71', containerDevice: '/dev/vfio/vfio', originalDriver: 'iavf',
    networkData: { interfaceName: 'net1', ips: ['192.0.2.30/24'], hardwareAddress: env.s.vfs[0].mac },
  });
  t.regex((result.interfaces[0].handoff as { libvirt: { hostdev: string } }).libvirt.hostdev, /<address domain='0x0000' bus='0x5a' slot='0x02' function='0x0'\/>/);
  t.true((await node.manager.check('kdf1-vm')).ok, 'check has nothing to compare on a vfio device and says so by passing');

  await node.manager.detach('kdf1-vm');
  t.is(await driverOf(env), 'iavf');
  t.deepEqual(await env.s.node.snapshot(), before);
  t.deepEqual(vfState(env.s.vfs[0].name), netdev);
  t.deepEqual([...node.records.values()], []);
});

test('two sandboxes racing for one VF: the per-device lock lets one have it, the other is refused naming the winner (simulated sysfs)', async (t) => {
  const env = await setUp(t, 'kdf2');
  const pod2 = makeNetns('kdf2-pod2');
  t.teardown(() => removeNetns('kdf2-pod2'));
  const { node } = await start(t, env);
  const results = await Promise.allSettled([node.manager.attach(env.req('kdf2-a')), node.manager.attach({ ...env.req('kdf2-b'), netnsPath: pod2 })]);
  const won = results.findIndex((r) => r.status === 'fulfilled');
  const lost = results[1 - won] as PromiseRejectedResult;
  t.not(won, -1);
  t.true(lost.reason instanceof KnitError);
  t.is(lost.reason.code, 'FAILED_PRECONDITION');
  // Refused while the winner's attach runs, or by its record once it finished.
  const winner = `kdf2-${won === 0 ? 'a' : 'b'}`;
  t.true(
    [`is being attached to sandbox ${winner} right now`, `is held by sandbox ${winner}; detach that sandbox first`]
      .some((m) => lost.reason.message === `interfaces[0].device: PCI device ${env.s.vfs[0].bdf} ${m}`),
    lost.reason.message,
  );
  await node.manager.detach(winner);
  t.is(await driverOf(env), 'iavf');
});

test('a crash before each step of a vfio attach, and before each sysfs write inside the bind: the restart rolls it back (simulated sysfs, simulated crash)', async (t) => {
  const env = await setUp(t, 'kdf3');
  const before = await env.s.node.snapshot();
  const netdev = vfState(env.s.vfs[0].name);
  const steps = (await (await start(t, env)).node.manager.plan(env.req())).steps.length;
  t.is(steps, 2, 'claim, bind');

  const crashes: { what: string; arm(node: Node): ManagerHooks }[] = [];
  for (let n = 0; n <= steps; n++) crashes.push({ what: `before step ${n}`, arm: (node) => node.failAt('attach', n) });
  // vfio.bind writes driver_override, the old driver's unbind, drivers_probe.
  for (let w = 0; w < 3; w++) {
    crashes.push({
      what: `before bind write ${w}`,
      arm: () => {
        let seen = 0;
        env.s.node.kernel.crashBefore = () => seen++ === w;
        return {};
      },
    });
  }
  for (const c of crashes) {
    const { node } = await start(t, env, c.arm);
    const err = await t.throwsAsync(node.manager.attach(env.req()));
    t.truthy(err, c.what);
    t.true(node.dead, `the process died (${c.what})`);
    env.s.node.kernel.restartDaemon();
    const { node: next, report } = await start(t, env);
    t.deepEqual(report.errors, [], c.what);
    t.deepEqual(report.rolledBack, ['kdf3-vm'], c.what);
    t.deepEqual(await env.s.node.snapshot(), before, `sysfs as before (${c.what})`);
    t.deepEqual(vfState(env.s.vfs[0].name), netdev, `netdev as before (${c.what})`);
    t.deepEqual([...next.records.values()], [], c.what);
  }
});

test('a crash before each inverse of a vfio detach, and before each sysfs write inside the restore: the restart finishes it (simulated sysfs, simulated crash)', async (t) => {
  const env = await setUp(t, 'kdf4');
  const before = await env.s.node.snapshot();
  const crashes: { what: string; arm(node: Node): ManagerHooks }[] = [];
  for (let n = 0; n <= 2; n++) crashes.push({ what: `before inverse ${n}`, arm: (node) => node.failAt('detach', n) });
  // vfio.restore writes vfio-pci's unbind, driver_override, the driver's bind.
  for (let w = 0; w < 3; w++) {
    crashes.push({
      what: `before restore write ${w}`,
      arm: () => {
        let seen = 0;
        env.s.node.kernel.crashBefore = () => seen++ === w;
        return {};
      },
    });
  }
  for (const c of crashes) {
    const { node: first } = await start(t, env);
    await first.manager.attach(env.req());
    t.is(await driverOf(env), 'vfio-pci');
    first.close();
    const { node } = await start(t, env, c.arm);
    await t.throwsAsync(node.manager.detach('kdf4-vm'));
    t.true(node.dead, `the process died (${c.what})`);
    env.s.node.kernel.restartDaemon();
    const { node: next, report } = await start(t, env);
    t.deepEqual(report.errors, [], c.what);
    t.deepEqual(report.completedDetach, ['kdf4-vm'], c.what);
    t.deepEqual(await env.s.node.snapshot(), before, `sysfs as before (${c.what})`);
    t.deepEqual([...next.records.values()], [], c.what);
  }
});
