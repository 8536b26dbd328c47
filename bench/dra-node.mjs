#!/usr/bin/env node
// A node's knit with its DRA driver and its cluster view on, against a real kube-apiserver
// (etcd, kube-apiserver, kube-controller-manager and kube-scheduler from the test cluster,
// test/fixtures/kube-cluster.ts): what it holds in memory and how fast it is back after a kill -9.
//
//   memory   RSS of one `knit serve` on bin/knit's node flags (after a full GC, from inside it:
//            bench/memory/report-hook.mjs; read at once, as footprint.js reads it, and again 1 s
//            later, once V8's sweep after the GC has given back what it emptied), idle: plain,
//            with `dra:`, with `dra:` and `cluster:` (its network's subnet from its Node's
//            podCIDR), and that last one's RSS from /proc every second for --idle-watch s (no
//            GC forced; the ResourceSlice is republished every 30 s); then, with both on, N claims
//            prepared and unprepared through the kubelet's socket until 1,000 Prepare/Unprepare
//            cycles are done, RSS read from /proc (no GC) every 50 cycles: highest, the mean
//            of the last third and its slope, and a GC'd figure at the end.
//   restart  with N claims prepared (their records on disk) and S plain runc sandboxes attached
//            (pods on the node): a clean start (SIGTERM, start) and a kill -9 then start, each
//            timed from the spawn to the registration socket answering GetInfo and to a Prepare
//            answered on the plugin socket, and to knit's own API answering; and a kill -9
//            with the API server stopped (knit's cluster view waits for it, up to 5 s).
//
// The node's devices: a simulated sysfs with one PF and 69 VFs bound to vfio-pci (70 in its
// ResourceSlice), so a Prepare changes nothing in this kernel (its steps: the CDI spec). The
// claims are allocated by the scheduler against knit's slice, each reserved for a Pod that
// never runs (no kubelet); the kubelet's calls come from a client built from the published
// kubelet protos (test/fixtures/kubelet-client.ts). Records on a tmpfs (/dev/shm), as /run/knit is.
//
// Usage (root, after npm run build): node bench/dra-node.mjs [memory|restart|both] [--claims 8]
//   [--cycles 1000] [--idle-watch 65] [--restarts 3] [--sandboxes 200]. Results: bench/README.md, "The DRA driver: memory and restart".
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const built = (p) => import(pathToFileURL(path.join(root, 'build', p)).href);
const { startControlPlane, createNode } = await built('test/fixtures/kube-cluster.js');
const { Cleanup } = await built('test/fixtures/cleanup.js');
const { createFakeSysfs } = await built('test/fixtures/fake-sysfs.js');
const { draClient, registrationClient } = await built('test/fixtures/kubelet-client.js');
const { uniquePrefix } = await built('test/helpers/names.js');
const { startDaemon: startKnit, cleanupDaemon, runcAttachReq } = await built('test/helpers/daemon.js');
const { launcherNodeFlags, memoryReport, procMemory } = await built('bench/lib/knit-process.js');

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] !== undefined ? Number(args[i + 1]) : fallback;
};
const what = args.find((a) => ['memory', 'restart', 'both'].includes(a)) ?? 'both';
const CLAIMS = opt('claims', 8);
const CYCLES = opt('cycles', 1000);
const RESTARTS = opt('restarts', 3);
const SANDBOXES = opt('sandboxes', 200);
const IDLE_WATCH = opt('idle-watch', 65);
const VFS = 69;
const DRIVER = 'knit.dev';
const HOOK = path.join(root, 'bench', 'memory', 'report-hook.mjs');
const P = uniquePrefix('kdn');
const NODE = `${P}node`;
const log = (s) => process.stderr.write(`dra-node: ${s}\n`);
const MiB = (b) => (b / 2 ** 20).toFixed(1);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const cleanup = new Cleanup();
const host = { teardown: (fn) => cleanup.defer('teardown', fn) };
/** A knit serve whose temp dir goes at the end, whichever daemon is current then. */
async function startDaemon(o) {
  const d = await startKnit(o);
  cleanup.defer('knit dir', () => rmSync(d.dir, { recursive: true, force: true }));
  return d;
}

