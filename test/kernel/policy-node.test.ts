// NetworkPolicy on one node (docs/network-policy.md): knit in a node netns of its own whose
// netns-wide bridge-nf-call sysctls are 0 (only knit's per-bridge switch lets same-bridge
// traffic reach the hooks), pods attached over gRPC with a namespace and a name, policies from
// the config's literal lists. Observed with real TCP and UDP sockets and ping, with nft -j
// (knit's table, its maps and counters) and nft monitor, across config reloads and kill -9.
import test from 'ava';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { knitShimConf } from '../helpers/cni.js';
import { startDaemon, cleanupDaemon, eventually, reloadConfig, runcAttachReq, pingFrom, CLI, type Daemon } from '../helpers/daemon.js';
import { uniquePrefix, makeNetns } from '../helpers/names.js';
import { sh, tcpServer, listening, tcpHello, until } from '../helpers/cluster-fabric.js';
import { podMac } from '../../src/base/names.js';
import { udpListener, udpFlood, tcpEchoStream, policyCounters, policyTableJson } from '../helpers/policy-traffic.js';

interface Pod { ns: string; id: string; ip: string; name: string; namespace: string }

/** A node netns with the netns-wide switches off, knit in it, and a pod factory. */
async function setup(t: any, tag: string, subnet: string, literal: object) {
  const P = uniquePrefix(tag);
  const node = makeNetns(t, P, 'node').name;
  sh(node, 'sysctl', '-qw', 'net.bridge.bridge-nf-call-iptables=0', 'net.bridge.bridge-nf-call-ip6tables=0');
  sh(node, 'ip', 'link', 'set', 'lo', 'up');
  // The node netns has a loopback of its own: any port is free there.
  const o = { prefix: P.replace(/-/g, ''), subnet, netns: node, config: { networkPolicy: { literal }, metricsAddress: '127.0.0.1:9465' } };
  let d: Daemon = await startDaemon(o);
  t.teardown(() => cleanupDaemon(d, o));
  const table = `knit-${o.prefix}-policy`;
  const pods: Pod[] = [];
  const attach = async (namespace: string, name: string, extra: object = {}) => {
    const ns = makeNetns(t, P, `${namespace}${name}`);
    const id = `${P}${namespace}-${name}`;
    const r = (await d.call('Attach', runcAttachReq(id, ns.path, { podNamespace: namespace, podName: name, extra }))).result;
    const pod = { ns: ns.name, id, ip: r.ips[0].address.split('/')[0], name, namespace };
    pods.push(pod);
    return pod;
  };
  const reload = async (lit: object) => {
    await reloadConfig(d, (cfg) => (cfg.networkPolicy.literal = lit));
    // The pass after the change: the table holds what the new lists say once nft has run.
    await new Promise((r) => setTimeout(r, 300));
  };
  return { P, node, table, pods, attach, reload, daemon: () => d, setDaemon: (x: Daemon) => (d = x) };
}

const ns = (name: string, labels: object = {}) => [name, { labels }];
const xOnlyFromY = {
  namespaces: Object.fromEntries([ns('x', { team: 'x' }), ns('y', { team: 'y' })]),
  pods: [
    { namespace: 'x', name: 'a', labels: { app: 'a' } },
    { namespace: 'x', name: 'b', labels: { app: 'b' } },
    { namespace: 'y', name: 'c', labels: { app: 'c' } },
  ],
  policies: [{
    metadata: { namespace: 'x', name: 'a-from-y' },
    spec: { podSelector: { matchLabels: { app: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'y' } } }], ports: [{ port: 8080 }, { port: 9000, protocol: 'UDP' }] }] },
  }],
};

