#!/usr/bin/env node
// knit in Multus's place (README "Secondary networks"): what a pod's networks cost to set up,
// what a burst of pod starts costs in memory, and what knit holds with many pods on several
// networks. Benchmarks, never tests: nothing here asserts a time.
//
//   latency  one pod at a time, eth0 plus N networks (N = 1 and 3), R rounds each, ADD and DEL
//            timed around the exec: `annotation` is knit-cni exec'd as containerd execs it with
//            the pod's k8s.v1.cni.cncf.io/networks annotation in runtimeConfig, each network a
//            NAD whose config is Debian's bridge + host-local; `direct` is the same configs
//            exec'd by hand the way libcni (and so Multus, for each delegate) execs them: the
//            bridge plugin once for eth0 and once per network, config on stdin, what Multus
//            would cost with none of its own work (it cannot be built here); `knit-own` is the
//            annotation path with each NAD naming one of knit's own bridge networks
//            ({"type": "knit"}), so no plugin runs at all.
//   burst    B pods (110, the kubelet's default maxPods) × 3 networks, every ADD started at
//            once, for each cniParallelChains in the list: the time until the last ADD
//            answered, and the peak RSS of knit and of knit with every process it started
//            (the plugins: what counts against its cgroup), sampled every 10 ms.
//   memory   RSS of knit after a full GC (bench/memory/report-hook.mjs), idle, and with P pods
//            (1,000) each on eth0 and 3 networks attached.
// The daemon runs on bin/knit's node flags in a netns of its own (what the bridge plugins make
// goes with it), its records on a tmpfs (/dev/shm), its NADs literal in its config (no API:
// network-status is written after the ADD's answer anyway, off its path).
//
// Usage (root, after npm run build): node bench/secondary-networks.mjs [latency|burst|memory|all]
//   [--rounds 40] [--burst 110] [--slots 4,8,1024] [--pods 1000]. Results: bench/README.md,
//   "Secondary networks (knit in Multus's place)".
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const built = (p) => import(pathToFileURL(path.join(root, 'build', p)).href);
const { startDaemon, cleanupDaemon } = await built('test/helpers/daemon.js');
const { uniquePrefix } = await built('test/helpers/names.js');
const { launcherNodeFlags, memoryReport, procMemory } = await built('bench/lib/knit-process.js');

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : fallback;
};
const what = args.find((a) => ['latency', 'burst', 'memory', 'all'].includes(a)) ?? 'all';
const ROUNDS = Number(opt('rounds', 40));
const BURST = Number(opt('burst', 110));
const SLOTS = String(opt('slots', '4,8,1024')).split(',').map(Number);
const PODS = Number(opt('pods', 1000));
const P = uniquePrefix('bsn');
const HOST = `${P}h`;
const SHIM = path.join(root, 'build', 'native', 'knit-cni');
const PLUGINS = '/usr/lib/cni';
const HOOK = path.join(root, 'bench', 'memory', 'report-hook.mjs');
const log = (s) => process.stderr.write(`secondary-networks: ${s}\n`);
const MiB = (b) => (b / 2 ** 20).toFixed(1);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const pct = (xs, q) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * q))];
const ms = (xs) => ({ p50: +pct(xs, 0.5).toFixed(2), p90: +pct(xs, 0.9).toFixed(2) });

const dir = mkdtempSync(path.join('/dev/shm', `${P}`));
const dataDir = path.join(dir, 'ipam');
/** Network k: a bridge of its own in the daemon's netns, a /16 of its own (1,000+ pods). */
const bridgeConf = (name, k) => ({ cniVersion: '1.0.0', name, type: 'bridge', bridge: `${P}b${k}`, isGateway: true, ipam: { type: 'host-local', dataDir, ranges: [[{ subnet: `10.${200 + k}.0.0/16` }]] } });
const NETS = ['n1', 'n2', 'n3'];
const KNIT_NETS = NETS.map((n, k) => ({ name: `${P.slice(0, -1)}${n}`, mode: 'bridge', bridge: `${P}k${k}`, ipv4: { subnet: `10.${210 + k}.0.0/16` } }));
const definitions = Object.fromEntries([
  ...NETS.map((n, k) => [`default/${n}`, bridgeConf(n, k + 1)]),
  ...KNIT_NETS.map((net, k) => [`default/k${k + 1}`, { cniVersion: '1.0.0', type: 'knit', network: net.name }]),
]);
const memoryFile = path.join(dir, 'memory.jsonl');
const opts = (slots = 8) => ({
  prefix: P.slice(0, -1), subnet: '10.199.0.0/16', netns: HOST,
  nodeFlags: [...launcherNodeFlags(), '--expose-gc', '--import', HOOK],
  env: { KNIT_MEMORY_REPORT: memoryFile },
  extraNetworks: KNIT_NETS,
  config: { logLevel: 'warn', runDir: path.join(dir, 'run'), cniParallelChains: slots, secondaryNetworks: { definitions, pluginDirs: [PLUGINS] } },
});