/** PF 0000:3b:00.0 and its VFs 0000:3b:01.0 on, bound to vfio-pci, each in its own IOMMU group. */
function deviceSpecs() {
  const PF = '0000:3b:00.0';
  const vf = (i) => `0000:3b:${(1 + Math.floor(i / 8)).toString(16).padStart(2, '0')}.${i % 8}`;
  return [
    { bdf: PF, classCode: 0x020000, vendor: 0x15b3, device: 0x1017, driver: 'mlx5_core', iommuGroup: 30, sriovTotalVfs: 128, netdev: { name: `${P}pf`.slice(0, 15), mac: '0c:42:a1:00:00:00', mtu: 9000, ifindex: 4 } },
    ...Array.from({ length: VFS }, (_, i) => ({
      bdf: vf(i), classCode: 0x020000, vendor: 0x15b3, device: 0x1018, driver: 'vfio-pci', idTable: ['mlx5_core'], iommuGroup: 100 + i, physfn: { pf: PF, index: i },
    })),
  ];
}

const report = (d, file) => memoryReport(d.child, file);

const slope = (ys) => {
  const n = ys.length;
  const mx = (n - 1) / 2;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  ys.forEach((y, x) => { num += (x - mx) * (y - my); den += (x - mx) ** 2; });
  return den ? num / den : 0;
};

