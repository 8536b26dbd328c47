// ClusterNetworkPolicy on one node (docs/network-policy.md, "ClusterNetworkPolicy"): knit in a
// node netns of its own whose netns-wide bridge-nf-call sysctls are 0, pods attached over gRPC,
// NetworkPolicies and ClusterNetworkPolicies from the config's literal lists. Observed with real
// TCP and UDP sockets and ping (pod to pod on one bridge, and a pod to its own node through the
// input hook), with nft -j (knit's table: maps, chains, the tiers' counters) as the observer.
import test, { type ExecutionContext } from 'ava';
import { startDaemon, cleanupDaemon, eventually, reloadConfig, runcAttachReq, pingFrom, type Daemon } from '../helpers/daemon.js';
import { uniquePrefix, makeNetns } from '../helpers/names.js';
import { sh, tcpServer, listening, tcpHello } from '../helpers/cluster-fabric.js';
import { udpListener, udpFlood, policyCounters, policyTableJson } from '../helpers/policy-traffic.js';

interface Pod { ns: string; ip: string }

/** A node netns with the switches off, knit in it with ClusterNetworkPolicy on, pods x/a, x/b,
 * y/c, z/d, and a way to give it new lists. */
async function cluster(t: ExecutionContext, tag: string, subnet: string) {
  const P = uniquePrefix(tag);
  const node = makeNetns(t, P, 'node').name;
  sh(node, 'sysctl', '-qw', 'net.bridge.bridge-nf-call-iptables=0', 'net.bridge.bridge-nf-call-ip6tables=0');
  sh(node, 'ip', 'link', 'set', 'lo', 'up');
  const base = {
    namespaces: { x: { labels: { team: 'x' } }, y: { labels: { team: 'y' } }, z: { labels: { team: 'z' } } },
    pods: [
      { namespace: 'x', name: 'a', labels: { app: 'a' } }, { namespace: 'x', name: 'b', labels: { app: 'b' } },
      { namespace: 'y', name: 'c', labels: { app: 'c' } }, { namespace: 'z', name: 'd', labels: { app: 'd' } },
    ],
  };
  const o = { prefix: P.replace(/-/g, ''), subnet, netns: node, config: { networkPolicy: { clusterNetworkPolicies: true, literal: base } } };
  const d: Daemon = await startDaemon(o);
  t.teardown(() => cleanupDaemon(d, o));
  const attach = async (namespace: string, name: string): Promise<Pod> => {
    const ns = makeNetns(t, P, `${namespace}${name}`);
    const r = (await d.call('Attach', runcAttachReq(`${P}${namespace}-${name}`, ns.path, { podNamespace: namespace, podName: name }))).result;
    return { ns: ns.name, ip: r.ips[0].address.split('/')[0] };
  };
  const pods = { a: await attach('x', 'a'), b: await attach('x', 'b'), c: await attach('y', 'c'), d: await attach('z', 'd') };
  // The node's own address, as its pods reach it: their gateway, on knit's bridge.
  const gateway = JSON.parse(sh(pods.a.ns, 'ip', '-j', 'route', 'show', 'default'))[0].gateway as string;
  const give = async (lists: object) => {
    await reloadConfig(d, (cfg) => (cfg.networkPolicy.literal = { ...base, nodes: { [`${P}node`]: { labels: { role: 'worker' }, ips: [gateway] } }, ...lists }));
    await new Promise((r) => setTimeout(r, 300)); // the pass after the change
  };
  return { node, table: `knit-${o.prefix}-policy`, pods, gateway, give, daemon: d };
}

const team = (name: string) => ({ matchLabels: { team: name } });
const tcp = (n: number) => ({ tcp: { destinationPort: { number: n } } });

/** x/a's NetworkPolicy takes only y; the tiers around it. */
const lists = (pods: Record<string, Pod>) => ({
  policies: [{ metadata: { namespace: 'x', name: 'a-from-y' }, spec: { podSelector: { matchLabels: { app: 'a' } }, ingress: [{ from: [{ namespaceSelector: team('y') }] }] } }],
  clusterNetworkPolicies: [
    { metadata: { name: 'accept-z-web' }, spec: { tier: 'Admin', priority: 10, subject: { namespaces: team('x') }, ingress: [{ name: 'z-8080', action: 'Accept', from: [{ namespaces: team('z') }], protocols: [tcp(8080)] }] } },
    { metadata: { name: 'deny-udp-9000' }, spec: { tier: 'Admin', priority: 30, subject: { namespaces: team('x') }, ingress: [{ action: 'Deny', from: [{ namespaces: {} }], protocols: [{ udp: { destinationPort: { number: 9000 } } }] }] } },
    { metadata: { name: 'x-not-to-d-web' }, spec: { tier: 'Admin', priority: 40, subject: { namespaces: team('x') }, egress: [{ action: 'Deny', to: [{ networks: [`${pods.d!.ip}/32`] }], protocols: [tcp(8080)] }] } },
    { metadata: { name: 'z-not-to-nodes' }, spec: { tier: 'Admin', priority: 50, subject: { namespaces: team('z') }, egress: [{ action: 'Deny', to: [{ nodes: { matchLabels: { role: 'worker' } } }] }] } },
    // Changes no verdict; z/d's Admin chain goes on to it.
    { metadata: { name: 'z-out' }, spec: { tier: 'Baseline', priority: 20, subject: { namespaces: team('z') }, egress: [{ action: 'Accept', to: [{ namespaces: {} }] }] } },
    { metadata: { name: 'y-closed' }, spec: { tier: 'Baseline', priority: 10, subject: { namespaces: team('y') }, ingress: [{ action: 'Deny', from: [{ namespaces: {} }] }] } },
  ],
});