test('a pod a policy selects is isolated: only what its rules allow reaches it (TCP, UDP, ICMP), same bridge, with the netns-wide switches off', async (t) => {
  t.timeout(120_000);
  const s = await setup(t, 'pln', '10.247.1.0/24', xOnlyFromY);
  const a = await s.attach('x', 'a');
  const b = await s.attach('x', 'b');
  const c = await s.attach('y', 'c');
  const srv = tcpServer(t, a.ns, 8080);
  await listening(srv);
  t.is(tcpHello(c.ns, a.ip, 8080), `from ${c.ip}`, 'y/c → x/a:8080 allowed (namespaceSelector team=y)');
  t.is(tcpHello(b.ns, a.ip, 8080), '', 'x/b → x/a:8080 denied');
  const other = tcpServer(t, a.ns, 8081);
  await listening(other);
  t.is(tcpHello(c.ns, a.ip, 8081), '', 'y/c → x/a:8081 denied: the rule names 8080');
  t.false(pingFrom(c.ns, a.ip), 'ICMP: a rule with ports allows no ICMP');
  t.true(pingFrom(a.ns, b.ip), 'x/b is selected by nothing: it is reached, and a sends (egress is not isolated)');
  // UDP 9000 from y allowed, from x denied.
  const udp = udpListener(t, a.ns, 9000);
  await udp.ready;
  const deniedNow = () => Object.entries(policyCounters(s.node, s.table)).find(([k]) => k.startsWith('di_'))![1];
  const deniedBefore = deniedNow();
  const fromC = udpFlood(c.ns, a.ip, 9000);
  const fromB = udpFlood(b.ns, a.ip, 9000);
  await eventually(() => udp.received().length > 0 && deniedNow() > deniedBefore + 20, 'y/c\'s datagrams in, x/b\'s dropped', 30_000);
  await Promise.all([fromC.stop(), fromB.stop()]);
  t.deepEqual([...new Set(udp.received())], [c.ip], 'only y/c\'s datagrams arrived');
  // The independent observer: nft -j shows knit's table, a's address in the ingress map and no one else's.
  const tj = policyTableJson(s.node, s.table);
  t.deepEqual(Object.keys(tj.maps.in4!), [a.ip]);
  t.deepEqual(tj.maps.out4, {});
  const counters = policyCounters(s.node, s.table);
  const deny = Object.entries(counters).filter(([k]) => k.startsWith('di_'));
  const allow = Object.entries(counters).filter(([k]) => k.startsWith('ai_'));
  t.is(deny.length, 1);
  t.true(deny[0]![1] > 0, 'the policy\'s denied counter counted');
  t.true(allow[0]![1] > 0, 'and its allowed counter');
  const tables = JSON.parse(sh(s.node, '/usr/sbin/nft', '-j', 'list', 'tables')).nftables.filter((x: any) => x.table).map((x: any) => x.table.name);
  t.deepEqual(tables.filter((n: string) => n.endsWith('-policy')), [s.table], 'one policy table, knit\'s');
  // /metrics: the same counters, by policy, direction and verdict.
  const metrics = sh(s.node, 'curl', '-sf', 'http://127.0.0.1:9465/metrics');
  const sample = (verdict: string) => Number(new RegExp(`^knit_policy_packets\\{direction="ingress",policy="x/a-from-y",verdict="${verdict}"\\} (\\d+)$`, 'm').exec(metrics)?.[1]);
  const now = policyCounters(s.node, s.table);
  t.true(sample('denied') >= deny[0]![1] && sample('denied') <= now[deny[0]![0]]!, `denied in /metrics (${sample('denied')}) is nft's counter`);
  t.true(sample('allowed') > 0);
  t.regex(metrics, /^knit_policy_isolated_addresses\{direction="ingress"\} 1$/m);
  t.regex(metrics, /^knit_policy_source_state\{state="synced"\} 1$/m);
  // knit policy explain: the verdict and what decides it, by pod name or address.
  const cli = (...args: string[]) => spawnSync(process.execPath, [CLI, 'policy', 'explain', ...args, '--socket', s.daemon().socket], { encoding: 'utf8', env: { ...process.env, KNIT_SOCKET: '' } });
  const yes = cli('--from', 'y/c', '--to', 'x/a', '--port', '8080/TCP');
  t.is(yes.status, 0, yes.stderr);
  t.regex(yes.stdout, new RegExp(`^y/c \\(${c.ip.replace(/\./g, '\\.')}\\) -> x/a \\(${a.ip.replace(/\./g, '\\.')}\\) 8080/TCP: ALLOWED$`, 'm'));
  t.regex(yes.stdout, /ingress allowed x\/a: allowed by x\/a-from-y ingress\[0\]/);
  const no = cli('--from', b.ip, '--to', 'x/a', '--port', '8080');
  t.regex(no.stdout, /: DENIED$/m);
  t.regex(no.stdout, /ingress denied  x\/a: x\/a is isolated for ingress by x\/a-from-y, and no rule of it allows this/);
  t.regex(cli('--from', 'y/c', '--to', 'x/a', '--port', 'ICMP').stdout, /ICMP: DENIED/);
  const bad = cli('--from', 'Not A Pod', '--to', 'x/a', '--port', '80');
  t.not(bad.status, 0);
  t.regex(bad.stderr, /from: "Not A Pod" is neither namespace\/pod nor an IP address/);
  t.regex(cli('--from', 'x/nope', '--to', 'x/a', '--port', '80').stderr, /from: no pod x\/nope/);
});

