#!/usr/bin/env node
// Pod-to-pod traffic through knit's NetworkPolicy table (issue 35 (b); bench/README.md,
// "NetworkPolicy"): two pods on one knit bridge, a client in namespace y and a server in x,
// measured three ways in one run:
//   none   knit without networkPolicy (no policy engine at all); then the same with conntrack
//          on in the node netns (one table of the bench's with a ct rule), as a node with
//          kube-proxy has it
//   0      knit with networkPolicy on and no policy (the table's base chain, nothing isolated)
//   1000   1,000 policies in x, a tenth of them selecting the server (100 rules of other
//          namespaces' pods on other ports, looked up before the one that allows the client:
//          its policy sorts last), the rest other pods
// Each: TCP request/response on one connection (rr) and on a new connection per transaction
// (crr; every one passes the server's chain, the others ride conntrack), with tcp-rr.c (one
// byte each way, as netperf's TCP_RR/TCP_CRR), and throughput with iperf3. The policy cases
// come from a literal list (networkPolicy.literal): the datapath is the same whatever the
// source, and a reload changes the table without re-attaching the pods.
//
// Each figure is the best of --rounds runs.
//
// Usage (root, after npm run build): node bench/policy/traffic.mjs [--seconds 5] [--rounds 2] [--policies 1000]
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const built = (p) => import(pathToFileURL(path.join(root, 'build', p)).href);
const { Cleanup } = await built('test/fixtures/cleanup.js');
const { uniquePrefix, removeNetns } = await built('test/helpers/names.js');
const { startDaemon, cleanupDaemon, runcAttachReq, eventually } = await built('test/helpers/daemon.js');
const { launcherNodeFlags } = await built('bench/lib/knit-process.js');

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : dflt;
};
const SECONDS = Number(opt('seconds', '5'));
const ROUNDS = Number(opt('rounds', '2'));
const POLICIES = Number(opt('policies', '1000'));
const log = (s) => process.stderr.write(`policy-traffic: ${s}\n`);
const P = uniquePrefix('kbt');
const RR_PORT = 7000;
const IPERF_PORT = 5201;

const cleanup = new Cleanup();
let cleaning;
const cleanupOnce = () => (cleaning ??= cleanup.run().catch((e) => log(e.message)));
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, () => void cleanupOnce().finally(() => process.exit(130)));

const inNs = (ns, ...argv) => execFileSync('ip', ['netns', 'exec', ns, ...argv], { encoding: 'utf8' });
/** A server in a netns until the bench ends; resolves once it prints its first line. */
function server(ns, argv) {
  const child = spawn('ip', ['netns', 'exec', ns, ...argv], { stdio: ['ignore', 'pipe', 'inherit'] });
  cleanup.defer(`server ${argv[0]}`, () => child.kill('SIGKILL'));
  return new Promise((resolve) => child.stdout.once('data', () => resolve(child)));
}

const literal = (n) => {
  const policies = [];
  for (let i = 0; i < n - 1; i++) {
    policies.push({
      metadata: { namespace: 'x', name: `f${String(i).padStart(4, '0')}` },
      spec: {
        podSelector: { matchLabels: i % 10 === 0 ? { app: 'srv' } : { app: `a${i % 20}` } },
        ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: `t${i % 7}` } }, podSelector: { matchLabels: { role: `r${i % 5}` } } }], ports: [{ port: 80 + (i % 50) }] }],
      },
    });
  }
  if (n) policies.push({ metadata: { namespace: 'x', name: 'zz-allow-y' }, spec: { podSelector: { matchLabels: { app: 'srv' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'y' } } }] }] } });
  return {
    namespaces: { x: { labels: { team: 'x' } }, y: { labels: { team: 'y' } } },
    pods: [{ namespace: 'x', name: 'srv', labels: { app: 'srv' } }, { namespace: 'y', name: 'cli', labels: { app: 'cli' } }],
    policies,
  };
};

