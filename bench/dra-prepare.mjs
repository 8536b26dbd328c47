#!/usr/bin/env node
// knit's DRA driver, measured: what loading it costs a daemon (RSS over the modules the daemon
// loads anyway), and NodePrepareResources latency for 1, 8 and 64 claims in one call, through
// the kubelet's socket with a kubelet-side client built from the published protos. No SR-IOV
// hardware here: the VFs are a simulated sysfs and PF (test/fixtures/dra-node.ts), so the
// figures are knit's own work per claim (the API read stands in as a JSON object, the record
// writes, on tmpfs as /run/knit is on a node; sysfs reads, gRPC) plus a simulated PF-side vf.set,
// not a NIC's. Not a test;
// not side by side with dranet, which the Go module proxy does not serve here (bench/README.md).
// Usage: node bench/dra-prepare.mjs [runs=5] after `npm run build`.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const RUNS = Number(process.argv[2] ?? 5);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const b = (p) => pathToFileURL(path.join(root, 'build', p)).href;
const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
const mib = (v) => (v / 2 ** 20).toFixed(1);

// ---- import cost: fresh processes, after two full GCs ----
const daemonBase = `await import(${JSON.stringify(b('src/config/index.js'))}); await import('@grpc/grpc-js'); await import('@grpc/proto-loader');`;
const probe = (code) => `${code}\nglobalThis.gc(); globalThis.gc(); console.log(process.memoryUsage().rss);`;
const rss = (code) =>
  median(Array.from({ length: RUNS }, () => Number(execFileSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', probe(code)], { cwd: root, encoding: 'utf8' }).trim())));
const base = rss(daemonBase);
const withDra = rss(`${daemonBase} await import(${JSON.stringify(b('src/dra/index.js'))}); await import(${JSON.stringify(b('src/kube/index.js'))});`);
console.log(`node ${process.version}; RSS, median of ${RUNS} fresh processes`);
console.log('| what a daemon loads | RSS MiB | + |');
console.log('|---|---:|---:|');
console.log(`| config, grpc-js, proto-loader (a node without DRA) | ${mib(base)} | |`);
console.log(`| + src/dra and src/kube (the \`dra:\` block on) | ${mib(withDra)} | +${mib(withDra - base)} |`);

// ---- Prepare latency ----
const { createFakeSysfs } = await import(b('test/fixtures/fake-sysfs.js'));
const { SimulatedNetlink, simulatedRunner, resourceClaim, ClaimsInApi, DRIVER, POOL } = await import(b('test/fixtures/dra-node.js'));
const { draClient } = await import(b('test/fixtures/kubelet-client.js'));
const { DraDriver } = await import(b('src/dra/driver.js'));
const { kubeletSockets, startKubeletServer } = await import(b('src/dra/kubelet-server.js'));
const { RecordStore } = await import(b('src/store/index.js'));

const PF = '0000:3b:00.0';
const vfBdf = (i) => `0000:3b:${(1 + Math.floor(i / 8)).toString(16).padStart(2, '0')}.${i % 8}`;
const vfLink = (i) => ({ name: `bv${i}`, index: 1000 + i, mac: `02:00:00:00:${(i >> 8).toString(16).padStart(2, '0')}:${(i & 255).toString(16).padStart(2, '0')}` });

async function node(vfs) {
  const cleanups = [];
  const t = { teardown: (fn) => cleanups.push(fn) };
  const specs = [
    { bdf: PF, classCode: 0x020000, vendor: 0x15b3, device: 0x1017, driver: 'mlx5_core', iommuGroup: 30, sriovTotalVfs: 128, netdev: { name: 'ens1f0', mac: '0c:42:a1:00:00:00', mtu: 9000, ifindex: 4 } },
    ...Array.from({ length: vfs }, (_, i) => ({
      bdf: vfBdf(i), classCode: 0x020000, vendor: 0x15b3, device: 0x1018, driver: 'mlx5_core', iommuGroup: 100 + i,
      physfn: { pf: PF, index: i }, netdev: { name: vfLink(i).name, mac: vfLink(i).mac, mtu: 1500, ifindex: vfLink(i).index },
    })),
  ];
  const sysfs = await createFakeSysfs(t, specs, { rdmaNetnsMode: null });
  const dir = mkdtempSync(path.join('/dev/shm', 'knit-bench-dra-')); // a tmpfs, as /run/knit is (this VM's /run is not)
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const api = new ClaimsInApi();
  const records = await RecordStore.open(path.join(dir, 'claims'));
  const driver = new DraDriver({ driverName: DRIVER, nodeName: POOL, cdiDir: path.join(dir, 'cdi'), sysfs: sysfs.kernel, claims: api, records, runner: simulatedRunner(sysfs, new SimulatedNetlink(vfs, vfLink)) });
  const sockets = kubeletSockets(path.join(dir, 'registry'), path.join(dir, 'plugins'), DRIVER);
  const server = await startKubeletServer({ sockets, driver });
  const kubelet = draClient(sockets.plugin, 'v1');
  cleanups.push(async () => { kubelet.close(); await server.close(0); });
  const deviceName = (i) => `pci-${vfBdf(i).replace(/[:.]/g, '-')}`;
  const refs = Array.from({ length: vfs }, (_, i) =>
    api.add(resourceClaim({ name: `c${i}`, uid: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`, podUid: `pod-${i}`, results: [{ device: deviceName(i) }], config: [{ parameters: { vlan: 100 + i, spoofchk: false } }] })),
  );
  return { kubelet, refs, close: async () => { for (const f of cleanups.reverse()) await f(); } };
}

console.log('\n| claims in one NodePrepareResources | prepare ms (median) | per claim ms | unprepare ms |');
console.log('|---:|---:|---:|---:|');
for (const n of [1, 8, 64]) {
  const prep = [];
  const unprep = [];
  for (let r = 0; r < RUNS; r++) {
    const nd = await node(n);
    let t0 = performance.now();
    const res = await nd.kubelet.prepare(nd.refs);
    prep.push(performance.now() - t0);
    const failed = Object.values(res.claims).filter((c) => c.error);
    if (failed.length) throw new Error(`prepare failed: ${failed[0].error}`);
    t0 = performance.now();
    await nd.kubelet.unprepare(nd.refs);
    unprep.push(performance.now() - t0);
    await nd.close();
  }
  console.log(`| ${n} | ${median(prep).toFixed(1)} | ${(median(prep) / n).toFixed(2)} | ${median(unprep).toFixed(1)} |`);
}