test('a policy knit cannot express: named in the log and /metrics, its pods isolated, none of its rules applied, the other policies whole', async (t) => {
  t.timeout(120_000);
  const lit = {
    ...xOnlyFromY,
    policies: [...xOnlyFromY.policies, { metadata: { namespace: 'x', name: 'bad' }, spec: { podSelector: { matchLabels: { app: 'b' } }, ingress: [{ ports: [{ port: 'web', endPort: 90 }] }, {}] } }],
  };
  const s = await setup(t, 'plb', '10.247.6.0/24', lit);
  const a = await s.attach('x', 'a');
  const b = await s.attach('x', 'b');
  const c = await s.attach('y', 'c');
  await listening(tcpServer(t, b.ns, 8080));
  await listening(tcpServer(t, a.ns, 8080));
  t.is(tcpHello(c.ns, b.ip, 8080), '', 'x/b is isolated: not even the allow-all rule of the bad policy is applied');
  t.is(tcpHello(c.ns, a.ip, 8080), `from ${c.ip}`, 'x/a\'s policy applies whole');
  const line = s.daemon().logs.find((l) => l.includes('cannot express'));
  t.regex(line ?? '', /"policy":"x\/bad".*spec\.ingress\[0\]\.ports\[0\]\.endPort: cannot go with a named port/);
  t.regex(sh(s.node, 'curl', '-sf', 'http://127.0.0.1:9465/metrics'), /^knit_policy_problems\{policy="x\/bad"\} 1$/m);
});

test('a policy change applies to new connections at once and cuts an established TCP stream it now denies; allowing again lets new ones through', async (t) => {
  t.timeout(120_000);
  const s = await setup(t, 'plc', '10.247.2.0/24', xOnlyFromY);
  const a = await s.attach('x', 'a');
  const c = await s.attach('y', 'c');
  const srv = tcpServer(t, a.ns, 8080);
  await listening(srv);
  t.is(tcpHello(c.ns, a.ip, 8080), `from ${c.ip}`);
  // A stream from y/c, then the policy stops allowing y.
  const stream = tcpEchoStream(t, c.ns, a.ip, 8080);
  await eventually(() => stream.echoed() > 5, 'the stream runs', 30_000);
  const denyAll = { ...xOnlyFromY, policies: [{ metadata: { namespace: 'x', name: 'a-from-y' }, spec: { podSelector: { matchLabels: { app: 'a' } }, ingress: [] } }] };
  await s.reload(denyAll);
  // Once a new connection is refused, the change is in the kernel: from then on the stream
  // gets no echo (a refused hello waits out its 3 s, time for anything in flight to land).
  await until(async () => tcpHello(c.ns, a.ip, 8080) === '', 'a new connection refused', 60_000);
  const atChange = stream.echoed();
  t.is(tcpHello(c.ns, a.ip, 8080), '', 'a new connection is refused');
  t.is(stream.echoed(), atChange, `the established stream was cut: no echo since the change (${atChange} before it)`);
  stream.stop();
  const ct = sh(s.node, 'conntrack', '-L', '-s', c.ip, '-d', a.ip, '-p', 'tcp', '--dport', '8080').trim();
  t.notRegex(ct, /ESTABLISHED/, 'no established conntrack entry of the denied flow is left');
  await s.reload(xOnlyFromY);
  t.is(tcpHello(c.ns, a.ip, 8080), `from ${c.ip}`, 'allowed again');
});

