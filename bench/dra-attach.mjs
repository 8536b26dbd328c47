#!/usr/bin/env node
// A claimed VF netdev's Prepare + attach beside a plain runc attach, in one run on the real
// kernel: the same in-process manager and action runner as the daemon, a real pod netns, and
// a stand-in VF (a veth end in the host whose peer sits in a fabric netns; its PCI side a
// simulated sysfs, test/kernel/device-standin.ts). The device path should cost no more than its
// extra kernel requests: its time beyond the plain attach is set against the floor of exactly
// those requests (the rename + move into the pod netns, then address, up and route there), made
// by the same runner with nothing else. Records on tmpfs, as /run/knit is on a node. Not a test.
// Usage: node bench/dra-attach.mjs [runs=30] as root, after `npm run build`.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const RUNS = Number(process.argv[2] ?? 30);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const b = async (p) => import(pathToFileURL(path.join(root, 'build', p)).href);
const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
const since = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;

const { setInstance } = await b('src/base/names.js');
const { SandboxManager } = await b('src/core/manager.js');
const { Reaper } = await b('src/core/reaper.js');
const { DEVICE_ACTION_OPS } = await b('src/base/ops.js');
const { runDeviceAction } = await b('src/devices/actions.js');
const { runHostAction } = await b('src/daemon/host-actions.js');
const { DaemonActionRunner } = await b('src/daemon/action-runner.js');
const { NetnsChecker } = await b('src/daemon/netns-checker.js');
const { Ipam } = await b('src/ipam/index.js');
const { RecordStore } = await b('src/store/index.js');
const { strategies } = await b('runtimes/index.js');
const { HOST_NETNS } = await b('runtimes/with-devices/netdev.js');
const { DraDriver } = await b('src/dra/driver.js');
const { withClaimedDevices } = await b('src/dra/attach.js');
const { ClaimsInApi, DRIVER, POOL, resourceClaim } = await b('test/fixtures/dra-node.js');
const { makeStandIn } = await b('test/kernel/device-standin.js');
const { makeNetns, removeNetns } = await b('test/helpers/daemon.js');