const results = { prefix: P, date: new Date().toISOString(), load: os.loadavg()[0], seconds: SECONDS, runs: {} };
try {
  const dir = mkdtempSync(path.join(os.tmpdir(), `knit-${P}traffic-`));
  cleanup.defer('bench dir', () => rmSync(dir, { recursive: true, force: true }));
  const rr = path.join(dir, 'tcp-rr');
  execFileSync('cc', ['-O2', '-Wall', '-o', rr, path.join(root, 'bench/policy/tcp-rr.c')]);
  const node = `${P}node`;
  const nss = { srv: `${P}srv`, cli: `${P}cli` };
  for (const ns of [node, nss.srv, nss.cli]) {
    execFileSync('ip', ['netns', 'add', ns]);
    cleanup.defer(`netns ${ns}`, () => removeNetns(ns));
  }
  inNs(node, 'ip', 'link', 'set', 'lo', 'up');
  // As the kernel tests run knit: the netns-wide switches off (knit's table must not need them).
  inNs(node, 'sysctl', '-qw', 'net.bridge.bridge-nf-call-iptables=0', 'net.bridge.bridge-nf-call-ip6tables=0');

  /** knit with or without policy, the two pods attached; answers the daemon and the server's address. */
  const up = async (tag, policy) => {
    const o = { prefix: `${P}${tag}`.replace(/-/g, ''), subnet: '10.252.0.0/24', netns: node, nodeFlags: launcherNodeFlags(), config: { logLevel: 'warn', ...(policy && { networkPolicy: { literal: policy } }) } };
    const d = await startDaemon(o);
    const ids = [`${P}${tag}srv`, `${P}${tag}cli`];
    const down = () => cleanupDaemon(d, o, ids);
    cleanup.defer(`knit ${tag}`, down);
    const ips = {};
    for (const [k, id] of [['srv', ids[0]], ['cli', ids[1]]]) {
      const r = (await d.call('Attach', runcAttachReq(id, `/run/netns/${nss[k]}`, { podNamespace: k === 'srv' ? 'x' : 'y', podName: k }))).result;
      ips[k] = r.ips[0].address.split('/')[0];
    }
    return { d, o, ips, down: async () => {
      for (const id of ids) await d.call('Detach', { sandbox_id: id }).catch(() => undefined);
      await down();
    } };
  };
  /** The best of ROUNDS runs of each figure (the machine is shared: the best is the least disturbed). */
  const measure = async (name, srvIp) => {
    const runs = [];
    for (let r = 0; r < ROUNDS; r++) runs.push(await measureOnce(name, srvIp));
    return Object.fromEntries(Object.keys(runs[0]).map((k) => [k, Math.max(...runs.map((x) => x[k]))]));
  };
  const measureOnce = async (name, srvIp) => {
    const rrSrv = await server(nss.srv, [rr, 'server', String(RR_PORT)]);
    const iperf = await server(nss.srv, ['iperf3', '-s', '-p', String(IPERF_PORT), '--forceflush']);
    const [n1, s1] = inNs(nss.cli, rr, 'rr', srvIp, String(RR_PORT), String(SECONDS)).trim().split(' ').map(Number);
    const [n2, s2] = inNs(nss.cli, rr, 'crr', srvIp, String(RR_PORT), String(SECONDS)).trim().split(' ').map(Number);
    const j = JSON.parse(inNs(nss.cli, 'iperf3', '-c', srvIp, '-p', String(IPERF_PORT), '-t', String(SECONDS), '-J'));
    rrSrv.kill('SIGKILL');
    iperf.kill('SIGKILL');
    const out = { rrPerS: n1 / s1, crrPerS: n2 / s2, gbps: j.end.sum_received.bits_per_second / 1e9 };
    log(`${name}: rr ${out.rrPerS.toFixed(0)}/s, crr ${out.crrPerS.toFixed(0)}/s, ${out.gbps.toFixed(2)} Gbit/s`);
    return out;
  };

  log('none: knit without networkPolicy');
  const a = await up('a');
  results.runs.none = await measure('none', a.ips.srv);
  // The same with conntrack on in the node netns (a table of the bench's with one ct rule), as
  // on a node whose kube-proxy rules already track every flow.
  const ct = `${P}ct`.replace(/-/g, '');
  execFileSync('ip', ['netns', 'exec', node, 'nft', '-f', '-'], { input: `table inet ${ct} {\n\tchain track {\n\t\ttype filter hook forward priority 10; policy accept;\n\t\tct state invalid drop\n\t}\n}\n` });
  results.runs.noneConntrack = await measure('none, conntrack on', a.ips.srv);
  execFileSync('ip', ['netns', 'exec', node, 'nft', 'delete', 'table', 'inet', ct]);
  await a.down();

  log('knit with networkPolicy, no policy');
  const b = await up('b', literal(0));
  results.runs['0'] = await measure('0 policies', b.ips.srv);
  log(`knit with ${POLICIES} policies`);
  const cfg = JSON.parse(readFileSync(b.d.configPath, 'utf8'));
  cfg.networkPolicy.literal = literal(POLICIES);
  writeFileSync(b.d.configPath, JSON.stringify(cfg));
  // The server is isolated once its address is in the map (its chain holds the 101 rules).
  const table = `knit-${b.o.prefix}-policy`;
  await eventually(() => inNs(node, 'nft', 'list', 'map', 'inet', table, 'in4').includes(b.ips.srv), 'the server isolated', 60_000);
  const chain = /jump (\S+)/.exec(inNs(node, 'nft', 'get', 'element', 'inet', table, 'in4', `{ ${b.ips.srv} }`))?.[1];
  results.serverChainRules = chain ? inNs(node, 'nft', 'list', 'chain', 'inet', table, chain).split('\n').filter((l) => l.includes('@')).length : undefined;
  log(`the server's chain: ${chain}, ${results.serverChainRules} set lookups`);
  results.runs[String(POLICIES)] = await measure(`${POLICIES} policies`, b.ips.srv);
  await b.down();
} catch (e) {
  log(`FAILED: ${e.stack ?? e}`);
  process.exitCode = 1;
} finally {
  await cleanupOnce();
}
console.log(JSON.stringify(results, null, 1));