test('isolated from the first packet: a pod a deny-all selects neither sends nor receives one packet from the moment its eth0 exists', async (t) => {
  t.timeout(120_000);
  const lit = {
    ...xOnlyFromY,
    pods: [...xOnlyFromY.pods, { namespace: 'x', name: 'new', labels: { locked: 'yes' } }],
    policies: [...xOnlyFromY.policies, { metadata: { namespace: 'x', name: 'lock' }, spec: { podSelector: { matchLabels: { locked: 'yes' } }, policyTypes: ['Ingress', 'Egress'] } }],
  };
  const s = await setup(t, 'plf', '10.247.3.0/24', lit);
  const c = await s.attach('y', 'c');
  const newIp = '10.247.3.50';
  const newNs = makeNetns(t, s.P, 'xnew');
  // Before the attach: a listener in the new pod (bound before any interface exists), one in
  // y/c, a flood from y/c to the address the pod will get, and one from the pod that starts
  // the moment its eth0 appears.
  // y/c knows the new pod's MAC (knit derives it from the address), so its flood is on the
  // wire from the first moment rather than waiting for ARP answers that cannot come yet.
  sh(c.ns, 'ip', 'neigh', 'replace', newIp, 'lladdr', podMac(newIp, '', 'eth0'), 'dev', 'eth0', 'nud', 'permanent');
  const inNew = udpListener(t, newNs.name, 9000);
  const inC = udpListener(t, c.ns, 9000);
  await Promise.all([inNew.ready, inC.ready]);
  const toNew = udpFlood(c.ns, newIp, 9000);
  const fromNew = udpFlood(newNs.name, c.ip, 9000, 'eth0');
  await Promise.all([toNew.started, fromNew.started]);
  const r = (await s.daemon().call('Attach', runcAttachReq(`${s.P}x-new`, newNs.path, { podNamespace: 'x', podName: 'new', extra: { interfaces: [{ name: 'eth0', ips: [`${newIp}/24`] }] } }))).result;
  t.is(r.ips[0].address, `${newIp}/24`);
  // Both floods meet knit's drops (its counters count them), then stop.
  const dropped = (prefix: string) => Object.entries(policyCounters(s.node, s.table)).some(([k, v]) => k.startsWith(prefix) && v > 50);
  await eventually(() => dropped('di_') && dropped('de_'), 'knit\'s ingress and egress drops counting both floods', 60_000);
  const [sentTo, sentFrom] = await Promise.all([toNew.stop(), fromNew.stop()]);
  t.true(sentFrom.sent > 50, `the new pod sent from its first moment (${sentFrom.sent} sent, ${sentFrom.failed} failed before its route)`);
  t.true(sentTo.sent > 50);
  t.deepEqual(inNew.received(), [], 'nothing reached the new pod');
  t.deepEqual(inC.received(), [], 'nothing of the new pod reached y/c');
  // The plan shows the step before the interface's.
  const plan = JSON.parse(readFileSync(`${s.daemon().dir}/run/sandboxes/${s.P}x-new.json`, 'utf8'));
  t.is(plan.steps[0].do.op, 'policy.admit');
});

test('kill -9 and restart under policies: an allowed TCP stream is never cut, a denied flood never passes, and the new knit changes nothing in the table', async (t) => {
  t.timeout(180_000);
  const s = await setup(t, 'plk', '10.247.4.0/24', xOnlyFromY);
  const a = await s.attach('x', 'a');
  const b = await s.attach('x', 'b');
  const c = await s.attach('y', 'c');
  const srv = tcpServer(t, a.ns, 8080);
  await listening(srv);
  const udp = udpListener(t, a.ns, 9000);
  await udp.ready;
  const monitor = spawn('ip', ['netns', 'exec', s.node, '/usr/sbin/nft', 'monitor', 'ruleset'], { stdio: ['ignore', 'pipe', 'ignore'] });
  t.teardown(() => void monitor.kill('SIGKILL'));
  let changes = '';
  monitor.stdout.on('data', (x) => (changes += x));
  await new Promise((r) => setTimeout(r, 300));
  const stream = tcpEchoStream(t, c.ns, a.ip, 8080);
  const flood = udpFlood(b.ns, a.ip, 9000);
  await eventually(() => stream.echoed() > 5, 'the stream runs', 30_000);
  const d = s.daemon();
  d.child.kill('SIGKILL');
  await d.exited;
  const d2 = await d.restart();
  s.setDaemon(d2);
  await d2.stop();
  s.setDaemon(await d2.restart());
  // The stream goes on after the second restart, then stops sending: every line comes back.
  const after = stream.echoed();
  await eventually(() => stream.echoed() > after + 5, 'the stream runs on after the restarts', 30_000);
  stream.pause();
  await eventually(() => stream.echoed() === stream.sent(), 'every line echoed', 30_000);
  stream.stop();
  await flood.stop();
  monitor.kill('SIGKILL');
  t.false(stream.broke(), 'the stream did not break');
  t.deepEqual(udp.received(), [], 'the denied flood never passed');
  t.is(changes.split('\n').filter((l) => l.includes(s.table)).join('\n'), '', 'nft monitor: the new knits changed nothing in the table');
});

