#!/usr/bin/env node
// Route convergence of knit's cluster network (docs/cluster.md): how long from the node list
// changing to the kernel holding a route per node, at 10, 100 and 1,000 nodes. One knit in a
// node netns of its own (its uplink a veth holding 192.168.0.1/16, so every node address is on
// the link), crossNode routes, the nodes given literally (cluster.nodes) and changed by a config
// reload. Reported: the wall time from the file write to the last route seen by `ip route`
// (includes the 300 ms reload debounce and a 20 ms poll), and knit's own reconcile time (its
// knit_cluster_reconcile_duration_seconds: change seen → kernel done). Not through the API and
// with no contender beside it: see bench/README.md, "Cluster route convergence". Then: an attach
// (runc, gRPC) with no peers against one with the largest list in place, median of 30 each.
// Usage (root, after npm run build): node bench/cluster-convergence.mjs [10,100,1000]
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import * as grpc from '@grpc/grpc-js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const sizes = (process.argv[2] ?? '10,100,1000').split(',').map(Number);
const tag = `kbc${process.pid % 1000}`;
const ns = `${tag}-node`;
const peerNs = `${tag}-peer`;
const dir = mkdtempSync(path.join(os.tmpdir(), `knit-${tag}-`));
const ip = (...a) => execFileSync('ip', a, { stdio: ['ignore', 'pipe', 'pipe'] }).toString();
const metricsPort = 19000 + (process.pid % 1000);

const node = (i) => [`w${i}`, { podCIDRs: [`10.${100 + (i >> 8)}.${i & 255}.0/24`], internalIPs: [`192.168.${1 + (i >> 8)}.${i & 255}`] }];
const config = (n) => ({
  socket: path.join(dir, 'knit.sock'), runDir: path.join(dir, 'run'), stateDir: path.join(dir, 'state'), netnsDir: path.join(dir, 'netns'),
  handoffSocket: path.join(dir, 'handoff.sock'), cniSocket: path.join(dir, 'cni.sock'), cniDeleteQueue: path.join(dir, 'q'),
  instance: `knit-${tag}`, logLevel: 'warn', metricsAddress: `127.0.0.1:${metricsPort}`,
  cluster: { nodeName: 'w0', nodes: Object.fromEntries([node(0), ...Array.from({ length: n }, (_, i) => node(i + 1))]) },
  networks: [{ name: 'pods', mode: 'routed', ipv4: { subnet: 'node' }, crossNode: 'routes' }],
});
const routes = () => ip('-n', ns, 'route', 'show', 'proto', '201').split('\n').filter((l) => l.includes(' via ')).length;
const reconcileSum = () => {
  const text = execFileSync('ip', ['netns', 'exec', ns, 'curl', '-s', `http://127.0.0.1:${metricsPort}/metrics`]).toString();
  const sum = Number(/knit_cluster_reconcile_duration_seconds_sum\{outcome="ok"\} ([0-9.e-]+)/.exec(text)?.[1] ?? 0);
  const count = Number(/knit_cluster_reconcile_duration_seconds_count\{outcome="ok"\} ([0-9]+)/.exec(text)?.[1] ?? 0);
  return { sum, count };
};

let daemon;
try {
  ip('netns', 'add', ns);
  ip('netns', 'add', peerNs);
  ip('link', 'add', 'eth0', 'netns', ns, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', peerNs);
  ip('-n', ns, 'addr', 'add', '192.168.0.1/16', 'dev', 'eth0');
  for (const n of [ns, peerNs]) ip('-n', n, 'link', 'set', 'eth0', 'up'), ip('-n', n, 'link', 'set', 'lo', 'up');
  const file = path.join(dir, 'config.json');
  writeFileSync(file, JSON.stringify(config(0)));
  daemon = spawn('ip', ['netns', 'exec', ns, process.execPath, path.join(root, 'build/src/cli/main.js'), 'serve', '--config', file], { stdio: 'ignore' });
  const wait = async (ok, what) => {
    for (const end = Date.now() + 120_000; !ok();) {
      if (Date.now() > end) throw new Error(`timed out: ${what}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  await wait(() => { try { reconcileSum(); return true; } catch { return false; } }, 'knit up');
  console.log('nodes | file write → all routes (ms) | knit reconcile (ms) | back to none (ms)');
  for (const n of sizes) {
    const before = reconcileSum();
    const t0 = performance.now();
    writeFileSync(file, JSON.stringify(config(n)));
    await wait(() => routes() === n, `${n} routes`);
    const up = performance.now() - t0;
    await new Promise((r) => setTimeout(r, 200));
    const after = reconcileSum();
    const own = after.count > before.count ? ((after.sum - before.sum) / (after.count - before.count)) * 1000 : NaN;
    const t1 = performance.now();
    writeFileSync(file, JSON.stringify(config(0)));
    await wait(() => routes() === 0, 'routes removed');
    console.log(`${n} | ${up.toFixed(0)} | ${own.toFixed(1)} | ${(performance.now() - t1).toFixed(0)}`);
  }
  // Does a long peer list slow an attach? 30 attaches with none, 30 with the largest.
  const { knitProto } = await import(pathToFileURL(path.join(root, 'build/src/api/proto.js')).href);
  const { Knit } = knitProto();
  const client = new Knit(`unix://${path.join(dir, 'knit.sock')}`, grpc.credentials.createInsecure());
  const call = (m, req) => new Promise((res, rej) => client[m](req, (e, r) => (e ? rej(e) : res(r))));
  const attaches = async (label) => {
    const times = [];
    for (let i = 0; i < 30; i++) {
      const pod = `${tag}-p${i}`;
      ip('netns', 'add', pod);
      const t0 = performance.now();
      await call('Attach', { sandbox_id: `${tag}-${label}-${i}`, netns_path: `/run/netns/${pod}`, runtime: 'RUNC', interfaces: [{ name: 'eth0' }] });
      times.push(performance.now() - t0);
      await call('Detach', { sandbox_id: `${tag}-${label}-${i}` });
      ip('netns', 'del', pod);
    }
    return times.sort((a, b) => a - b)[15];
  };
  const none = await attaches('none');
  const big = Math.max(...sizes);
  writeFileSync(file, JSON.stringify(config(big)));
  await wait(() => routes() === big, `${big} routes`);
  const many = await attaches('many');
  console.log(`attach p50: ${none.toFixed(2)} ms with no peers, ${many.toFixed(2)} ms with ${big} (${(many / none).toFixed(2)}x)`);
  client.close();
} finally {
  if (daemon && daemon.exitCode === null) daemon.kill('SIGKILL');
  for (const n of [ns, peerNs, ...Array.from({ length: 30 }, (_, i) => `${tag}-p${i}`)]) try { ip('netns', 'del', n); } catch { /* gone */ }
  rmSync(dir, { recursive: true, force: true });
}
