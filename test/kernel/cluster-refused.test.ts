// Nodes knit does not route (docs/cluster.md, "Nodes knit does not route"), on node netns with
// their own knit (test/helpers/cluster-fabric.ts), crossNode "routes": a node list whose blocks
// overlap is refused as config; a Node claiming a block this node still has pods in, or whose
// InternalIP is an address of this node, gets no route (`ip -j route` in the node netns), the
// node keeps its pod (ping, TCP, and the pod's masqueraded traffic and its replies), NodeStatus,
// `knit status`, `knit check --node`, one log line and knit_cluster_refused_peers say so, and
// the route comes once the conflict is gone.
import test, { type ExecutionContext } from 'ava';
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { uniquePrefix, makeNetns } from '../helpers/names.js';
import { CLI, eventually, ipJson, pingFrom, runcAttachReq, type Daemon } from '../helpers/daemon.js';
import { buildFabric, clusterDaemons, listening, tcpHello, tcpServer, until, type Fabric } from '../helpers/cluster-fabric.js';

const SEG = 216;
const METRICS = '127.0.0.1:9216';

/** Node 1 of a fabric with its own knit, a runc pod on it, and servers to reach: a TCP echo in
 * the pod and one outside. */
async function nodeWithPod(t: ExecutionContext, tag: string) {
  const P = uniquePrefix(tag);
  const f = buildFabric(t, P, SEG);
  const [n1] = f.nodes;
  const net = { name: `${P}net`, mode: 'bridge', bridge: 'cbr0', ipv4: { subnet: 'node' }, ipv6: { subnet: 'node' }, crossNode: 'routes' };
  const d = await clusterDaemons(t, f).start(n1!, net, { metricsAddress: METRICS });
  const ns = makeNetns(t, P, 'pod');
  const id = `${P}pod`;
  const r = (await d.call('Attach', runcAttachReq(id, ns.path))).result;
  const pod = { id, ns: ns.name, v4: r.ips.find((i: any) => !i.address.includes(':')).address.split('/')[0] as string };
  const inPod = tcpServer(t, pod.ns, 7101);
  const outside = tcpServer(t, f.outside.ns, 7102);
  await Promise.all([listening(inPod), listening(outside)]);
  return { P, f, n1: n1!, d, pod, network: net.name };
}

/** What a user checks that node 1 still has its pod: ping and TCP from the node, and the pod's
 * TCP to the outside, masqueraded to node 1's address (its replies are de-masqueraded back to
 * the pod address, and routed by the same table). */
function keepsItsPod(t: ExecutionContext, f: Fabric, n1: { ns: string }, pod: { ns: string; v4: string }, when: string) {
  t.true(pingFrom(n1.ns, pod.v4), `${when}: node 1 pings its pod`);
  t.regex(tcpHello(n1.ns, pod.v4, 7101), /^from /, `${when}: node 1 reaches its pod over TCP`);
  t.is(tcpHello(pod.ns, f.outside.ip4, 7102), `from ${f.outside.node1ip4}`, `${when}: the pod reaches the outside, and the replies come back`);
}

const knitRoutes = (ns: string) => ipJson(['route', 'show', 'proto', '201'], ns);
const routeTo = (ns: string, dst: string) => knitRoutes(ns).find((r: any) => r.dst === dst);
const writeNodes = (d: Daemon, change: (nodes: Record<string, any>) => void) => {
  const cfg = JSON.parse(readFileSync(d.configPath, 'utf8'));
  change(cfg.cluster.nodes);
  writeFileSync(d.configPath, JSON.stringify(cfg));
};
const peer = async (d: Daemon, node: string) => (await d.call('NodeStatus', {})).networks[0].peers.find((p: any) => p.node === node);
const cli = (d: Daemon, ...args: string[]) => spawnSync(process.execPath, [CLI, ...args, '--socket', d.socket], { encoding: 'utf8', env: { ...process.env, KNIT_SOCKET: '' } });
const metrics = (ns: string) => execFileSync('ip', ['netns', 'exec', ns, process.execPath, '-e', `require('http').get('http://${METRICS}/metrics',(r)=>{let b='';r.on('data',(d)=>b+=d);r.on('end',()=>console.log(b))})`], { encoding: 'utf8' });
const refusedMetric = (ns: string, reason: string) => Number(new RegExp(`^knit_cluster_refused_peers\\{reason="${reason}"\\} (\\d+)$`, 'm').exec(metrics(ns))?.[1]);
const passes = (ns: string) => Number(/^knit_cluster_reconcile_duration_seconds_count\{outcome="ok"\} (\d+)$/m.exec(metrics(ns))?.[1] ?? 0);
const logged = (d: Daemon, msg: RegExp) => d.logs.map((l) => JSON.parse(l)).filter((l) => msg.test(l.msg));