test('Service traffic is judged on the backend pod after a DNAT like kube-proxy\'s', async (t) => {
  t.timeout(120_000);
  const s = await setup(t, 'pls', '10.247.5.0/24', xOnlyFromY);
  const a = await s.attach('x', 'a');
  const b = await s.attach('x', 'b');
  const c = await s.attach('y', 'c');
  const srv = tcpServer(t, a.ns, 8080);
  await listening(srv);
  // A ClusterIP 10.96.7.7:80 → x/a:8080, as kube-proxy's nftables mode DNATs it (prerouting).
  execFileSync('ip', ['netns', 'exec', s.node, '/usr/sbin/nft', '-f', '-'], { input: `table ip ${s.P.replace(/-/g, '')}svc {\n chain pre { type nat hook prerouting priority dstnat; policy accept;\n  ip daddr 10.96.7.7 tcp dport 80 dnat to ${a.ip}:8080\n }\n}\n` });
  for (const p of [b, c]) sh(p.ns, 'ip', 'route', 'add', '10.96.0.0/16', 'via', s.pods[0]!.ip.replace(/\.\d+$/, '.1'));
  // A Kubernetes node forwards (the routed hop to the Service address and back out the bridge).
  sh(s.node, 'sysctl', '-qw', `net.ipv4.conf.${s.P.replace(/-/g, '')}br.forwarding=1`);
  t.is(tcpHello(c.ns, '10.96.7.7', 80), `from ${c.ip}`, 'y/c through the Service: allowed by a\'s policy');
  t.is(tcpHello(b.ns, '10.96.7.7', 80), '', 'x/b through the Service: denied, as to a itself');
  // A change that denies an established stream through the Service: its conntrack entry
  // (original tuple to the ClusterIP, reply from the backend) goes too.
  const stream = tcpEchoStream(t, c.ns, '10.96.7.7', 80);
  await eventually(() => stream.echoed() > 5, 'the stream through the Service runs', 30_000);
  const established = () => sh(s.node, 'conntrack', '-L', '-s', c.ip, '-d', '10.96.7.7', '-p', 'tcp', '--dport', '80');
  t.regex(established(), /ESTABLISHED/);
  await s.reload({ ...xOnlyFromY, policies: [{ metadata: { namespace: 'x', name: 'a-from-y' }, spec: { podSelector: { matchLabels: { app: 'a' } }, ingress: [] } }] });
  await until(async () => tcpHello(c.ns, '10.96.7.7', 80) === '', 'a new connection through the Service refused', 60_000);
  stream.stop();
  t.notRegex(established(), /ESTABLISHED/, 'no established conntrack entry of the denied Service flow is left');
});

test('kill -9 between the admit and the rest of the attach: the start-up repair takes the pod out of the table; a detach does too', async (t) => {
  t.timeout(120_000);
  const s = await setup(t, 'plr', '10.247.8.0/24', xOnlyFromY);
  const c = await s.attach('y', 'c');
  // Killed just before step 1: the admit (step 0) put x/a's address in the table.
  const d = s.daemon();
  await d.stop();
  const dying = await d.restart({ KNIT_FAILPOINT: 'attach:1' });
  s.setDaemon(dying);
  const netns = makeNetns(t, s.P, 'xa0');
  await t.throwsAsync(dying.call('Attach', runcAttachReq(`${s.P}x-a`, netns.path, { podNamespace: 'x', podName: 'a', extra: { interfaces: [{ name: 'eth0', ips: ['10.247.8.77/24'] }] } })));
  await dying.exited;
  t.deepEqual(Object.keys(policyTableJson(s.node, s.table).maps.in4!), ['10.247.8.77'], 'the admit ran: the address was isolated before the kill');
  const back = await dying.restart();
  s.setDaemon(back);
  await eventually(() => !Object.keys(policyTableJson(s.node, s.table).maps.in4!).includes('10.247.8.77'), 'the repair took the address out of the map', 30_000);
  t.deepEqual((await back.call('List', {})).sandboxes.map((x: any) => x.request.sandbox_id), [c.id], 'the attach was rolled back');
  // An attached pod that is detached leaves the table the same way.
  const a = await s.attach('x', 'a');
  t.deepEqual(Object.keys(policyTableJson(s.node, s.table).maps.in4!), [a.ip]);
  await back.call('Detach', { sandbox_id: a.id });
  t.deepEqual(policyTableJson(s.node, s.table).maps.in4, {}, 'detached: out of the map');
  const self = JSON.parse(sh(s.node, '/usr/sbin/nft', '-j', 'list', 'set', 'inet', s.table, 'self4')).nftables.find((o: any) => o.set).set.elem ?? [];
  t.deepEqual(self.map((e: any) => e.concat[0]), [c.ip], 'and out of the self set');
});

