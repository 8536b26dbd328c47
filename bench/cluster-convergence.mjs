#!/usr/bin/env node
// Route convergence of knit's cluster network (docs/cluster.md) beside flannel, through a real
// Kubernetes API: how long from a Node object appearing (or being deleted, or getting its
// podCIDR, or changing address) to the route for it being in each agent's kernel, at 10, 100 and
// 1,000 nodes; and whether a knit with 1,000 peers attaches a pod as fast as one with none.
//
// etcd and kube-apiserver from the test cluster (test/fixtures/kube-cluster.ts, built from the
// module proxy); its controller manager and scheduler are stopped once up, so the only writes
// are the bench's (no allocator racing it for podCIDRs, no lifecycle controller tainting Nodes
// that have no kubelet). Two node netns joined by a veth, 192.168.0.0/16 on it, so every Node
// address is on-link and no real peer is needed: knit in one (routed network, its podCIDR
// from its Node, crossNode: routes, reading Nodes with a ServiceAccount token as in a pod),
// flanneld in the other (kube subnet manager, host-gw backend: scripts/build-peers.sh). The
// bench's Nodes carry both what knit reads (spec.podCIDRs, an InternalIP) and flannel's
// annotations, so both agents route the same peers. Creates and deletes go 16 at a time.
//
// Times: from the API server's answer to the bench's write (the client's wall clock) to the
// route's RTM_NEWROUTE / RTM_DELROUTE in the agent's netns, as `ip -ts monitor route` stamped it
// (bench/cluster/route-monitor.mjs). p50 and p99 over the nodes of a step, and the wall time
// from the first write to the last route. Then the kernel is checked with `ip -j route`. Also:
// each agent's CPU time per step, knit's own reconcile passes (its metrics), both RSS.
//
// --vxlan: knit's crossNode vxlan (on a bridge network, which vxlan needs) beside flannel's vxlan backend (a VTEP each; per peer a route,
// neighbour and FDB entry, the route last in both, so its event marks the peer complete), the
// Nodes annotated with a VTEP MAC for flannel. An address change moves FDB entries, not routes:
// that step is left out.
//
// Usage (root, after npm run build): node bench/cluster-convergence.mjs [10,100,1000] [--vxlan] [--knit-only]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { cpuMs, pct, rssMiB } from './cluster/proc.mjs';
import { adminApi, flannelAnnotations, FLANNEL_PUBLIC_IP, nodeObject, now, pool } from './cluster/api.mjs';
import { firstEvents, routeMonitor } from './cluster/route-monitor.mjs';
import { flanneldBinary, startFlannel } from './cluster/flannel.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const built = (p) => import(pathToFileURL(path.join(root, 'build', p)).href);
const { startControlPlane } = await built('test/fixtures/kube-cluster.js');
const { Cleanup } = await built('test/fixtures/cleanup.js');
const { startService, waitReady } = await built('test/fixtures/service.js');
const { uniquePrefix, removeNetns } = await built('test/helpers/names.js');
const { startDaemon, cleanupDaemon, runcAttachReq } = await built('test/helpers/daemon.js');
const { startRelay } = await built('test/helpers/cluster-fabric.js');
const { launcherNodeFlags } = await built('bench/lib/knit-process.js');

const args = process.argv.slice(2);
// Ascending: the largest step's Nodes stay for the attach and change steps, then go.
const sizes = [...new Set((args.find((a) => /^[0-9,]+$/.test(a)) ?? '10,100,1000').split(',').map(Number))].sort((a, b) => a - b);
const withFlannel = !args.includes('--knit-only');
const CROSS = args.includes('--vxlan') ? 'vxlan' : 'routes';
const FLANNEL_BACKEND = CROSS === 'vxlan' ? 'vxlan' : 'host-gw';
const IN_FLIGHT = 16;
const CHANGES = 20; // nodes given a podCIDR, then a new address, one at a time
const ATTACHES = 30;
const log = (s) => process.stderr.write(`cluster-convergence: ${s}\n`);