try {
  if (process.getuid() !== 0) throw new Error('needs root');
  log(`${P}: control plane`);
  const cp = await startControlPlane(host, { prefix: P, clusterCidr: '10.246.0.0/16' });
  await createNode(cp, NODE, { internalIPs: ['10.99.3.2'] });
  const room = { pods: '110', cpu: '4', memory: '8Gi' };
  await cp.kubectl('patch', 'node', NODE, '--subresource=status', '--type=merge', '-p', JSON.stringify({ status: { capacity: room, allocatable: room } }));
  const deploy = (f) => path.join(root, 'deploy', f);
  await cp.kubectl('apply', '-f', deploy('namespace.yaml'), '-f', deploy('serviceaccount.yaml'), '-f', deploy('rbac.yaml'));
  await cp.kubectl('apply', '-f', deploy('dra/rbac.yaml'), '-f', deploy('dra/deviceclasses.yaml'));
  const kubeconfig = cp.kubeconfigFor(await cp.serviceAccountToken('knit-system', 'knit', 7200));

  const sysfs = await createFakeSysfs(host, deviceSpecs());
  const dir = mkdtempSync(path.join('/dev/shm', `${P}-`));
  cleanup.defer('bench dir', () => rmSync(dir, { recursive: true, force: true }));
  const dra = { nodeName: NODE, kubeconfig, registryDir: path.join(dir, 'registry'), pluginsDir: path.join(dir, 'plugins'), cdiDir: path.join(dir, 'cdi') };
  const sockets = { registration: path.join(dra.registryDir, `${DRIVER}-reg.sock`), plugin: path.join(dra.pluginsDir, DRIVER, 'dra.sock') };
  const memoryFile = path.join(dir, 'memory.jsonl');
  /** One knit serve; variant: plain, dra, or dra+cluster. */
  const knitOptions = (variant) => ({
    prefix: P.slice(0, 6), subnet: '10.231.94.0/24',
    nodeFlags: [...launcherNodeFlags(), '--expose-gc', '--import', HOOK],
    env: { KNIT_MEMORY_REPORT: memoryFile, KNIT_MEMORY_SETTLE_MS: '1000' },
    config: {
      logLevel: 'warn', runDir: path.join(dir, 'run'), sysfsRoot: sysfs.root,
      ...(variant !== 'plain' && { dra }),
      ...(variant === 'dra+cluster' && {
        networks: [{ name: `${P.slice(0, 6)}net`, mode: 'bridge', bridge: `${P.slice(0, 6)}br`, ipv4: { subnet: 'node' } }],
        cluster: { nodeName: NODE, kubeconfig },
      }),
    },
  });

  // The claims, allocated by the scheduler against knit's slice (published by a first knit).
  let d = await startDaemon(knitOptions('dra+cluster'));
  cleanup.defer('knit', () => cleanupDaemon(d, knitOptions('dra+cluster')));
  cleanup.defer('knit slice', () => cp.kubectl('delete', 'resourceslices', '--field-selector', `spec.driver=${DRIVER}`).catch(() => undefined));
  for (let i = 0; i < 100 && !(await cp.getJson('get', 'resourceslices')).items.length; i++) await sleep(200);
  const objects = Array.from({ length: CLAIMS }, (_, i) => [
    { apiVersion: 'resource.k8s.io/v1', kind: 'ResourceClaim', metadata: { name: `c${i}`, namespace: 'default' }, spec: { devices: { requests: [{ name: 'nic', exactly: { deviceClassName: 'knit-vfio' } }] } } },
    { apiVersion: 'v1', kind: 'Pod', metadata: { name: `p${i}`, namespace: 'default' }, spec: { nodeSelector: { 'kubernetes.io/hostname': NODE }, tolerations: [{ operator: 'Exists' }],
      resourceClaims: [{ name: 'nic', resourceClaimName: `c${i}` }], containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10', resources: { claims: [{ name: 'nic' }] } }] } },
  ]).flat();
  await cp.kubectlInput(objects.map((o) => JSON.stringify(o)).join('\n'), 'create', '-f', '-');
  const refs = [];
  for (let i = 0; i < CLAIMS; i++) {
    for (let tries = 0; ; tries++) {
      const c = await cp.getJson('get', 'resourceclaim', `c${i}`, '-n', 'default');
      if (c.status?.allocation && c.status?.reservedFor?.length) {
        refs.push({ namespace: 'default', name: `c${i}`, uid: c.metadata.uid });
        break;
      }
      if (tries > 300) throw new Error(`claim c${i} not allocated (scheduler log: ${cp.dir}/kube-scheduler.log)`);
      await sleep(200);
    }
  }
  const prepareAll = async (kubelet, batch = refs) => {
    const res = await kubelet.prepare(batch);
    const failed = Object.values(res.claims).find((c) => c.error);
    if (failed) throw new Error(`prepare: ${failed.error}`);
  };
  const unprepareAll = async (kubelet, batch = refs) => {
    const res = await kubelet.unprepare(batch);
    const failed = Object.values(res.claims).find((c) => c.error);
    if (failed) throw new Error(`unprepare: ${failed.error}`);
  };
  await d.stop();
  const out = { prefix: P, date: new Date().toISOString(), load: os.loadavg()[0], node: process.version, claims: CLAIMS, devices: VFS + 1 };

  if (what !== 'restart') {
    out.idle = {};
    for (const variant of ['plain', 'dra', 'dra+cluster']) {
      d = await startDaemon(knitOptions(variant));
      await sleep(3000);
      out.idle[variant] = await report(d, memoryFile);
      log(`idle ${variant}: ${MiB(out.idle[variant].rss)} MiB, 1 s later ${MiB(out.idle[variant].settled.rss)}`);
      if (variant !== 'dra+cluster') await d.stop();
    }
    const watched = [];
    for (let i = 0; i < IDLE_WATCH; i++) {
      await sleep(1000);
      watched.push(procMemory(d.child.pid).rss);
    }
    if (watched.length) {
      out.idleWatch = { seconds: IDLE_WATCH, highest: Math.max(...watched), mean: watched.reduce((a, b) => a + b, 0) / watched.length, last: watched.at(-1), samples: watched };
      log(`dra+cluster idle, ${IDLE_WATCH} s without a forced GC: highest ${MiB(out.idleWatch.highest)}, mean ${MiB(out.idleWatch.mean)}, last ${MiB(out.idleWatch.last)}`);
    }
    const kubelet = draClient(sockets.plugin, 'v1');
    const samples = [];
    const t0 = performance.now();
    for (let done = 0; done < CYCLES; done += refs.length) {
      await prepareAll(kubelet);
      await unprepareAll(kubelet);
      if ((done / refs.length) % Math.max(1, Math.round(50 / refs.length)) === 0) samples.push([done + refs.length, procMemory(d.child.pid).rss]);
    }
    const seconds = (performance.now() - t0) / 1000;
    kubelet.close();
    await sleep(3000);
    const after = await report(d, memoryFile);
    const third = samples.slice(Math.floor((samples.length * 2) / 3)).map(([, r]) => r);
    out.cycles = {
      cycles: CYCLES, seconds, highest: Math.max(...samples.map(([, r]) => r)), lastThirdMean: third.reduce((a, b) => a + b, 0) / third.length,
      slopePer1000: (slope(third) * 1000) / (samples.length > 1 ? samples[1][0] - samples[0][0] : 1), samples, after,
    };
    log(`${CYCLES} cycles in ${seconds.toFixed(1)} s: highest ${MiB(out.cycles.highest)}, last third ${MiB(out.cycles.lastThirdMean)}, slope ${MiB(out.cycles.slopePer1000)} MiB per 1,000; after (GC) ${MiB(after.rss)}, 1 s later ${MiB(after.settled.rss)}`);
    await d.stop();
  }

  if (what !== 'memory') {
    d = await startDaemon(knitOptions('dra+cluster'));
    let kubelet = draClient(sockets.plugin, 'v1');
    await prepareAll(kubelet, refs.slice(1)); // recorded claims; refs[0] is the one timed below
    kubelet.close();
    const pods = Array.from({ length: SANDBOXES }, (_, i) => `${P}s${i}`);
    const ipBatch = (lines) => { for (let i = 0; i < lines.length; i += 200) execFileSync('ip', ['-force', '-batch', '-'], { input: `${lines.slice(i, i + 200).join('\n')}\n`, stdio: ['pipe', 'ignore', 'ignore'] }); };
    ipBatch(pods.map((n) => `netns add ${n}`));
    cleanup.defer('pods', async () => {
      for (const id of pods) await d.call('Detach', { sandbox_id: id }).catch(() => undefined);
      ipBatch(pods.map((n) => `netns del ${n}`));
    });
    for (const id of pods) await d.call('Attach', runcAttachReq(id, `/run/netns/${id}`));
    const timeStart = async (how, apiDown = false) => {
      if (apiDown) await cp.stopApiserver();
      const t0 = performance.now();
      if (how === 'kill -9') {
        const gone = d.exited;
        d.child.kill('SIGKILL');
        await gone;
      } else await d.stop();
      const t1 = performance.now();
      let api;
      const restarted = d.restart().then((x) => ((api = performance.now() - t1), x));
      let registration;
      for (;;) {
        if (existsSync(sockets.registration)) {
          const c = registrationClient(sockets.registration);
          const ok = await Promise.race([c.getInfo().then(() => true, () => false), sleep(1000).then(() => false)]);
          c.close();
          if (ok) break;
        }
        await sleep(10);
      }
      registration = performance.now() - t1;
      const k = draClient(sockets.plugin, 'v1');
      // With the API down, a recorded claim's Prepare (the kubelet's retry) is answered from its record.
      await prepareAll(k, [apiDown ? refs[1] : refs[0]]);
      const prepared = performance.now() - t1;
      if (!apiDown) await unprepareAll(k, [refs[0]]);
      k.close();
      d = await restarted;
      if (apiDown) await cp.startApiserver();
      return { stop: t1 - t0, registration, prepared, api };
    };
    out.restart = { clean: [], kill: [], killApiDown: [] };
    for (let r = 0; r < RESTARTS; r++) {
      out.restart.clean.push(await timeStart('clean'));
      out.restart.kill.push(await timeStart('kill -9'));
      out.restart.killApiDown.push(await timeStart('kill -9', true));
    }
    for (const k of ['clean', 'kill', 'killApiDown']) {
      const m = (f) => median(out.restart[k].map((x) => x[f])).toFixed(0);
      log(`${k}, ${SANDBOXES} sandboxes: registration ${m('registration')} ms, a Prepare answered ${m('prepared')} ms, knit's API ${m('api')} ms (medians of ${RESTARTS})`);
    }
    kubelet = draClient(sockets.plugin, 'v1');
    await unprepareAll(kubelet, refs.slice(1));
    kubelet.close();
  }
  console.log(JSON.stringify(out, (k, v) => (k === 'heapSpaces' ? undefined : v), 2));
} catch (err) {
  log(err.stack ?? String(err));
  process.exitCode = 1;
} finally {
  await cleanup.run().catch((e) => log(e.message));
  try {
    execFileSync('ip', ['link', 'del', `${P.slice(0, 6)}br`], { stdio: 'ignore' });
  } catch {
    /* not made, or gone */
  }
}
