// Denied flows as JSON lines (networkPolicy.logDenied, docs/network-policy.md "Denied flows in
// a log"): knit in a node netns of its own (its netns-wide bridge-nf-call sysctls 0), pods
// attached over gRPC, policies from the literal lists, the log in a file. Real TCP and UDP
// sockets make the flows; nft -j (the log rules, the limit, the drop counters) is the observer
// beside the file: a denied connection is exactly one line however many packets the table
// dropped, an allowed one none.
import test from 'ava';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startDaemon, cleanupDaemon, eventually, runcAttachReq, type Daemon } from '../helpers/daemon.js';
import { uniquePrefix, makeNetns } from '../helpers/names.js';
import { sh, tcpServer, listening, tcpHello } from '../helpers/cluster-fabric.js';
import { udpListener, policyCounters } from '../helpers/policy-traffic.js';
import { NflogReader } from '../../src/net/nflog.js';

const literal = {
  namespaces: { x: { labels: { team: 'x' } }, y: { labels: { team: 'y' } } },
  pods: [
    { namespace: 'x', name: 'a', labels: { app: 'a' } },
    { namespace: 'x', name: 'b', labels: { app: 'b' } },
    { namespace: 'y', name: 'c', labels: { app: 'c' } },
  ],
  policies: [
    {
      metadata: { namespace: 'x', name: 'a-from-y' },
      spec: { podSelector: { matchLabels: { app: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'y' } } }], ports: [{ port: 8080 }, { port: 9000, protocol: 'UDP' }] }] },
    },
    {
      metadata: { namespace: 'y', name: 'c-to-x-8080' },
      spec: { podSelector: { matchLabels: { app: 'c' } }, policyTypes: ['Egress'], egress: [{ to: [{ namespaceSelector: { matchLabels: { team: 'x' } } }], ports: [{ port: 8080 }, { port: 9000, protocol: 'UDP' }] }] },
    },
  ],
};

/** One UDP datagram from ns to host:port. */
const datagram = (ns: string, host: string, port: number) =>
  sh(ns, process.execPath, '-e', `const s=require('dgram').createSocket('udp4');s.send('x',${port},'${host}',()=>s.close())`);