const P = uniquePrefix('kcv');
const knitNs = `${P}knit`;
const flanNs = `${P}flan`;
// Bench node i (from 1): a /24 of 10.200.0.0/13, an address of the fabric's /16, a VTEP MAC.
const hex = (b) => b.toString(16).padStart(2, '0');
const benchNode = (i, name) => ({ name, cidr: `10.${201 + (i >> 8)}.${i & 255}.0/24`, ip: `192.168.${1 + (i >> 8)}.${i & 255}`, mac: `0e:6b:00:00:${hex(i >> 8)}:${hex(i & 255)}` });
const NETWORK = '10.200.0.0/13'; // room for 1,790 bench nodes
const METRICS_PORT = 19464; // on knit's node netns's own loopback

const cleanup = new Cleanup();
let cleaning;
const cleanupOnce = () => (cleaning ??= cleanup.run().catch((e) => log(e.message)));
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, () => void cleanupOnce().finally(() => process.exit(130)));

const results = { prefix: P, crossNode: CROSS, date: new Date().toISOString(), load: os.loadavg()[0], rounds: [], changes: undefined, attach: undefined, memory: {} };
try {
  if (process.getuid() !== 0) throw new Error('needs root (netns, veths, routes)');
  if (!sizes.every((n) => n >= 1) || sizes.at(-1) + CHANGES > 1790) throw new Error(`node counts must be 1 to ${1790 - CHANGES}: got ${sizes.join(',')}`);
  const dir = mkdtempSync(path.join(os.tmpdir(), `knit-${P}conv-`));
  cleanup.defer('bench dir', () => rmSync(dir, { recursive: true, force: true }));
  const flanneld = withFlannel ? flanneldBinary(root) : undefined;

  log(`${P}: control plane`);
  const cp = await startControlPlane({ teardown: (fn) => cleanup.defer('control plane', fn) }, { prefix: P });
  for (const s of cp.services) if (!['etcd', 'kube-apiserver'].includes(s.name)) await s.stop();
  const api = adminApi(cp, IN_FLIGHT);
  cleanup.defer('api client', () => api.close());

  // knit's own manifests (its namespace, ServiceAccount, nodes get/list/watch) and a token for it.
  const deploy = (f) => path.join(root, 'deploy', f);
  await cp.kubectl('apply', '-f', deploy('namespace.yaml'), '-f', deploy('serviceaccount.yaml'), '-f', deploy('rbac.yaml'));
  const knitKubeconfig = cp.kubeconfigFor((await cp.kubectl('create', 'token', 'knit', '-n', 'knit-system', '--duration=3600s')).trim());

  // The two node netns and the fabric between them.
  for (const ns of [knitNs, flanNs]) {
    execFileSync('ip', ['netns', 'add', ns]);
    cleanup.defer(`netns ${ns}`, () => removeNetns(ns));
  }
  execFileSync('ip', ['link', 'add', 'eth0', 'netns', knitNs, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', flanNs]);
  const self = { knit: { name: `${P}knit`, cidr: '10.200.0.0/24', ip: '192.168.0.1' }, flannel: { name: `${P}flan`, cidr: '10.200.1.0/24', ip: '192.168.0.2', mac: '0e:6b:00:00:ff:02' } };
  for (const [ns, me] of [[knitNs, self.knit], [flanNs, self.flannel]]) {
    execFileSync('ip', ['-n', ns, 'addr', 'add', `${me.ip}/16`, 'dev', 'eth0']);
    for (const l of ['eth0', 'lo']) execFileSync('ip', ['-n', ns, 'link', 'set', l, 'up']);
  }
  const port = Number(new URL(cp.server).port);
  const sock = path.join(dir, 'api.sock');
  for (const ns of [undefined, knitNs, flanNs]) {
    const r = startRelay(port, sock, ns);
    cleanup.defer('relay', () => r.stop());
    await r.up;
  }

  // The agents' own Nodes. knit's has no flannel annotations: flannel leaves it alone, and the
  // bench counts only its own nodes' routes on either side.
  await api.createNode({ ...nodeObject(self.knit, FLANNEL_BACKEND), metadata: { name: self.knit.name } });
  await api.createNode(nodeObject(self.flannel, FLANNEL_BACKEND));

  log('knit');
  const kp = `${P}k`.replace(/-/g, '');
  // startDaemon makes its dir first; should the daemon not come up, nothing else removes it.
  cleanup.defer('knit dir', () => {
    for (const f of readdirSync(os.tmpdir())) if (f.startsWith(`knit-${kp}-`)) rmSync(path.join(os.tmpdir(), f), { recursive: true, force: true });
  });
  const knit = await startDaemon({
    // As the DaemonSet runs it: bin/knit's node flags (its RSS is the footprint figure), or
    // KNIT_NODE_FLAGS's.
    prefix: kp, subnet: self.knit.cidr, netns: knitNs, nodeFlags: process.env.KNIT_NODE_FLAGS !== undefined ? process.env.KNIT_NODE_FLAGS.split(/\s+/).filter(Boolean) : launcherNodeFlags(),
    config: { logLevel: 'warn', metricsAddress: `127.0.0.1:${METRICS_PORT}`, networks: [{ name: `${P}pods`, ...(CROSS === 'vxlan' ? { mode: 'bridge', bridge: 'cbr0' } : { mode: 'routed' }), ipv4: { subnet: 'node' }, crossNode: CROSS }], cluster: { nodeName: self.knit.name, kubeconfig: knitKubeconfig } },
  });
  cleanup.defer('knit', () => cleanupDaemon(knit, { prefix: kp }));
  for (const end = Date.now() + 60_000; !(await knit.call('NodeStatus', {})).ready;) {
    if (Date.now() > end) throw new Error(`knit not ready: ${(await knit.call('NodeStatus', {})).message}`);
    await new Promise((r) => setTimeout(r, 100));
  }

  /** knit's own count and sum of reconcile passes (change seen → kernel done). */
  const knitPasses = () => {
    const text = execFileSync('ip', ['netns', 'exec', knitNs, 'curl', '-sf', `http://127.0.0.1:${METRICS_PORT}/metrics`], { encoding: 'utf8' });
    const value = (what) => Number(new RegExp(`knit_cluster_reconcile_duration_seconds_${what}\\{outcome="ok"\\} ([0-9.e+-]+)`).exec(text)?.[1] ?? 0);
    return { count: value('count'), ms: value('sum') * 1000 };
  };
  const agents = [{ name: 'knit', ns: knitNs, pid: knit.child.pid, mine: (e) => e.proto === '201' }];
  if (flanneld) {
    log(`flanneld (${flanneld})`);
    const flannel = await startFlannel({ bin: flanneld, ns: flanNs, nodeName: self.flannel.name, iface: 'eth0', network: NETWORK, backend: FLANNEL_BACKEND, kubeconfig: cp.adminKubeconfig, dir, startService, waitReady });
    cleanup.defer('flanneld', () => flannel.stop());
    agents.push({ name: 'flannel', ns: flanNs, pid: flannel.pid, mine: (e) => e.proto === 'boot', service: flannel });
  }
  for (const a of agents) {
    a.mon = routeMonitor(a.ns);
    cleanup.defer(`ip monitor ${a.ns}`, () => a.mon.stop());
    await a.mon.ready();
  }
  const alive = () => {
    if (knit.child.exitCode !== null || knit.child.signalCode !== null) throw new Error(`knit exited; its last log lines:\n${knit.logs.slice(-10).join('\n')}`);
    for (const a of agents) if (a.service && !a.service.running) throw new Error(`flanneld exited; its log (${a.service.log}) ends:\n${a.service.tail()}`);
  };
  const added = (a, via) => (e) => (!e.deleted && e.via && a.mine(e) && (!via || e.via === via) ? e.dst : undefined);
  const deleted = (a) => (e) => (e.deleted && e.via && a.mine(e) ? e.dst : undefined);
  /** What each agent's kernel holds now for `nodes`, read apart from the monitor: routes via the
   * node's address (`ip -j route`); over VXLAN, routes via the block's network address, that
   * address's neighbour entry and an FDB entry towards the node (`ip -j neigh`, `bridge -j fdb`),
   * as "routes/neighbours/fdb". */
  const json = (cmd, ...argv) => JSON.parse(execFileSync(cmd, ['-j', '-n', ...argv], { encoding: 'utf8', maxBuffer: 64 << 20 }));
  const inKernel = (a, nodes) => {
    const gateway = (n) => (CROSS === 'vxlan' ? n.cidr.split('/')[0] : n.ip);
    const want = new Map(nodes.map((n) => [n.cidr, gateway(n)]));
    const routes = json('ip', a.ns, 'route', 'show').filter((r) => want.has(r.dst) && want.get(r.dst) === r.gateway).length;
    if (CROSS !== 'vxlan') return routes;
    const gateways = new Set(nodes.map(gateway));
    const ips = new Set(nodes.map((n) => n.ip));
    const neighs = json('ip', a.ns, 'neigh', 'show').filter((x) => gateways.has(x.dst)).length;
    const fdb = json('bridge', a.ns, 'fdb', 'show').filter((x) => ips.has(x.dst)).length;
    return `${routes}/${neighs}/${fdb}`;
  };

  /** One step: `write` each node (16 at a time), then per agent the time from each write's
   * answer to its route event (`keyOf`), and the wall time from the first write to the last. */
  const step = async (nodes, write, keyOf) => {
    const from = agents.map((a) => a.mon.events.length);
    const cpu0 = agents.map((a) => cpuMs(a.pid));
    const passes0 = knitPasses();
    const answered = new Map();
    const t0 = now();
    await pool(nodes, IN_FLIGHT, async (n) => answered.set(n.cidr, (await write(n)).at));
    const tApi = now();
    const out = { n: nodes.length, apiMs: tApi - t0, apiPerS: nodes.length / ((tApi - t0) / 1000), agents: {} };
    await Promise.all(agents.map(async (a, i) => {
      const { seen, missing } = await firstEvents(a.mon, from[i], nodes.map((n) => n.cidr), keyOf(a), 120_000 + nodes.length * 200, alive);
      const lat = [...seen].map(([cidr, t]) => t - answered.get(cidr));
      out.agents[a.name] = { p50: pct(lat, 0.5), p99: pct(lat, 0.99), allMs: seen.size ? Math.max(...seen.values()) - t0 : NaN, missing };
    }));
    alive();
    agents.forEach((a, i) => (out.agents[a.name].cpuMs = cpuMs(a.pid) - cpu0[i]));
    await new Promise((r) => setTimeout(r, 100)); // the metric is observed after the pass's last read
    const passes = knitPasses();
    out.agents.knit.passes = passes.count - passes0.count;
    out.agents.knit.passMs = (passes.ms - passes0.ms) / Math.max(1, out.agents.knit.passes);
    return out;
  };

  // Attach: a pod netns per attach, detached and removed after; p50 of ATTACHES.
  const attachP50 = async (label) => {
    const times = [];
    for (let i = 0; i < ATTACHES; i++) {
      const pod = `${P}p${i}`;
      execFileSync('ip', ['netns', 'add', pod]);
      try {
        const id = `${P}${label}${i}`;
        const t0 = performance.now();
        await knit.call('Attach', runcAttachReq(id, `/run/netns/${pod}`));
        times.push(performance.now() - t0);
        await knit.call('Detach', { sandbox_id: id });
      } finally {
        removeNetns(pod);
      }
    }
    return pct(times, 0.5);
  };
  log('attach warm-up');
  await attachP50('warm'); // JIT and caches warm before the measured runs

  const big = Math.max(...sizes);
  let kept = [];
  let attachNone;
  for (const n of sizes) {
    if (n === big) {
      // Right before the peers come and right after (below): the machine's load drifts.
      log('attach, no peers');
      attachNone = await attachP50('none');
    }
    const nodes = Array.from({ length: n }, (_, k) => benchNode(k + 1, `${P}n${n}-${k + 1}`));
    log(`${n} nodes: create`);
    const up = await step(nodes, (x) => api.createNode(nodeObject(x, FLANNEL_BACKEND)), (a) => added(a));
    up.kernel = Object.fromEntries(agents.map((a) => [a.name, inKernel(a, nodes)]));
    const round = { n, up };
    results.rounds.push(round);
    if (n === big) {
      kept = nodes; // deleted at the end: the attach and change steps run with them in place
      for (const a of agents) results.memory[a.name] = rssMiB(a.pid);
      continue;
    }
    log(`${n} nodes: delete`);
    round.down = await step(nodes, (x) => api.deleteNode(x.name), deleted);
    round.down.kernel = Object.fromEntries(agents.map((a) => [a.name, inKernel(a, nodes)]));
  }

  log(`attach, ${big} peers`);
  const attachMany = await attachP50('many');
  results.attach = { none: attachNone, many: attachMany, peers: big, ratio: attachMany / attachNone };

  // A Node registered without a podCIDR gets one (the allocator's write; flannel's annotations
  // in the same write, as its flanneld would add them next), then a new address (knit reads the
  // InternalIP, flannel its public-ip annotation: one write each, each agent timed from its own).
  log(`${CHANGES} nodes: podCIDR set, then address changed, one at a time, ${big} peers in place`);
  const change = { cidrSet: {}, moved: {}, deletesDuringMove: {}, refused: undefined };
  for (const a of agents) (change.cidrSet[a.name] = []), (change.moved[a.name] = []), (change.deletesDuringMove[a.name] = 0);
  const changed = [];
  for (let j = 1; j <= CHANGES; j++) {
    const n = benchNode(big + j, `${P}c${j}`);
    changed.push(n);
    await api.createNode(nodeObject({ ...n, cidr: undefined }, FLANNEL_BACKEND));
    let from = agents.map((a) => a.mon.events.length);
    const set = await api.patchNode(n.name, { metadata: { annotations: flannelAnnotations(n, FLANNEL_BACKEND) }, spec: { podCIDR: n.cidr, podCIDRs: [n.cidr] } });
    for (const [i, a] of agents.entries()) {
      const { seen } = await firstEvents(a.mon, from[i], [n.cidr], added(a), 60_000, alive);
      change.cidrSet[a.name].push(seen.get(n.cidr) - set.at);
    }
    if (j === 1) {
      // What "a podCIDR change" can be: the API refuses to change one that is set.
      const other = '10.207.0.0/24';
      change.refused = await api.patchNode(n.name, { spec: { podCIDR: other, podCIDRs: [other] } }).then(() => 'accepted', (e) => `${e.status} ${JSON.parse(e.body ?? '{}').message ?? e.message}`);
    }
    if (CROSS === 'vxlan') continue; // an address change moves FDB entries, not routes
    const moved = { ...n, ip: `192.168.100.${j}` };
    from = agents.map((a) => a.mon.events.length);
    const writes = {
      knit: () => api.patchNodeStatus(n.name, { status: { addresses: [{ type: 'InternalIP', address: moved.ip }, { type: 'Hostname', address: n.name }] } }),
      flannel: () => api.patchNode(n.name, { metadata: { annotations: { [FLANNEL_PUBLIC_IP]: moved.ip } } }),
    };
    for (const [i, a] of agents.entries()) {
      const w = await writes[a.name]();
      const { seen } = await firstEvents(a.mon, from[i], [n.cidr], added(a, moved.ip), 60_000, alive);
      change.moved[a.name].push(seen.get(n.cidr) - w.at);
    }
    // Did the route go away on the way (delete then add) or was it replaced in place?
    for (const [i, a] of agents.entries()) change.deletesDuringMove[a.name] += a.mon.events.slice(from[i]).filter((e) => e.deleted && e.dst === n.cidr).length;
    changed[changed.length - 1] = moved;
  }
  const stat = (all) => {
    const xs = all.filter((x) => !Number.isNaN(x)); // NaN: the route never came
    return { p50: pct(xs, 0.5), p99: pct(xs, 0.99), missing: all.length - xs.length };
  };
  results.changes = {
    n: CHANGES,
    refused: change.refused,
    cidrSet: Object.fromEntries(agents.map((a) => [a.name, stat(change.cidrSet[a.name])])),
    moved: Object.fromEntries(agents.map((a) => [a.name, stat(change.moved[a.name])])),
    deletesDuringMove: change.deletesDuringMove,
    kernel: Object.fromEntries(agents.map((a) => [a.name, inKernel(a, changed)])),
  };
  await pool(changed, IN_FLIGHT, (x) => api.deleteNode(x.name));
  await Promise.all(agents.map((a) => firstEvents(a.mon, 0, changed.map((x) => x.cidr), deleted(a), 60_000, alive)));

  log(`${big} nodes: delete`);
  const last = results.rounds.find((r) => r.n === big);
  last.down = await step(kept, (x) => api.deleteNode(x.name), deleted);
  last.down.kernel = Object.fromEntries(agents.map((a) => [a.name, inKernel(a, kept)]));

  results.loadAfter = os.loadavg()[0];
  report(results, agents.map((a) => a.name));
} catch (e) {
  log(`failed: ${e.stack ?? e}`);
  process.exitCode = 1;
} finally {
  await cleanupOnce();
}

function report(r, names) {
  const f = (x) => (x === undefined || Number.isNaN(x) ? '–' : x >= 100 ? x.toFixed(0) : x.toFixed(1));
  const ratio = (a, b) => (a && b ? `${(a / b).toFixed(2)}×` : '–');
  const out = [];
  out.push(`run ${r.prefix} ${r.date}, crossNode ${r.crossNode}, load average ${r.load.toFixed(1)} → ${r.loadAfter.toFixed(1)}; ms; p50 / p99 per node from the API's answer; "all": first write → last route`);
  out.push(`| nodes | step | API: all answered (writes/s) | ${names.map((n) => `${n} p50 / p99 | ${n} all`).join(' | ')} | ${names.length > 1 ? 'all knit/flannel' : ''} |`);
  out.push(`|---:|---|---:|${names.map(() => '---:|---:').join('|')}|---:|`);
  for (const round of r.rounds) {
    for (const [label, s] of [['create', round.up], ['delete', round.down]]) {
      if (!s) continue;
      const cells = names.map((n) => {
        const a = s.agents[n];
        return `${f(a.p50)} / ${f(a.p99)}${a.missing ? ` (${a.missing} missing)` : ''} | ${f(a.allMs)}`;
      });
      out.push(`| ${round.n} | ${label} | ${f(s.apiMs)} (${s.apiPerS.toFixed(0)}) | ${cells.join(' | ')} | ${names.length > 1 ? ratio(s.agents.knit.allMs, s.agents.flannel.allMs) : ''} |`);
    }
  }
  out.push('');
  out.push(`agent CPU during each step (ms), kernel check after it (the step's nodes with their ${r.crossNode === 'vxlan' ? 'routes/neighbours/FDB entries' : 'routes'} present):`);
  for (const round of r.rounds) {
    for (const [label, s] of [['create', round.up], ['delete', round.down]]) {
      if (!s) continue;
      const k = s.agents.knit;
      out.push(`  ${round.n} ${label}: ${names.map((n) => `${n} ${s.agents[n].cpuMs} ms CPU, ${s.kernel[n]} in kernel`).join('; ')}; knit ${k.passes} reconcile passes of ${f(k.passMs)} ms mean`);
    }
  }
  out.push(`RSS with ${Math.max(...r.rounds.map((x) => x.n))} peers (MiB): ${names.map((n) => `${n} ${r.memory[n]?.toFixed(1)}`).join(', ')}`);
  const c = r.changes;
  out.push(`${c.n} nodes one at a time: podCIDR set → route p50 / p99: ${names.map((n) => `${n} ${f(c.cidrSet[n].p50)} / ${f(c.cidrSet[n].p99)}`).join(', ')}`);
  if (r.crossNode === 'routes') out.push(`  address changed → route via the new one p50 / p99: ${names.map((n) => `${n} ${f(c.moved[n].p50)} / ${f(c.moved[n].p99)} (${c.deletesDuringMove[n]} route deletes on the way)`).join(', ')}`);
  out.push(`  in kernel after: ${names.map((n) => `${n} ${c.kernel[n]} of ${c.n}`).join(', ')}; changing a set podCIDR: ${c.refused}`);
  out.push(`attach p50: ${r.attach.none.toFixed(2)} ms with no peers, ${r.attach.many.toFixed(2)} ms with ${r.attach.peers} (${ratio(r.attach.many, r.attach.none)})`);
  console.log(out.join('\n'));
  console.log(JSON.stringify(r));
}