test('no way to the API (no kubeconfig, not in a pod): knit serves, and the pods that come are isolated both ways (fail closed)', async (t) => {
  t.timeout(120_000);
  const P = uniquePrefix('plu');
  const node = makeNetns(t, P, 'node').name;
  sh(node, 'ip', 'link', 'set', 'lo', 'up');
  const o = { prefix: P.replace(/-/g, ''), subnet: '10.247.10.0/24', netns: node, config: { networkPolicy: {} }, env: { KUBECONFIG: '', KUBERNETES_SERVICE_HOST: '' } };
  const d = await startDaemon(o);
  t.teardown(() => cleanupDaemon(d, o));
  t.true(d.logs.some((l) => l.includes('NetworkPolicy cannot reach the Kubernetes API')));
  const pods: { ns: string; ip: string }[] = [];
  for (const name of ['a', 'b']) {
    const ns = makeNetns(t, P, name);
    const r = (await d.call('Attach', runcAttachReq(`${P}${name}`, ns.path, { podNamespace: 'x', podName: name }))).result;
    pods.push({ ns: ns.name, ip: r.ips[0].address.split('/')[0] });
  }
  await listening(tcpServer(t, pods[0]!.ns, 8080));
  await listening(tcpServer(t, pods[1]!.ns, 8080));
  t.is(tcpHello(pods[1]!.ns, pods[0]!.ip, 8080), '', 'b → a: denied');
  t.is(tcpHello(pods[0]!.ns, pods[1]!.ip, 8080), '', 'a → b: denied');
  const tj = policyTableJson(node, `knit-${o.prefix}-policy`);
  t.deepEqual(Object.keys(tj.maps.in4!).sort(), pods.map((p) => p.ip).sort());
  t.deepEqual(Object.keys(tj.maps.out4!).sort(), pods.map((p) => p.ip).sort());
  t.true((await d.call('NodeStatus', {})).ready, 'the node serves');
});

test('through the CNI: knit-cni exec\'d as a runtime does, K8S_POD_NAMESPACE and K8S_POD_NAME in CNI_ARGS: the pod is admitted first and isolated as its policy says', async (t) => {
  t.timeout(120_000);
  const s = await setup(t, 'plcn', '10.247.12.0/24', xOnlyFromY);
  const b = await s.attach('x', 'b');
  const c = await s.attach('y', 'c');
  const ns = makeNetns(t, s.P, 'cnia');
  const id = `${s.P}cni-a`;
  const shim = spawnSync(path.resolve('build', 'native', 'knit-cni'), [], {
    input: JSON.stringify(knitShimConf(s.P.replace(/-/g, ''), s.daemon().dir)),
    encoding: 'utf8',
    env: { PATH: process.env.PATH, CNI_COMMAND: 'ADD', CNI_CONTAINERID: id, CNI_NETNS: ns.path, CNI_IFNAME: 'eth0', CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=x;K8S_POD_NAME=a;K8S_POD_UID=u-${id}`, CNI_PATH: '/usr/lib/cni' },
  });
  t.is(shim.status, 0, shim.stdout);
  const ip = JSON.parse(shim.stdout).ips[0].address.split('/')[0];
  await listening(tcpServer(t, ns.name, 8080));
  t.is(tcpHello(c.ns, ip, 8080), `from ${c.ip}`, 'y/c reaches x/a (added through the CNI)');
  t.is(tcpHello(b.ns, ip, 8080), '', 'x/b does not');
  const record = JSON.parse(readFileSync(`${s.daemon().dir}/run/sandboxes/${id}.json`, 'utf8'));
  t.like(record.steps[0].do, { op: 'policy.admit', namespace: 'x', name: 'a', ips: [ip] });
  t.teardown(() => s.daemon().call('Detach', { sandbox_id: id }).then(() => undefined, () => undefined));
});