test('the Admin tier before NetworkPolicy and the Baseline tier after, pod to pod and pod to its own node (TCP, UDP, ICMP)', async (t) => {
  t.timeout(180_000);
  const s = await cluster(t, 'cnk', '10.246.1.0/24');
  const { a, b, c, d } = s.pods;
  for (const [p, port] of [[a, 8080], [a, 8081], [b, 8081], [c, 8080], [d, 8080], [d, 8081]] as const) await listening(tcpServer(t, p.ns, port));
  await listening(tcpServer(t, s.node, 7000));
  // Before any ClusterNetworkPolicy: everything passes.
  t.is(tcpHello(d.ns, a.ip, 8081), `from ${d.ip}`);
  await s.give(lists(s.pods));

  t.is(tcpHello(d.ns, a.ip, 8080), `from ${d.ip}`, 'z/d → x/a:8080: Admin Accept, though x/a\'s NetworkPolicy takes only y');
  t.is(tcpHello(d.ns, a.ip, 8081), '', 'z/d → x/a:8081: no Admin rule matches; x/a\'s NetworkPolicy denies');
  t.is(tcpHello(c.ns, a.ip, 8081), `from ${c.ip}`, 'y/c → x/a:8081: the NetworkPolicy allows y');
  t.is(tcpHello(d.ns, b.ip, 8081), `from ${d.ip}`, 'z/d → x/b:8081: nothing decides x/b, allowed');
  t.true(pingFrom(d.ns, b.ip), 'z/d → x/b ICMP: the UDP Deny does not match it');
  t.is(tcpHello(a.ns, c.ip, 8080), '', 'x/a → y/c: Baseline denies y\'s ingress (no NetworkPolicy selects y/c)');
  t.false(pingFrom(b.ns, c.ip), 'ICMP too: the Baseline rule has no protocols');
  t.is(tcpHello(a.ns, d.ip, 8080), '', 'x/a → z/d:8080: x\'s egress Deny to a network');
  t.is(tcpHello(a.ns, d.ip, 8081), `from ${a.ip}`, 'x/a → z/d:8081: that rule names 8080 only');
  t.is(tcpHello(d.ns, s.gateway, 7000), '', 'z/d → its own node: Admin Deny to nodes, through the input hook');
  t.is(tcpHello(a.ns, s.gateway, 7000), `from ${a.ip}`, 'x/a → its own node: allowed');

  // UDP 9000: the Admin Deny comes after the Accept (which is TCP 8080) and takes y's too,
  // which NetworkPolicy would have allowed.
  const udp = udpListener(t, a.ns, 9000);
  await udp.ready;
  const denied = () => Object.entries(policyCounters(s.node, s.table)).filter(([k]) => k.startsWith('tdi_')).reduce((n, [, v]) => n + v, 0);
  const before = denied();
  const flood = [udpFlood(c.ns, a.ip, 9000), udpFlood(d.ns, a.ip, 9000)];
  await eventually(() => denied() > before + 20, 'the Admin tier\'s denied counter counting', 30_000);
  await Promise.all(flood.map((f) => f.stop()));
  t.deepEqual(udp.received(), [], 'no datagram from y/c or z/d arrived');

  // The independent observer: nft -j.
  const tj = policyTableJson(s.node, s.table);
  t.deepEqual(Object.keys(tj.maps.in4!).sort(), [a.ip, b.ip, c.ip].sort(), 'x\'s pods and y/c are judged on ingress');
  t.regex(tj.maps.in4![a.ip]!, /^ai4_/, 'x/a goes to its Admin chain first');
  t.regex(tj.maps.in4![c.ip]!, /^bi4_/, 'y/c to its Baseline chain');
  t.deepEqual(Object.keys(tj.maps.local4!).sort(), [a.ip, b.ip, d.ip].sort(), 'the pods with egress rules are judged on their way to the node too');
  const counters = policyCounters(s.node, s.table);
  t.true(Object.entries(counters).some(([k, v]) => k.startsWith('tai_') && v > 0), 'the Admin Accept counted');
  t.true(Object.entries(counters).some(([k, v]) => k.startsWith('tde_') && v > 0), 'the egress Denies counted');

  // Taking the ClusterNetworkPolicies away: their chains, sets and counters go in one
  // transaction (a tier chain before the chain it goes to), and y/c is reached again.
  await s.give({ policies: lists(s.pods).policies, clusterNetworkPolicies: [] });
  const after = policyTableJson(s.node, s.table);
  t.deepEqual(after.chains.filter((c) => /^[ab][ie][46]_/.test(c)), [], 'no tier chain left');
  t.deepEqual(after.sets.filter((n) => n.startsWith('c')), [], 'nor their sets');
  t.deepEqual(Object.keys(after.maps.local4!), []);
  t.deepEqual(Object.keys(after.maps.in4!), [a.ip], 'x/a in its NetworkPolicy chain alone');
  t.is(tcpHello(a.ns, c.ip, 8080), `from ${a.ip}`);
  t.is(tcpHello(d.ns, s.gateway, 7000), `from ${d.ip}`);
  t.is(tcpHello(d.ns, a.ip, 8080), '', 'z/d → x/a:8080: NetworkPolicy alone now');
  t.false(s.daemon.logs.some((l) => /applying the table failed/.test(l)), 'every transaction went through');
});