let pods = 0;
/** A fresh pod netns (made before any clock starts). */
function newPod() {
  const name = `${P}p${pods++}`;
  execFileSync('ip', ['netns', 'add', name]);
  return { name, id: `${P}sb${pods}`, path: `/run/netns/${name}` };
}
const dropPod = (p) => spawnSync('ip', ['netns', 'del', p.name]);

const k8sArgs = (p) => `IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=${p.name};K8S_POD_INFRA_CONTAINER_ID=${p.id};K8S_POD_UID=uid-${p.id}`;
const shimConf = (d, annotation) => ({
  cniVersion: '1.0.0', name: `${P}cni`, type: 'knit', network: `${P.slice(0, -1)}net`, socket: path.join(d.dir, 'cni.sock'), deleteQueue: path.join(d.dir, 'cni-delete-queue'),
  runtimeConfig: { 'io.kubernetes.cri.pod-annotations': annotation ? { 'k8s.v1.cni.cncf.io/networks': annotation } : {} },
});
const env = (command, p, ifname = 'eth0') => ({ PATH: process.env.PATH, CNI_COMMAND: command, CNI_CONTAINERID: p.id, CNI_NETNS: p.path, CNI_IFNAME: ifname, CNI_ARGS: k8sArgs(p), CNI_PATH: PLUGINS });
function exec(bin, command, p, conf, ifname) {
  const r = spawnSync(bin, [], { input: JSON.stringify(conf), encoding: 'utf8', env: env(command, p, ifname) });
  if (r.status !== 0) throw new Error(`${path.basename(bin)} ${command} ${ifname ?? 'eth0'}: ${r.stdout} ${r.stderr}`);
}
/** Async, for the burst: resolves with the exit code. */
const execAsync = (bin, command, p, conf) => new Promise((resolve) => {
  const c = spawn(bin, [], { env: env(command, p), stdio: ['pipe', 'ignore', 'ignore'] });
  c.stdin.end(JSON.stringify(conf));
  c.once('close', resolve);
});
const timed = (fn) => {
  const t0 = process.hrtime.bigint();
  fn();
  return Number(process.hrtime.bigint() - t0) / 1e6;
};

/** knit's RSS, and knit's with every live descendant's (the plugins it is running). */
function treeRss(pid) {
  const children = new Map();
  for (const e of readdirSync('/proc').filter((x) => /^\d+$/.test(x))) {
    try {
      const ppid = Number(/^PPid:\s+(\d+)/m.exec(readFileSync(`/proc/${e}/status`, 'utf8'))[1]);
      if (!children.has(ppid)) children.set(ppid, []);
      children.get(ppid).push(Number(e));
    } catch { /* gone */ }
  }
  let total = 0;
  const walk = (p) => {
    total += procMemory(p)?.rss || 0; // a zombie or a process just gone has none
    for (const c of children.get(p) ?? []) walk(c);
  };
  walk(pid);
  return { own: procMemory(pid)?.rss || 0, tree: total };
}

const report = (d) => memoryReport(d.child, memoryFile);

