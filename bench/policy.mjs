#!/usr/bin/env node
// NetworkPolicy at scale (issue 35; bench/README.md, "NetworkPolicy"): knit's controller beside
// kube-router v2's, through one real Kubernetes API, in the same run.
//
// (a) From an API change to the kernel: a new policy, a pod's label, a new pod, at each size of
//     the matrix (pods × policies). etcd and kube-apiserver from the test cluster
//     (test/fixtures/kube-cluster.ts; no kubelet: pods are API objects whose status the bench
//     writes as a kubelet would). knit in one node netns (policy from the API, one pod of its own
//     attached), kube-router (scripts/build-kube-router.sh; firewall only) in another with a pod
//     of its own in the API. Both watch the same objects. The time is from the API server's
//     answer to the write (for a new pod: its status write, which gives it its address) to the
//     moment the bench sees the change in that agent's kernel: knit's nft table (`nft -j`),
//     kube-router's ipsets (`ipset test`), polled every 5 ms by each side's own poller.
// (c) knit's RSS with the cluster grown to 10,000 pods and 2,000 policies (kube-router's beside).
// (b) is bench/policy/traffic.mjs (pod-to-pod rates through knit's table).
//
// kube-network-policies cannot run here: it judges packets in user space through nfqueue, and
// this kernel has no CONFIG_NFT_QUEUE.
//
// Usage (root, after npm run build): node bench/policy.mjs [--pods 100,1000] [--policies 10,100,1000]
//   [--reps 3] [--knit-only] [--rss-pods 10000 --rss-policies 2000 | --no-rss]
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createHash } from 'node:crypto';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { cpuMs, pct, rssMiB } from './cluster/proc.mjs';
import { adminApi, now, pool } from './cluster/api.mjs';
import { ingressPeerSet, kubeRouterBinary, startKubeRouter } from './policy/kube-router.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const built = (p) => import(pathToFileURL(path.join(root, 'build', p)).href);
const { startControlPlane } = await built('test/fixtures/kube-cluster.js');
const { Cleanup } = await built('test/fixtures/cleanup.js');
const { startService, waitReady } = await built('test/fixtures/service.js');
const { uniquePrefix, removeNetns } = await built('test/helpers/names.js');
const { startDaemon, cleanupDaemon, runcAttachReq } = await built('test/helpers/daemon.js');
const { startRelay } = await built('test/helpers/cluster-fabric.js');
const { launcherNodeFlags } = await built('bench/lib/knit-process.js');
const run = promisify(execFile);

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : dflt;
};
const list = (s) => s.split(',').map(Number);
const POD_SIZES = list(opt('pods', '100,1000'));
const POLICY_SIZES = list(opt('policies', '10,100,1000'));
const REPS = Number(opt('reps', '3'));
const RSS_PODS = Number(opt('rss-pods', '10000'));
const RSS_POLICIES = Number(opt('rss-policies', '2000'));
const withRss = !args.includes('--no-rss');
const withKubeRouter = !args.includes('--knit-only');
const IN_FLIGHT = 16;
const NAMESPACES = 10;
const OBSERVE_MS = 120_000;
const METRICS_PORT = 19466; // on knit's node netns's own loopback
const log = (s) => process.stderr.write(`policy: ${s}\n`);

const P = uniquePrefix('kbp');
const knitNs = `${P}knit`;
const krNs = `${P}kr`;
const nsName = (i) => `${P}n${i}`.replace(/-/g, '');
const NS0 = nsName(0);
// Pod i of the cluster: every other address of 10.96.0.0/16, so no two pods' addresses are
// adjacent and each stays one element of a set (knit merges adjacent intervals).
const podIp = (i) => `10.96.${(2 * i) >> 8}.${(2 * i) & 255}`;
const KR_NODE_IP = '192.168.77.2';
const KR_POD_IP = '10.251.0.2';