test('an egress Deny to every network (0.0.0.0/0 and ::/0) after an Accept of some pods: the rest is denied, pod to pod on one bridge', async (t) => {
  t.timeout(180_000);
  const s = await cluster(t, 'cnw', '10.246.3.0/24');
  const { a, b, c, d } = s.pods;
  for (const p of [b, c, d]) await listening(tcpServer(t, p.ns, 8080));
  t.is(tcpHello(a.ns, d.ip, 8080), `from ${a.ip}`, 'before: x/a reaches z/d');
  await s.give({
    clusterNetworkPolicies: [{ metadata: { name: 'x-to-y-only' }, spec: { tier: 'Admin', priority: 1, subject: { namespaces: team('x') }, egress: [
      { name: 'to-y', action: 'Accept', to: [{ pods: { namespaceSelector: team('y'), podSelector: { matchLabels: { app: 'c' } } } }] },
      { name: 'not-elsewhere', action: 'Deny', to: [{ networks: ['0.0.0.0/0', '::/0'] }] },
    ] } }],
  });
  t.is(tcpHello(a.ns, c.ip, 8080), `from ${a.ip}`, 'x/a → y/c: the Accept');
  t.is(tcpHello(a.ns, d.ip, 8080), '', 'x/a → z/d: the Deny to every network');
  t.is(tcpHello(a.ns, b.ip, 8080), '', 'x/a → x/b: its own namespace too');
  t.is(tcpHello(d.ns, b.ip, 8080), `from ${d.ip}`, 'z/d → x/b: not a subject, allowed');
  const tj = policyTableJson(s.node, s.table);
  t.regex(tj.maps.out4![a.ip]!, /^ae4_/, 'nft -j: x/a\'s egress goes to its Admin chain');
  const status = await s.daemon.call('NodeStatus', {});
  t.deepEqual(status.network_policy, { source: 'the config (networkPolicy.literal)', state: 'synced', detail: status.network_policy.detail }, 'NodeStatus says where policy\'s view comes from');
  t.regex(status.network_policy.detail, /^0 policies from the config$/);
});

test('an Admin egress Deny changed to Pass hands the flow to the NetworkPolicy that allows it, and back', async (t) => {
  t.timeout(180_000);
  const s = await cluster(t, 'cnq', '10.246.4.0/24');
  const { a, c } = s.pods;
  await listening(tcpServer(t, c.ns, 8080));
  const np = { metadata: { namespace: 'x', name: 'to-y' }, spec: { podSelector: {}, policyTypes: ['Ingress', 'Egress'], ingress: [{ from: [{ namespaceSelector: team('y') }] }], egress: [{ to: [{ namespaceSelector: team('y') }] }] } };
  const admin = (action: string) => ({ metadata: { name: 'x-y' }, spec: { tier: 'Admin', priority: 10, subject: { namespaces: team('x') }, ingress: [{ action: 'Deny', from: [{ namespaces: team('y') }] }], egress: [{ action, to: [{ namespaces: team('y') }] }] } });
  await s.give({ policies: [np], clusterNetworkPolicies: [admin('Deny')] });
  t.is(tcpHello(a.ns, c.ip, 8080), '', 'Deny: x/a → y/c denied');
  await s.give({ policies: [np], clusterNetworkPolicies: [admin('Pass')] });
  t.is(tcpHello(a.ns, c.ip, 8080), `from ${a.ip}`, 'Pass: the NetworkPolicy allows x/a → y/c');
  await s.give({ policies: [], clusterNetworkPolicies: [admin('Pass'), { metadata: { name: 'base' }, spec: { tier: 'Baseline', priority: 10, subject: { namespaces: team('x') }, egress: [{ action: 'Deny', to: [{ namespaces: team('y') }] }] } }] });
  t.is(tcpHello(a.ns, c.ip, 8080), '', 'Pass with no NetworkPolicy: the Baseline Deny');
});