async function latency(out) {
  const d = await startDaemon(opts());
  try {
    for (const n of [1, 3]) {
      const nets = NETS.slice(0, n);
      const rows = { annotation: { add: [], del: [] }, direct: { add: [], del: [] }, 'knit-own': { add: [], del: [] } };
      for (let r = 0; r < ROUNDS; r++) {
        for (const [row, annotation] of [['annotation', nets.join(', ')], ['knit-own', nets.map((_, k) => `k${k + 1}`).join(', ')]]) {
          const p = newPod();
          rows[row].add.push(timed(() => exec(SHIM, 'ADD', p, shimConf(d, annotation))));
          rows[row].del.push(timed(() => exec(SHIM, 'DEL', p, shimConf(d))));
          dropPod(p);
        }
        // The same configs exec'd as libcni execs them: eth0 on a bridge, then each network.
        const p = newPod();
        const confs = [['eth0', bridgeConf('pods', 0)], ...nets.map((net, k) => [`net${k + 1}`, bridgeConf(net, k + 1)])];
        const bridge = path.join(PLUGINS, 'bridge');
        rows.direct.add.push(timed(() => confs.forEach(([ifname, c]) => exec(bridge, 'ADD', p, c, ifname))));
        rows.direct.del.push(timed(() => [...confs].reverse().forEach(([ifname, c]) => exec(bridge, 'DEL', p, c, ifname))));
        dropPod(p);
      }
      out.latency[`${n} network${n > 1 ? 's' : ''}`] = Object.fromEntries(Object.entries(rows).map(([k, v]) => [k, { add: ms(v.add), del: ms(v.del) }]));
      log(`latency ${n}: ${JSON.stringify(out.latency[`${n} network${n > 1 ? 's' : ''}`])}`);
    }
  } finally {
    await cleanupDaemon(d, opts());
  }
}

async function burst(out) {
  for (const slots of SLOTS) {
    const d = await startDaemon(opts(slots));
    try {
      const batch = Array.from({ length: BURST }, newPod);
      let peak = { own: 0, tree: 0 };
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          const m = treeRss(d.child.pid);
          peak = { own: Math.max(peak.own, m.own), tree: Math.max(peak.tree, m.tree) };
          await sleep(10);
        }
      })();
      const t0 = Date.now();
      const codes = await Promise.all(batch.map((p) => execAsync(SHIM, 'ADD', p, shimConf(d, NETS.join(', ')))));
      const took = Date.now() - t0;
      sampling = false;
      await sampler;
      const failed = codes.filter((c) => c !== 0).length;
      out.burst[String(slots)] = { pods: BURST, networks: 3, seconds: +(took / 1000).toFixed(1), failed, peakKnitMiB: +MiB(peak.own), peakKnitAndPluginsMiB: +MiB(peak.tree) };
      log(`burst slots=${slots}: ${JSON.stringify(out.burst[String(slots)])}`);
      await Promise.all(batch.map((p) => execAsync(SHIM, 'DEL', p, shimConf(d))));
      batch.forEach(dropPod);
    } finally {
      await cleanupDaemon(d, opts(slots));
    }
  }
}

async function memory(out) {
  const d = await startDaemon(opts());
  try {
    out.memory.idleMiB = +MiB((await report(d)).rss);
    const all = [];
    for (let i = 0; i < PODS; i++) {
      const p = newPod();
      all.push(p);
      exec(SHIM, 'ADD', p, shimConf(d, NETS.join(', ')));
      if ((i + 1) % 100 === 0) log(`memory: ${i + 1} pods`);
    }
    const r = await report(d);
    out.memory[`${PODS} pods x 3 networks MiB`] = +MiB(r.rss);
    out.memory.heapUsedMiB = +MiB(r.heapUsed);
    for (const p of all) exec(SHIM, 'DEL', p, shimConf(d));
    all.forEach(dropPod);
  } finally {
    await cleanupDaemon(d, opts());
  }
}

const out = { when: new Date().toISOString(), node: process.version, latency: {}, burst: {}, memory: {} };
try {
  if (process.getuid() !== 0) throw new Error('needs root');
  execFileSync('ip', ['netns', 'add', HOST]);
  execFileSync('ip', ['-n', HOST, 'link', 'set', 'lo', 'up']);
  if (what === 'latency' || what === 'all') await latency(out);
  if (what === 'burst' || what === 'all') await burst(out);
  if (what === 'memory' || what === 'all') await memory(out);
  process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
} finally {
  for (let i = 0; i < pods; i++) spawnSync('ip', ['netns', 'del', `${P}p${i}`]);
  spawnSync('ip', ['netns', 'del', HOST]);
  rmSync(dir, { recursive: true, force: true });
}