test('denied flows are JSON lines in the file: one per denied connection (naming pods, chain and policies), none for allowed ones', async (t) => {
  t.timeout(120_000);
  const started = Date.now();
  const P = uniquePrefix('pdl');
  const node = makeNetns(t, P, 'node').name;
  sh(node, 'sysctl', '-qw', 'net.bridge.bridge-nf-call-iptables=0', 'net.bridge.bridge-nf-call-ip6tables=0');
  sh(node, 'ip', 'link', 'set', 'lo', 'up');
  const dir = mkdtempSync(path.join(os.tmpdir(), `knit-${P}log-`));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'denied', 'flows.jsonl');
  const o = { prefix: P.replace(/-/g, ''), subnet: '10.247.12.0/24', netns: node, config: { networkPolicy: { literal, logDenied: { file, rate: '100/second', group: 7 } } } };
  const d: Daemon = await startDaemon(o);
  t.teardown(() => cleanupDaemon(d, o));
  const table = `knit-${o.prefix}-policy`;
  const attach = async (namespace: string, name: string) => {
    const ns = makeNetns(t, P, `${namespace}${name}`);
    const r = (await d.call('Attach', runcAttachReq(`${P}${namespace}-${name}`, ns.path, { podNamespace: namespace, podName: name }))).result;
    return { ns: ns.name, ip: r.ips[0].address.split('/')[0] as string };
  };
  const a = await attach('x', 'a');
  const b = await attach('x', 'b');
  const c = await attach('y', 'c');
  await listening(tcpServer(t, a.ns, 8080));
  await listening(tcpServer(t, b.ns, 8081));
  const udp = udpListener(t, a.ns, 9000);
  await udp.ready;

  // Allowed: y/c → x/a over TCP 8080 and UDP 9000 (both policies allow them).
  t.is(tcpHello(c.ns, a.ip, 8080), `from ${c.ip}`);
  datagram(c.ns, a.ip, 9000);
  await eventually(() => udp.received().includes(c.ip), 'y/c\'s datagram at x/a', 10_000);
  // Denied: x/b → x/a:8080 (x/a's ingress; the client sends its SYN several times in its 3 s),
  // one datagram x/b → x/a:9000, and y/c → x/b:8081 (y/c's egress).
  t.is(tcpHello(b.ns, a.ip, 8080), '');
  datagram(b.ns, a.ip, 9000);
  t.is(tcpHello(c.ns, b.ip, 8081), '');

  const lines = () => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)) : []);
  await eventually(() => lines().length >= 3, 'three lines in the file', 10_000);
  // The table dropped more packets than there are lines: the SYNs sent again are one flow.
  const counters = policyCounters(node, table);
  const dropped = Object.entries(counters).filter(([k]) => k.startsWith('d')).reduce((n, [, v]) => n + v, 0);
  t.true(dropped >= 5, `nft's drop counters: ${JSON.stringify(counters)}`);
  await new Promise((r) => setTimeout(r, 1500));
  const got = lines();
  t.is(got.length, 3, JSON.stringify(got, null, 1));
  for (const l of got) {
    t.true(Date.parse(l.time) >= started - 1000 && Date.parse(l.time) <= Date.now(), `time ${l.time} is the packet's`);
    if (l.protocol === 'TCP') t.is(typeof l.sport, 'number');
  }
  const strip = ({ time, sport, chain, ...rest }: any) => ({ ...rest, chain: chain.slice(0, 4) });
  t.deepEqual(got.map(strip), [
    { direction: 'ingress', protocol: 'TCP', src: b.ip, dst: a.ip, dport: 8080, srcPod: 'x/b', dstPod: 'x/a', chain: 'gi4_', policies: ['x/a-from-y'] },
    { direction: 'ingress', protocol: 'UDP', src: b.ip, dst: a.ip, dport: 9000, srcPod: 'x/b', dstPod: 'x/a', chain: 'gi4_', policies: ['x/a-from-y'] },
    { direction: 'egress', protocol: 'TCP', src: c.ip, dst: b.ip, dport: 8081, srcPod: 'y/c', dstPod: 'x/b', chain: 'ge4_', policies: ['y/c-to-x-8080'] },
  ]);
  t.false(udp.received().includes(b.ip), 'x/b\'s datagram never arrived');

  // nft -j: each group chain logs to group 7 through the one limit, with its own name as prefix.
  const nft = JSON.parse(sh(node, '/usr/sbin/nft', '-j', 'list', 'table', 'inet', table)).nftables as any[];
  const limits = nft.filter((x) => x.limit).map((x) => x.limit);
  t.deepEqual(limits.map((l) => [l.rate, l.per, l.burst]), [[100, 'second', 20]]);
  const logRules = nft.filter((x) => x.rule?.expr?.some((e: any) => e.log)).map((x) => x.rule);
  t.deepEqual(logRules.map((r) => r.chain).sort(), nft.filter((x) => x.chain?.name.startsWith('g')).map((x) => x.chain.name).sort(), 'every group chain logs');
  for (const r of logRules) {
    t.deepEqual(r.expr.find((e: any) => e.log).log, { prefix: r.chain, group: 7 });
    t.is(r.expr.find((e: any) => e.limit).limit, limits[0].name);
  }
  t.false(d.logs.some((l) => l.includes('NetworkPolicy denied')), 'with a file, the lines go there only');
});

test('the nflog reader: a group is one socket\'s in a netns (a second bind is refused, EPERM naming the group); closed, the group is free', (t) => {
  const P = uniquePrefix('pdn');
  const ns = makeNetns(t, P, 'n');
  const first = new NflogReader(ns.path, 9, 128, () => {});
  t.teardown(() => first.close());
  const err = t.throws(() => new NflogReader(ns.path, 9, 128, () => {})) as Error & { code?: string };
  t.is(err.code, 'EPERM');
  t.regex(err.message, new RegExp(`nflog group 9 in ${ns.path}`));
  first.close();
  const again = new NflogReader(ns.path, 9, 128, () => {});
  again.close();
  t.pass();
});