const P = `kbd${process.pid % 1000}`;
setInstance(`knit-${P}`);
const cleanups = [];
const scope = { teardown: (fn) => cleanups.push(fn) };
try {
  const NETWORK = { name: 'pods', mode: 'routed', mtu: 1500, hairpin: false, routes: [], ipv4: { subnet: '10.238.7.0/24', gateway: '10.238.7.1' } };
  const PARAMS = { interfaceName: 'net1', addresses: ['192.0.2.10/24'], routes: [{ dst: '198.51.100.0/24', gw: '192.0.2.1' }] };
  const s = await makeStandIn(scope, P, 1);
  const pod = `${P}-pod`;
  const podPath = makeNetns(pod);
  cleanups.push(() => removeNetns(pod));
  // A tmpfs, as /run/knit (where a node keeps its records) is; this VM's /run is not one.
  const dir = mkdtempSync(path.join('/dev/shm', `knit-${P}-`));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const net = new DaemonActionRunner();
  cleanups.push(() => net.close());

  // Where the VF attach's time goes: when its move (the host batch that moves a link into a
  // netns) starts and ends, and how long the other netlink batches take in all.
  let trace;
  const isMove = (ns, ops) => ns === undefined && ops.some((o) => o.op === 'link.set' && o.netns);
  const traced = async (ns, ops) => {
    const t0 = process.hrtime.bigint();
    const tracing = trace;
    try {
      return await net.runOps(ns, ops);
    } finally {
      if (tracing && isMove(ns, ops)) tracing.move = { start: Number(t0 - tracing.t0) / 1e6, end: since(tracing.t0) };
      else if (tracing) tracing.netlink += since(t0);
    }
  };
  const deviceEnv = { sysfs: () => s.node.kernel, runOps: (ns, ops) => net.runOps(ns, ops) };
  const runner = {
    runOps: traced,
    runHostAction: (ns, a) => (DEVICE_ACTION_OPS.has(a.op) ? runDeviceAction(ns, a, deviceEnv) : runHostAction(ns, a, deviceEnv.runOps)),
    netnsUsable: (ns, expect) => net.netnsUsable(ns, expect),
  };
  const reaper = new Reaper(runner, (err) => console.error('reaper', err.message));
  const manager = new SandboxManager({
    networks: () => new Map([[NETWORK.name, NETWORK]]), defaultNetwork: () => NETWORK.name, unreadyNetworks: () => new Map(),
    records: await RecordStore.open(path.join(dir, 'sandboxes')), ipam: new Ipam([{ ...NETWORK, ipv4: { subnet: NETWORK.ipv4.subnet, gateway: NETWORK.ipv4.gateway, reserved: [] } }]), runner,
    netns: new NetnsChecker(), strategies,
    extensions: { list: () => [], register: async () => undefined, unregister: async () => undefined, notify: async () => undefined, missingRequired: () => [] },
    reaper, sysfsRoot: () => s.node.root,
  });
  const api = new ClaimsInApi();
  const driver = new DraDriver({ driverName: DRIVER, nodeName: POOL, cdiDir: path.join(dir, 'cdi'), sysfs: s.node.kernel, claims: api, records: await RecordStore.open(path.join(dir, 'claims')), runner });
  const service = withClaimedDevices(manager, driver);
  const req = (id, podUid) => ({
    sandboxId: id, podUid, podName: 'b', podNamespace: 'default', netnsPath: podPath, runtime: 'runc',
    interfaces: [{ name: 'eth0', network: 'pods' }], portMappings: [], labels: {}, annotations: {},
  });

  // The floor of the device path's extra kernel requests: a veth set up like the stand-in VF
  // (in the host, up, its peer in the fabric) renamed and moved into the pod netns in one
  // request, then its address, up and route there in one batch: the changes of the VF's plan
  // steps, batched as the executor batches them, through the same runner, with nothing else.
  const mover = `${P}mv`;
  execFileSync('ip', ['link', 'add', mover, 'type', 'veth', 'peer', 'name', `${P}mp`, 'netns', s.fabric]);
  cleanups.push(() => execFileSync('ip', ['link', 'del', mover], { stdio: 'ignore' }));
  const name = PARAMS.interfaceName;
  const floorOnce = async () => {
    await net.runOps(undefined, [{ op: 'link.set', link: mover, up: true }]);
    let t0 = process.hrtime.bigint();
    await net.runOps(undefined, [{ op: 'link.set', link: mover, name, netns: podPath }]);
    const move = since(t0);
    t0 = process.hrtime.bigint();
    await net.runOps(podPath, [
      { op: 'addr.add', link: name, address: PARAMS.addresses[0] },
      { op: 'link.set', link: name, up: true },
      { op: 'route.add', dst: PARAMS.routes[0].dst, gateway: PARAMS.routes[0].gw, family: 4, link: name },
    ]);
    const total = since(t0) + move;
    await net.runOps(podPath, [{ op: 'link.set', link: name, name: mover, netns: HOST_NETNS }]);
    return { move, total };
  };

  const plain = [];
  const device = [];
  const floors = [];
  let steps;
  for (let r = 0; r < RUNS + 3; r++) {
    // Alternate, so load and caches fall on all alike; the first three are warm-up.
    let t0 = process.hrtime.bigint();
    await service.attach(req(`${P}-plain`, ''));
    const tPlain = since(t0);
    await service.detach(`${P}-plain`);
    await reaper.whenReaped?.();

    const uid = `c1a10000-0000-4000-8000-${String(r).padStart(12, '0')}`;
    const podUid = `5e1f0000-0000-4000-8000-${String(r).padStart(12, '0')}`;
    const ref = api.add(resourceClaim({ name: `c${r}`, uid, podUid, results: [{ device: 'pci-0000-5a-02-0' }], config: [{ parameters: PARAMS }] }));
    t0 = process.hrtime.bigint();
    const prep = (await driver.prepare([{ namespace: ref.namespace, name: ref.name, uid: ref.uid }])).get(uid);
    if ('error' in prep) throw new Error(prep.error);
    const tPrep = since(t0);
    if (!steps) {
      steps = {
        plain: (await service.plan(req(`${P}-count`, ''))).steps.length,
        prepare: driver.claimsOfPod(podUid).prepared[0].steps.length,
        attach: (await service.plan(req(`${P}-count`, podUid))).steps.length,
      };
    }
    t0 = process.hrtime.bigint();
    trace = { t0, netlink: 0 };
    await service.attach(req(`${P}-dev`, podUid));
    const tAttach = since(t0);
    const split = { beforeMove: trace.move.start, move: trace.move.end - trace.move.start, afterMove: tAttach - trace.move.end, netlink: trace.netlink };
    trace = undefined;
    await service.detach(`${P}-dev`);
    await reaper.whenReaped?.();
    const un = (await driver.unprepare([{ namespace: ref.namespace, name: ref.name, uid }])).get(uid);
    if (un.error) throw new Error(un.error);

    const floor = await floorOnce();
    if (r >= 3) {
      plain.push(tPlain);
      // Each round's own ratio too: the move's RCU wait drifts over a run, the same for all three.
      device.push({ prep: tPrep, attach: tAttach, total: tPrep + tAttach, ratio: (tPrep + tAttach - tPlain) / floor.total, ...split });
      floors.push(floor);
    }
  }
  const mp = median(plain);
  const md = (k) => median(device.map((d) => d[k]));
  const mf = (k) => median(floors.map((f) => f[k]));
  const devSteps = steps.prepare + steps.attach;
  const extra = md('total') - mp;
  console.log(`node ${process.version}; medians of ${RUNS} runs, alternating; stand-in VF (veth, simulated sysfs); records on tmpfs`);
  console.log('| path | ms | kernel changes (plan steps) | time ratio | steps ratio |');
  console.log('|---|---:|---:|---:|---:|');
  console.log(`| plain runc attach (eth0) | ${mp.toFixed(2)} | ${steps.plain} | 1.00 | 1.00 |`);
  console.log(`| claimed VF: Prepare | ${md('prep').toFixed(2)} | ${steps.prepare} | | |`);
  console.log(`| claimed VF: attach (eth0 + net1) | ${md('attach').toFixed(2)} | ${steps.attach} | | |`);
  console.log(`| claimed VF: Prepare + attach | ${md('total').toFixed(2)} | ${devSteps} | ${(md('total') / mp).toFixed(2)} | ${(devSteps / steps.plain).toFixed(2)} |`);
  console.log(`| the device path's extra (Prepare + attach − plain attach) | ${extra.toFixed(2)} | ${devSteps - steps.plain} | | |`);
  console.log(`| floor of its extra requests (rename + move; address, up, route) | ${mf('total').toFixed(2)} | | | |`);
  console.log(`| of which the rename + move (one RTM_NEWLINK) | ${mf('move').toFixed(2)} | | | |`);
  console.log(`\nthe device path's extra time ÷ the floor of its extra requests: ${(extra / mf('total')).toFixed(2)} (of the medians), ${md('ratio').toFixed(2)} (median of each round's)`);
  console.log('\n| the VF attach, in time order | ms (median) |');
  console.log('|---|---:|');
  console.log(`| before the VF's move starts (device reads, plan, journal, eth0's batches, device claim) | ${md('beforeMove').toFixed(2)} |`);
  console.log(`| the VF's rename + move (one host batch) | ${md('move').toFixed(2)} |`);
  console.log(`| after the move (the VF's address, up, route; the attached record) | ${md('afterMove').toFixed(2)} |`);
  console.log(`| (the other netlink batches in all: reads, eth0's, the VF's in the pod) | ${md('netlink').toFixed(2)} |`);
} finally {
  for (const f of cleanups.reverse()) await Promise.resolve().then(f).catch((e) => console.error('cleanup', e.message));
}
