// The cluster network with its node list from a real Kubernetes control plane (etcd,
// kube-apiserver, kube-controller-manager allocating podCIDRs, kube-scheduler): each node netns
// runs its own knit, which reads Nodes over HTTPS with a ServiceAccount token and the cluster
// CA, with exactly deploy/rbac.yaml's rights. Nodes are added and deleted through the API and
// the routes follow (polled, no timing threshold); Nodes that claim half of a node's block or its
// address, or half of an older Node's block, are not routed; the API server is stopped and
// started, and knit keeps routing, restarts without it, and catches up.
import test from 'ava';
import path from 'node:path';
import os from 'node:os';
import { mkdtempSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createNode, startControlPlane } from '../fixtures/kube-cluster.js';
import { uniquePrefix, makeNetns } from '../helpers/names.js';
import { cleanupDaemon, eventually, ipJson, pingFrom, runcAttachReq, startDaemon, type Daemon } from '../helpers/daemon.js';
import { apiRelay as relay, buildFabric, routeMonitor, until, type FabricNode } from '../helpers/cluster-fabric.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const deploy = (f: string) => path.join(root, 'deploy', f);

test('Nodes from the API: routes follow nodes added and deleted, a node waits for its Node object, the API down and up again', async (t) => {
  t.timeout(600_000);
  const P = uniquePrefix('cla');
  const cp = await startControlPlane(t, { prefix: P, clusterCidr: '10.196.0.0/16', clusterCidrV6: 'fd6b:196::/56', nodeCidrMaskSize: 24, nodeCidrMaskSizeV6: 64 });
  // knit's own manifests: its namespace, ServiceAccount and ClusterRole (nodes get/list/watch).
  await cp.kubectl('apply', '-f', deploy('namespace.yaml'), '-f', deploy('serviceaccount.yaml'), '-f', deploy('rbac.yaml'));
  t.teardown(() => cp.kubectl('delete', '--ignore-not-found', '-f', deploy('rbac.yaml')).then(() => undefined, () => undefined));
  // The TokenRequest API's token for that ServiceAccount (kubectl create token), as the kubelet
  // projects it into the pod.
  const kubeconfig = cp.kubeconfigFor((await cp.kubectl('create', 'token', 'knit', '-n', 'knit-system', '--duration=3600s')).trim());
  const port = Number(new URL(cp.server).port);

  const f = buildFabric(t, P, 196);
  const dir = mkdtempSync(path.join(os.tmpdir(), `knit-${P}relay-`));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const sock = path.join(dir, 'api.sock');
  await relay(t, port, sock);
  for (const n of f.nodes) await relay(t, port, sock, n.ns);

  const nodeName = (n: FabricNode) => `${P}${n.name}`;
  const [n1, n2, n3, n4] = f.nodes;
  for (const n of [n1, n2, n3]) await createNode(cp, nodeName(n), { internalIPs: [n.ip4, n.ip6] });

  const daemons = new Map<FabricNode, Daemon>();
  t.teardown(async () => {
    for (const [n, d] of daemons) await cleanupDaemon(d, { prefix: `${P}${n.name}`.replace(/-/g, '') });
  });
  const net = { name: `${P}net`, mode: 'bridge', bridge: 'cbr0', ipv4: { subnet: 'node' }, ipv6: { subnet: 'node' }, crossNode: 'routes' };
  const start = async (n: FabricNode) => {
    const d = await startDaemon({
      prefix: `${P}${n.name}`.replace(/-/g, ''), subnet: n.pod4, netns: n.ns,
      config: { networks: [net], cluster: { nodeName: nodeName(n), kubeconfig } },
    });
    daemons.set(n, d);
    return d;
  };
  for (const n of [n1, n2, n3, n4]) await start(n);

  // Node 4 has no Node object yet: served, its network not ready, saying what it waits for.
  const s4 = await daemons.get(n4)!.call('NodeStatus', {});
  t.false(s4.ready);
  t.regex(s4.message, new RegExp(`Node "${nodeName(n4)}" is not in`));
  t.is(s4.cluster.state, 'synced');
  t.regex(s4.cluster.source, /kubeconfig/);

  // The podCIDRs kube-controller-manager gave: node 1 routes node 2's via node 2's address.
  const podCidrs = async (n: FabricNode) => (await cp.getJson('get', 'node', nodeName(n))).spec.podCIDRs as string[];
  const [p2v4, p2v6] = await podCidrs(n2);
  await eventually(() => ipJson(['route', 'show', 'proto', '201'], n1.ns).some((r: any) => r.dst === p2v4 && r.gateway === n2.ip4), 'node 1 routes node 2\'s podCIDR', 10_000);
  t.true(ipJson(['-6', 'route', 'show', 'proto', '201'], n1.ns).some((r: any) => r.dst === p2v6 && r.gateway === n2.ip6));

  const pods: { ns: string; v4: string }[] = [];
  for (const n of [n1, n2]) {
    const ns = makeNetns(t, P, `p${n.name}`);
    const r = (await daemons.get(n)!.call('Attach', runcAttachReq(`${P}${n.name}-pod`, ns.path))).result;
    pods.push({ ns: ns.name, v4: r.ips.find((i: any) => !i.address.includes(':')).address.split('/')[0] });
  }
  t.true(pods[1].v4.startsWith(p2v4.replace(/0\/24$/, '')), 'node 2\'s pod takes an address of node 2\'s podCIDR');
  t.true(pingFrom(pods[0].ns, pods[1].v4), 'pod on node 1 → pod on node 2');

  // Node 4's Node object appears: its knit learns its subnet; node 1 reports it (off-link).
  await createNode(cp, nodeName(n4), { internalIPs: [n4.ip4, n4.ip6] });
  await until(async () => (await daemons.get(n4)!.call('NodeStatus', {})).ready, 'node 4 ready once its Node has podCIDRs', 30_000);
  // Its addresses come in a second write (createNode patches the status): node 1 reports it off-link.
  await until(async () => /not on a link/.test((await daemons.get(n1)!.call('NodeStatus', {})).networks[0].peers.find((p: any) => p.node === nodeName(n4))?.problem ?? ''), 'node 1 reports node 4 off its segment', 30_000);

  // A node added through the API (no netns behind it, an address on the fabric): routes appear.
  const extra = `${P}n9`;
  await createNode(cp, extra, { internalIPs: ['192.168.196.9'] });
  const [p9] = (await cp.getJson('get', 'node', extra)).spec.podCIDRs as string[];
  await eventually(() => ipJson(['route', 'show', 'proto', '201'], n1.ns).some((r: any) => r.dst === p9 && r.gateway === '192.168.196.9'), 'the new node\'s route on node 1', 10_000);
  // And deleted: its route goes, on every node.
  await cp.kubectl('delete', 'node', extra);
  for (const n of [n1, n2, n3]) {
    await eventually(() => !ipJson(['route', 'show', 'proto', '201'], n.ns).some((r: any) => r.dst === p9), `the deleted node's route gone from ${n.name}`, 10_000);
  }

  // Nodes that clash (docs/cluster.md, "Nodes knit does not route"), as a hand, a rogue client
  // or another allocator could write them: half of node 1's IPv4 block, and node 1's InternalIP.
  const [p1v4] = await podCidrs(n1);
  const half = p1v4.replace(/\.0\/24$/, '.0/25');
  const grab = `${P}x1`;
  const twin = `${P}x2`;
  await createNode(cp, grab, { internalIPs: ['192.168.196.21'], podCIDRs: [half] });
  const [pTwin] = (await createNode(cp, twin, { internalIPs: [n1.ip4] })).spec.podCIDRs as string[];
  const peerOn = async (n: FabricNode, name: string) => (await daemons.get(n)!.call('NodeStatus', {})).networks[0].peers.find((p: any) => p.node === name);
  await until(async () => !!(await peerOn(n1, twin))?.problem && !!(await peerOn(n1, grab))?.problem, 'node 1 reports both', 30_000);
  t.like(await peerOn(n1, grab), { in_place: false, problem: `refused: podCIDR ${half} overlaps this node's podCIDR ${p1v4}` });
  t.like(await peerOn(n1, twin), { in_place: false, problem: `refused: InternalIP ${n1.ip4} is an address of this node` });
  await until(async () => !!(await peerOn(n2, grab))?.problem, 'node 2 reports the grab', 30_000);
  t.is((await peerOn(n2, grab)).problem, `refused: podCIDR ${half} overlaps node ${nodeName(n1)}'s podCIDR ${p1v4}, whose Node was created first`);
  for (const [n, dst] of [[n1, half], [n1, pTwin], [n2, half]] as const) {
    t.false(ipJson(['route', 'show', 'proto', '201'], n.ns).some((r: any) => r.dst === dst), `ip route on ${n.name}: nothing for ${dst}`);
  }
  t.true(ipJson(['route', 'show', 'proto', '201'], n2.ns).some((r: any) => r.dst === p1v4 && r.gateway === n1.ip4), 'node 2 still routes node 1\'s block to node 1');
  t.true(pingFrom(n1.ns, pods[0].v4), 'node 1 reaches its own pod');
  t.true(pingFrom(pods[1].ns, pods[0].v4), 'node 2\'s pod reaches node 1\'s pod');
  t.true((await daemons.get(n1)!.call('NodeStatus', { check_node: true })).cluster_differences.some((x: string) => x.includes(`node ${grab}: refused: podCIDR ${half}`)), 'knit check --node names it');

  // Two more Nodes: one with a block of the allocator's, and a later one claiming half of it.
  // The later one is not routed; once the first is deleted, it is.
  const first = `${P}y1`;
  const later = `${P}y2`;
  const created = await createNode(cp, first, { internalIPs: ['192.168.196.31'] });
  const pFirst = created.spec.podCIDRs[0] as string;
  const pLater = pFirst.replace(/\.0\/24$/, '.128/25');
  // creationTimestamp counts seconds: the later Node is made in a later one.
  await until(async () => new Date().toISOString().slice(0, 19) > String(created.metadata.creationTimestamp).slice(0, 19), 'the next second', 5_000);
  await createNode(cp, later, { internalIPs: ['192.168.196.32'], podCIDRs: [pLater] });
  await until(async () => /whose Node was created first/.test((await peerOn(n1, later))?.problem ?? ''), 'node 1 refuses the later claim', 30_000);
  t.true(ipJson(['route', 'show', 'proto', '201'], n1.ns).some((r: any) => r.dst === pFirst && r.gateway === '192.168.196.31'), 'the first is routed');
  t.false(ipJson(['route', 'show', 'proto', '201'], n1.ns).some((r: any) => r.dst === pLater), 'the later is not');
  await cp.kubectl('delete', 'node', first);
  await eventually(() => ipJson(['route', 'show', 'proto', '201'], n1.ns).some((r: any) => r.dst === pLater && r.gateway === '192.168.196.32'), 'the later routed once the first is gone', 10_000);
  // They go before the API server stops: the rest of the test counts on the allocator's blocks.
  await cp.kubectl('delete', 'node', grab, twin, later);
  await until(async () => !(await peerOn(n1, grab)) && !(await peerOn(n1, later)), 'node 1 forgets them', 30_000);

  // The API server stops: knit keeps routing, says the API is unreachable, and a knit restarted
  // meanwhile keeps its subnets (from the last list it saw) and deletes no route.
  await cp.stopApiserver();
  const monitor = routeMonitor(n2.ns);
  await until(async () => (await daemons.get(n1)!.call('NodeStatus', {})).cluster.state === 'unreachable', 'node 1 sees the API unreachable', 120_000);
  t.true(pingFrom(pods[0].ns, pods[1].v4), 'still routing with the API down');
  const d2 = daemons.get(n2)!;
  await d2.stop();
  const d2b = await d2.restart();
  daemons.set(n2, d2b);
  const again = (await d2b.call('Attach', runcAttachReq(`${P}n2-pod2`, makeNetns(t, P, 'pn2b').path))).result;
  t.true(again.ips[0].address.startsWith(p2v4.replace(/0\/24$/, '')), 'the restarted knit attaches from its podCIDR without the API');
  t.true(pingFrom(pods[0].ns, pods[1].v4));
  t.deepEqual(monitor.stop().filter((l) => l.startsWith('Deleted')), [], 'no route deleted while the API was down');

  // The API server is back: a node created now is routed.
  await cp.startApiserver();
  const late = `${P}n8`;
  await createNode(cp, late, { internalIPs: ['192.168.196.8'] });
  const [p8] = (await cp.getJson('get', 'node', late)).spec.podCIDRs as string[];
  for (const n of [n1, n2]) {
    await eventually(() => ipJson(['route', 'show', 'proto', '201'], n.ns).some((r: any) => r.dst === p8), `${n.name} catches up with the node created after the API came back`, 120_000);
  }
  t.is((await daemons.get(n2)!.call('NodeStatus', {})).cluster.state, 'synced');
});