const cleanup = new Cleanup();
let cleaning;
const cleanupOnce = () => (cleaning ??= cleanup.run().catch((e) => log(e.message)));
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, () => void cleanupOnce().finally(() => process.exit(130)));

const results = { prefix: P, date: new Date().toISOString(), load: os.loadavg()[0], cells: [], rss: undefined };
try {
  if (process.getuid() !== 0) throw new Error('needs root (netns, nft, ipset)');
  const dir = mkdtempSync(path.join(os.tmpdir(), `knit-${P}pol-`));
  cleanup.defer('bench dir', () => rmSync(dir, { recursive: true, force: true }));
  const krBin = withKubeRouter ? kubeRouterBinary(root) : undefined;

  log(`${P}: control plane`);
  const cp = await startControlPlane({ teardown: (fn) => cleanup.defer('control plane', fn) }, { prefix: P });
  // Only the bench writes: no controller deletes its kubelet-less pods or taints its nodes.
  for (const s of cp.services) if (!['etcd', 'kube-apiserver'].includes(s.name)) await s.stop();
  const api = adminApi(cp, IN_FLIGHT);
  cleanup.defer('api client', () => api.close());

  for (const ns of [knitNs, krNs]) {
    execFileSync('ip', ['netns', 'add', ns]);
    cleanup.defer(`netns ${ns}`, () => removeNetns(ns));
    execFileSync('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
  }
  const port = Number(new URL(cp.server).port);
  const sock = path.join(dir, 'api.sock');
  for (const ns of [undefined, knitNs, krNs]) {
    const r = startRelay(port, sock, ns);
    cleanup.defer('relay', () => r.stop());
    await r.up;
  }

  // ---- the cluster's objects --------------------------------------------------------------
  const post = (p, body) => api.call('POST', p, body);
  const patch = (p, body) => api.call('PATCH', p, body, 'application/merge-patch+json');
  const del = (p) => api.call('DELETE', p);
  for (let i = 0; i < NAMESPACES; i++) {
    await post('/api/v1/namespaces', { metadata: { name: nsName(i), labels: { team: `t${i}` } } });
    // The controller manager that makes it is stopped; pod admission needs it.
    await post(`/api/v1/namespaces/${nsName(i)}/serviceaccounts`, { metadata: { name: 'default' } });
  }
  const knitNode = `${P}knit`;
  await api.createNode({ apiVersion: 'v1', kind: 'Node', metadata: { name: knitNode }, status: {} });
  await api.createNode({ apiVersion: 'v1', kind: 'Node', metadata: { name: `${P}kr` }, status: {} });
  await api.call('PATCH', `/api/v1/nodes/${P}kr/status`, { status: { addresses: [{ type: 'InternalIP', address: KR_NODE_IP }] } }, 'application/merge-patch+json');

  /** A pod as a kubelet leaves it: created, then its status (address, host, phase) written. */
  const podPath = (ns, name = '') => `/api/v1/namespaces/${ns}/pods${name && `/${name}`}`;
  const createPod = async ({ ns, name, labels, ip, node = `${P}elsewhere`, hostIP = '192.168.99.1' }) => {
    await post(podPath(ns), { metadata: { name, labels }, spec: { nodeName: node, containers: [{ name: 'c', image: 'pause' }] } });
    return patch(`${podPath(ns, name)}/status`, { status: { phase: 'Running', hostIP, podIP: ip, podIPs: [{ ip }] } });
  };
  /** Cluster pod i: in namespace i mod 10, labels app a<i mod 20> and role r<i mod 5>. */
  const clusterPod = (i) => ({ ns: nsName(i % NAMESPACES), name: `p${i}`, labels: { app: `a${i % 20}`, role: `r${i % 5}` }, ip: podIp(i) });
  /** Filler policy i: in namespace i mod 10, for app a<i mod 20> from role r<i mod 5> of the
   * next namespace, on one port; every tenth one (namespace 0) selects tier=web, so the two
   * agents' own pods (tier=web) are selected by a tenth of the policies. */
  const fillerPolicy = (i) => ({
    apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy',
    metadata: { namespace: nsName(i % NAMESPACES), name: `f${i}` },
    spec: {
      podSelector: { matchLabels: i % NAMESPACES === 0 ? { tier: 'web' } : { app: `a${i % 20}` } },
      ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: `t${(i + 1) % NAMESPACES}` } }, podSelector: { matchLabels: { role: `r${i % 5}` } } }], ports: [{ port: 80 + (i % 50) }] }],
    },
  });
  const policyPath = (ns, name = '') => `/apis/networking.k8s.io/v1/namespaces/${ns}/networkpolicies${name && `/${name}`}`;
  // The policy the measured changes go through: the agents' own pods (app=target) from pods
  // app=client of namespace 0.
  const targetPolicy = (name) => ({
    apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { namespace: NS0, name },
    spec: { podSelector: { matchLabels: { app: 'target' } }, ingress: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }] }] },
  });
  await post(policyPath(NS0), targetPolicy('target'));
  // Clients and the pods the changes relabel live in namespace 0 at addresses of their own.
  let extraIp = 25_000; // pod numbers past any cluster pod's (room for 7,700 more)
  const extraPod = (name, labels) => ({ ns: NS0, name, labels, ip: podIp(extraIp++) });
  const client = extraPod('client0', { app: 'client' });
  await createPod(client);

  // ---- the agents --------------------------------------------------------------------------
  log('knit');
  const kp = `${P}k`.replace(/-/g, '');
  const knit = await startDaemon({
    prefix: kp, subnet: '10.250.0.0/24', netns: knitNs,
    nodeFlags: process.env.KNIT_NODE_FLAGS !== undefined ? process.env.KNIT_NODE_FLAGS.split(/\s+/).filter(Boolean) : launcherNodeFlags(),
    config: { logLevel: 'warn', metricsAddress: `127.0.0.1:${METRICS_PORT}`, networkPolicy: { kubeconfig: cp.adminKubeconfig } },
  }, { NODE_NAME: knitNode });
  cleanup.defer('knit', () => cleanupDaemon(knit, { prefix: kp }, [`${P}target`]));
  const table = `knit-${kp}-policy`;
  // knit's pod: in the API first (its admit reads its labels), then attached.
  const podNs = `${P}target`;
  execFileSync('ip', ['netns', 'add', podNs]);
  cleanup.defer(`netns ${podNs}`, () => removeNetns(podNs));
  const knitPodIp = '10.250.0.2'; // the first address knit gives (the gateway is .1)
  await createPod({ ns: NS0, name: 'target-knit', labels: { app: 'target', tier: 'web' }, ip: knitPodIp, node: knitNode });
  const attached = (await knit.call('Attach', runcAttachReq(`${P}target`, `/run/netns/${podNs}`, { podNamespace: NS0, podName: 'target-knit' }))).result;
  if (attached.ips[0].address.split('/')[0] !== knitPodIp) throw new Error(`knit gave ${attached.ips[0].address}, not ${knitPodIp}`);

  let kr;
  if (krBin) {
    log(`kube-router (${krBin})`);
    await createPod({ ns: NS0, name: 'target-kr', labels: { app: 'target', tier: 'web' }, ip: KR_POD_IP, node: `${P}kr`, hostIP: KR_NODE_IP });
    kr = await startKubeRouter({ bin: krBin, ns: krNs, nodeName: `${P}kr`, kubeconfig: cp.adminKubeconfig, dir, startService, waitReady });
    cleanup.defer('kube-router', async () => {
      await kr.stop();
      // What it made lives in its netns (gone with it), except ipsets, which are per netns too.
    });
  }

  // ---- the observers -----------------------------------------------------------------------
  const sha12 = (s) => createHash('sha256').update(s).digest('hex').slice(0, 12);
  /** knit's set of a rule of no ports (compile.ts's name: direction, family, kind, hash). */
  const knitSet = (policy) => `i4a_${sha12(`${NS0}/${policy}\n0\n`)}`;
  const nftIn = (...a) => run('ip', ['netns', 'exec', knitNs, 'nft', '-j', ...a], { maxBuffer: 64 << 20 }).then((r) => r.stdout, () => '');
  /** Whether each agent's kernel lets `ip` in through `policy`'s rule. */
  const has = {
    knit: async (policy, ip) => (await nftIn('list', 'set', 'inet', table, knitSet(policy))).includes(`"${ip}"`),
    'kube-router': (policy, ip) => run('ip', ['netns', 'exec', krNs, 'ipset', 'test', ingressPeerSet(NS0, policy, 0), ip]).then(() => true, () => false),
  };
  /** knit's own passes (change seen → transaction done): count and sum. */
  const knitPasses = () => {
    const text = execFileSync('ip', ['netns', 'exec', knitNs, 'curl', '-sf', `http://127.0.0.1:${METRICS_PORT}/metrics`], { encoding: 'utf8' });
    const value = (what) => Number(new RegExp(`knit_policy_apply_duration_seconds_${what}\\{outcome="ok"\\} ([0-9.e+-]+)`).exec(text)?.[1] ?? 0);
    return { count: value('count'), ms: value('sum') * 1000 };
  };
  const agents = [{ name: 'knit', pid: knit.child.pid }, ...(kr ? [{ name: 'kube-router', pid: kr.pid, svc: kr }] : [])];
  const alive = () => {
    if (knit.child.exitCode !== null || knit.child.signalCode !== null) throw new Error(`knit exited:\n${knit.logs.slice(-10).join('\n')}`);
    if (kr && !kr.running) throw new Error(`kube-router exited; its log ends:\n${kr.tail()}`);
  };
  /** Writes, then per agent the ms from the write's answer until `seen` holds in its kernel. */
  const observe = async (write, seen) => {
    const t0 = (await write()).at;
    const out = {};
    await Promise.all(agents.map(async (a) => {
      for (;;) {
        alive();
        if (await seen(a.name)) return void (out[a.name] = now() - t0);
        if (now() - t0 > OBSERVE_MS) return void (out[a.name] = Infinity);
        await new Promise((r) => setTimeout(r, 5));
      }
    }));
    return out;
  };
  /** A pod relabelled app=client, seen in both kernels: everything written before is in. */
  let settles = 0;
  const settle = async () => {
    const p = extraPod(`settle${settles++}`, { app: 'other' });
    await createPod(p);
    return observe(() => patch(podPath(NS0, p.name), { metadata: { labels: { app: 'client' } } }), (a) => has[a]('target', p.ip));
  };
  log('first settle');
  await settle();
  results.idleRss = Object.fromEntries(agents.map((a) => [a.name, rssMiB(a.pid)]));

  // ---- (a) the matrix ----------------------------------------------------------------------
  let pods = 0;
  let policies = 0;
  const grow = async (wantPods, wantPolicies) => {
    const t0 = now();
    if (wantPods > pods) await pool(Array.from({ length: wantPods - pods }, (_, k) => pods + k), IN_FLIGHT, (i) => createPod(clusterPod(i)));
    if (wantPolicies > policies) await pool(Array.from({ length: wantPolicies - policies }, (_, k) => policies + k), IN_FLIGHT, (i) => post(policyPath(nsName(i % NAMESPACES)), fillerPolicy(i)));
    if (wantPolicies < policies) await pool(Array.from({ length: policies - wantPolicies }, (_, k) => wantPolicies + k), IN_FLIGHT, (i) => del(policyPath(nsName(i % NAMESPACES), `f${i}`)));
    pods = Math.max(pods, wantPods);
    policies = wantPolicies;
    const written = now() - t0;
    const cpu0 = agents.map((a) => cpuMs(a.pid));
    const s = await settle();
    log(`  ${pods} pods, ${policies} policies written in ${(written / 1000).toFixed(1)} s; settled: ${JSON.stringify(s)}`);
    return { writtenMs: written, settleMs: s, settleCpuMs: Object.fromEntries(agents.map((a, k) => [a.name, cpuMs(a.pid) - cpu0[k]])) };
  };
  const cells = [];
  for (const n of POD_SIZES) {
    const sizes = cells.length % 2 ? [...POLICY_SIZES].reverse() : POLICY_SIZES; // fewest deletes
    for (const m of sizes) cells.push([n, m]);
  }
  let newPolicies = 0;
  for (const [n, m] of cells) {
    log(`cell: ${n} pods, ${m} policies`);
    const cell = { pods: n, policies: m, grow: await grow(n, m), changes: { policy: [], label: [], pod: [] } };
    const cpu0 = agents.map((a) => cpuMs(a.pid));
    const passes0 = knitPasses();
    for (let r = 0; r < REPS; r++) {
      // A new policy for the agents' pods from the client.
      const name = `new${newPolicies++}`;
      cell.changes.policy.push(await observe(() => post(policyPath(NS0), targetPolicy(name)), (a) => has[a](name, client.ip)));
      // A pod's label: now a client.
      const p = extraPod(`relabel${newPolicies}`, { app: 'other' });
      await createPod(p);
      await new Promise((res) => setTimeout(res, 200));
      cell.changes.label.push(await observe(() => patch(podPath(NS0, p.name), { metadata: { labels: { app: 'client' } } }), (a) => has[a]('target', p.ip)));
      // A new pod, a client: from its status write (its address) on.
      const q = extraPod(`new${newPolicies}`, { app: 'client' });
      await post(podPath(NS0), { metadata: { name: q.name, labels: q.labels }, spec: { nodeName: `${P}elsewhere`, containers: [{ name: 'c', image: 'pause' }] } });
      cell.changes.pod.push(await observe(() => patch(`${podPath(NS0, q.name)}/status`, { status: { phase: 'Running', hostIP: '192.168.99.1', podIP: q.ip, podIPs: [{ ip: q.ip }] } }), (a) => has[a]('target', q.ip)));
    }
    const passes = knitPasses();
    cell.knitPasses = { count: passes.count - passes0.count, meanMs: (passes.ms - passes0.ms) / (passes.count - passes0.count) };
    log(`  knit's passes: ${cell.knitPasses.count}, ${cell.knitPasses.meanMs.toFixed(1)} ms each`);
    cell.changeCpuMs = Object.fromEntries(agents.map((a, k) => [a.name, cpuMs(a.pid) - cpu0[k]]));
    cell.rss = Object.fromEntries(agents.map((a) => [a.name, rssMiB(a.pid)]));
    for (const kind of ['policy', 'label', 'pod']) {
      const by = (a) => cell.changes[kind].map((x) => x[a.name]);
      log(`  ${kind}: ${agents.map((a) => `${a.name} p50 ${pct(by(a), 0.5).toFixed(0)} ms (max ${Math.max(...by(a)).toFixed(0)})`).join(', ')}`);
    }
    results.cells.push(cell);
  }

  // ---- (c) knit's RSS with the cluster grown -----------------------------------------------
  if (withRss) {
    log(`RSS: ${RSS_PODS} pods, ${RSS_POLICIES} policies`);
    const g = await grow(RSS_PODS, RSS_POLICIES);
    await new Promise((r) => setTimeout(r, 5000)); // after the settle: what stays
    results.rss = { pods: RSS_PODS, policies: RSS_POLICIES, grow: g, rssMiB: Object.fromEntries(agents.map((a) => [a.name, rssMiB(a.pid)])) };
    log(`  RSS ${JSON.stringify(results.rss.rssMiB)}`);
  }
} catch (e) {
  log(`FAILED: ${e.stack ?? e}`);
  process.exitCode = 1;
} finally {
  await cleanupOnce();
}
console.log(JSON.stringify(results, (_k, v) => (v === Infinity ? 'timeout' : v), 1));