test('cluster.nodes whose blocks overlap, or that share an InternalIP, is refused as config: the reload changes nothing and the log names the key', async (t) => {
  t.timeout(120_000);
  const { f, n1, d, pod } = await nodeWithPod(t, 'crc');
  const [, n2] = f.nodes;
  t.is(routeTo(n1.ns, n2!.pod4)?.gateway, n2!.ip4, 'node 2 is routed');
  const rejected = async (key: string) => eventually(() => logged(d, /^config reload rejected/).find((l) => l.err.includes(key)), `the reload rejected naming ${key}`, 60_000); // a reload under a loaded machine can take more than the default 10 s

  // Half of node 1's block, claimed by another entry.
  writeNodes(d, (nodes) => (nodes.n9 = { podCIDRs: [`10.${SEG}.1.0/25`], internalIPs: [`192.168.${SEG}.9`] }));
  t.regex((await rejected('cluster.nodes.n9.podCIDRs[0]')).err, new RegExp(`cluster\\.nodes\\.n9\\.podCIDRs\\[0\\]: 10\\.${SEG}\\.1\\.0/25 overlaps 10\\.${SEG}\\.1\\.0/24 of cluster\\.nodes\\.n1`));
  t.falsy(routeTo(n1.ns, `10.${SEG}.1.0/25`), 'ip route: no route for the overlapping block');
  keepsItsPod(t, f, n1, pod, 'after the rejected reload');

  // Node 1's own InternalIP, claimed by another entry.
  writeNodes(d, (nodes) => (nodes.n9 = { podCIDRs: [`10.${SEG}.9.0/24`], internalIPs: [n1.ip4] }));
  await rejected('cluster.nodes.n9.internalIPs[0]');
  t.falsy(routeTo(n1.ns, `10.${SEG}.9.0/24`), 'ip route: no route via node 1 itself');
  t.is((await peer(d, 'n9')), undefined, 'the running list is the one before');

  // Fixed: taken, and routed.
  writeNodes(d, (nodes) => (nodes.n9 = { podCIDRs: [`10.${SEG}.9.0/24`], internalIPs: [`192.168.${SEG}.9`] }));
  await eventually(() => routeTo(n1.ns, `10.${SEG}.9.0/24`)?.gateway === `192.168.${SEG}.9`, 'the fixed entry routed');
});

test('a Node claiming part of a block this node keeps for its pods is not routed, is reported once, and is routed once the block is free', async (t) => {
  t.timeout(120_000);
  const { f, n1, d, pod, network } = await nodeWithPod(t, 'crk');
  const claimed = `10.${SEG}.1.0/25`;
  t.true(pod.v4.startsWith(`10.${SEG}.1.`) && Number(pod.v4.split('.')[3]) < 128, `the pod's address ${pod.v4} is in the claimed half`);

  // The cluster renumbers node 1 while its pod is still there, and hands half of the old block
  // to n9 at once: node 1 keeps 10.216.1.0/24 for its pod, so n9's claim overlaps it.
  writeNodes(d, (nodes) => {
    nodes.n1.podCIDRs = [`10.${SEG}.11.0/24`, nodes.n1.podCIDRs[1]];
    nodes.n9 = { podCIDRs: [claimed], internalIPs: [`192.168.${SEG}.9`] };
  });
  const problem = `refused: podCIDR ${claimed} overlaps 10.${SEG}.1.0/24, the subnet of this node's network ${network}`;
  await until(async () => !!(await peer(d, 'n9'))?.problem, 'n9 in the status', 10_000);
  t.like(await peer(d, 'n9'), { node: 'n9', in_place: false, problem });
  t.falsy(routeTo(n1.ns, claimed), 'ip route: no route for the claimed block');
  keepsItsPod(t, f, n1, pod, 'with the claim in the node list');

  const status = cli(d, 'status');
  t.regex(status.stdout, new RegExp(`n9 +10\\.${SEG}\\.1\\.0/25 +.*no +refused: podCIDR`), status.stdout);
  const check = cli(d, 'check', '--node');
  t.is(check.status, 5);
  t.true(check.stdout.includes(`node n9: ${problem}`), check.stdout);
  t.is(refusedMetric(n1.ns, 'overlaps_this_node'), 1);
  t.is(refusedMetric(n1.ns, 'overlaps_peer'), 0);
  // Passes go on (every 2 s while a block is kept for its pods): the log said it once.
  const seen = passes(n1.ns);
  await eventually(() => passes(n1.ns) >= seen + 2, 'two more passes', 20_000);
  t.deepEqual(logged(d, /^not routing a node/).map((l) => [l.node, l.problem]), [['n9', problem]]);

  // The pod leaves: node 1 moves to its new block, the claim overlaps nothing, n9 is routed.
  await d.call('Detach', { sandbox_id: pod.id });
  await eventually(() => routeTo(n1.ns, claimed)?.gateway === `192.168.${SEG}.9`, 'n9 routed once the block is free', 20_000);
  t.true((await peer(d, 'n9')).in_place);
  t.is(refusedMetric(n1.ns, 'overlaps_this_node'), 0);
  t.is(logged(d, /^node no longer refused/).length, 1);
});

test('a Node whose InternalIP is an address of this node is not routed, the route knit had made for it goes, and its block is not spared masquerading; routed again once its address is its own', async (t) => {
  t.timeout(120_000);
  const { f, n1, d, pod } = await nodeWithPod(t, 'cra');
  const block = `10.${SEG}.8.0/24`;
  writeNodes(d, (nodes) => (nodes.n8 = { podCIDRs: [block], internalIPs: [`192.168.${SEG}.8`] }));
  await eventually(() => routeTo(n1.ns, block)?.gateway === `192.168.${SEG}.8`, 'n8 routed');

  // n8 now says its address is node 1's address towards the outside (a second NIC of node 1);
  // n7 gives node 1's other outside address, and claims the outside's block: refused, that block
  // is no pod's, and what node 1's pod sends there is masqueraded as before.
  writeNodes(d, (nodes) => {
    nodes.n8.internalIPs = [f.outside.node1ip4];
    nodes.n7 = { podCIDRs: [`198.18.${SEG}.0/25`], internalIPs: [f.outside.node1ip6] };
  });
  await eventually(() => !routeTo(n1.ns, block), 'the route knit made for n8 removed');
  const problem = `refused: InternalIP ${f.outside.node1ip4} is an address of this node`;
  await until(async () => (await peer(d, 'n8'))?.problem === problem, 'n8 refused in the status', 10_000);
  t.false((await peer(d, 'n8')).in_place);
  t.deepEqual(ipJson(['route', 'show', block], n1.ns), [], 'ip route: nothing for the block, of any protocol');
  keepsItsPod(t, f, n1, pod, 'with n8 claiming node 1\'s address');
  t.true(cli(d, 'check', '--node').stdout.includes(`node n8: ${problem}`));
  t.is(refusedMetric(n1.ns, 'this_node_address'), 2);
  t.is(logged(d, /^not routing a node/).filter((l) => l.node === 'n8').length, 1);

  writeNodes(d, (nodes) => {
    nodes.n8.internalIPs = [`192.168.${SEG}.8`];
    delete nodes.n7;
  });
  await eventually(() => routeTo(n1.ns, block)?.gateway === `192.168.${SEG}.8`, 'n8 routed again');
  t.is(refusedMetric(n1.ns, 'this_node_address'), 0);
});
