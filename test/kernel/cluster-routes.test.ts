// A cluster network across four "nodes" on one machine, crossNode "routes" (flannel host-gw,
// kindnet): each node a netns with its own knit, three on a fabric bridge and one behind a
// router. Checked with ip -j, nft -j, ping and TCP, and with `ip monitor route` across a restart
// and a kill -9. The node list is the config's literal map (cluster.nodes).
import test from 'ava';
import { writeFileSync, readFileSync } from 'node:fs';
import { uniquePrefix, makeNetns } from '../helpers/names.js';
import { pinger } from '../helpers/pinger.js';
import { spawnSync } from 'node:child_process';
import { CLI, eventually, ipJson, pingFrom, runcAttachReq } from '../helpers/daemon.js';
import { buildFabric, clusterDaemons, listening, nodeMap, routeMonitor, sh, tcpHello, tcpServer, tcpStream } from '../helpers/cluster-fabric.js';

test('routes: pods reach pods on every node of the segment, the far node is reported, traffic leaves masqueraded, a restart and a kill -9 change no route', async (t) => {
  t.timeout(240_000);
  const P = uniquePrefix('clr');
  const f = buildFabric(t, P, 236);
  const net = { name: `${P}net`, mode: 'bridge', bridge: 'cbr0', ipv4: { subnet: 'node' }, ipv6: { subnet: 'node' }, crossNode: 'routes' };
  const cd = clusterDaemons(t, f);
  for (const node of f.nodes) await cd.start(node, net);
  const [n1, n2, n3, n4] = f.nodes;

  // One runc pod per node.
  const pods = [];
  for (const node of f.nodes) {
    const ns = makeNetns(t, P, `p${node.name}`);
    const id = `${P}${node.name}-pod`;
    const r = (await cd.daemons.get(node.name)!.call('Attach', runcAttachReq(id, ns.path))).result;
    const v4 = r.ips.find((i: any) => !i.address.includes(':')).address.split('/')[0];
    const v6 = r.ips.find((i: any) => i.address.includes(':')).address.split('/')[0];
    pods.push({ node, ns: ns.name, v4, v6, id });
  }
  t.true(pods[0].v4.startsWith('10.236.1.'), `node 1's pod has an address of node 1's podCIDR (${pods[0].v4})`);
  t.true(pods[1].v4.startsWith('10.236.2.'), `node 2's pod has an address of node 2's podCIDR (${pods[1].v4})`);

  // The kernel, as ip sees it: node 1 routes n2's and n3's blocks via their addresses, with
  // knit's protocol, holds its own block as a blackhole, and has no route for n4's block.
  const r1 = ipJson(['route', 'show', 'proto', '201'], n1.ns);
  const via = (dst: string) => r1.find((r: any) => r.dst === dst);
  t.is(via(n2.pod4)?.gateway, n2.ip4);
  t.is(via(n3.pod4)?.gateway, n3.ip4);
  t.is(via(n1.pod4)?.type, 'blackhole');
  t.falsy(via(n4.pod4), 'node 4 is not on the segment: no route to it');
  const r16 = ipJson(['-6', 'route', 'show', 'proto', '201'], n1.ns);
  t.is(r16.find((r: any) => r.dst === n2.pod6)?.gateway, n2.ip6);

  // knit's view: node 4 reported, the others in place.
  const s1 = await cd.daemons.get('n1')!.call('NodeStatus', {});
  const peers = s1.networks[0].peers;
  t.is(s1.networks[0].cross_node, 'routes');
  t.deepEqual(s1.networks[0].node_subnets, [n1.pod4, n1.pod6]);
  t.true(peers.find((p: any) => p.node === 'n2').in_place);
  t.regex(peers.find((p: any) => p.node === 'n4').problem, /not on a link of this node/);
  // The same through the CLI a user runs: the peer table, and check --node naming node 4.
  const cli = (...args: string[]) => spawnSync(process.execPath, [CLI, ...args, '--socket', cd.daemons.get('n1')!.socket], { encoding: 'utf8', env: { ...process.env, KNIT_SOCKET: '' } });
  const status = cli('status');
  t.regex(status.stdout, /crossNode routes, this node's subnets 10\.236\.1\.0\/24, fd6b:236:1::\/64/);
  t.regex(status.stdout, /n2 +10\.236\.2\.0\/24, fd6b:236:2::\/64 +192\.168\.236\.2 +yes/);
  t.regex(status.stdout, /n4 .* no +.*not on a link of this node/);
  const check = cli('check', '--node');
  t.is(check.status, 5, 'check --node exits 5 when something differs');
  t.regex(check.stdout, /^- network .*: node n4: 192\.168\.237\.4 is not on a link of this node/m);
  const onlyFarNode = (diffs: string[]) => diffs.length === 1 && /node n4: 192\.168\.237\.4 is not on a link/.test(diffs[0]);
  t.true(onlyFarNode((await cd.daemons.get('n1')!.call('NodeStatus', { check_node: true })).cluster_differences), 'knit check --node: only the far node');

  // Pods reach pods on every other node of the segment, IPv4 and IPv6; nodes reach pods.
  for (const a of pods.slice(0, 3)) {
    for (const b of pods.slice(0, 3)) {
      if (a === b) continue;
      t.true(pingFrom(a.ns, b.v4), `${a.node.name} pod → ${b.node.name} pod (IPv4)`);
      t.true(await eventually(() => pingFrom(a.ns, b.v6), `${a.node.name} pod → ${b.node.name} pod (IPv6)`), 'IPv6');
    }
  }
  t.true(pingFrom(n2.ns, pods[0].v4), 'node 2 → a pod on node 1');

  // VM pods on the same network, with no guest running: a KubeVirt masquerade pod on node 2 and
  // a Kata tcfilter pod on node 3. What node 1's pod sends them arrives at their eth0.
  const vmPod = async (node: typeof n2, runtime: string, binding: object) => {
    const ns = makeNetns(t, P, `v${node.name}`);
    const r = (await cd.daemons.get(node.name)!.call('Attach', { sandbox_id: `${P}${node.name}-vm`, netns_path: ns.path, runtime, interfaces: [{ name: 'eth0', binding }] })).result;
    return { ns: ns.name, v4: r.ips.find((i: any) => !i.address.includes(':')).address.split('/')[0] as string };
  };
  const rx = (ns: string) => ipJson(['-s', 'link', 'show', 'eth0'], ns)[0].stats64.rx.packets as number;
  for (const [node, runtime, binding] of [[n2, 'KUBEVIRT', { binding: 'masquerade' }], [n3, 'KATA', { mode: 'tcfilter' }]] as const) {
    const vm = await vmPod(node, runtime, binding);
    t.true(vm.v4.startsWith(node.pod4.replace(/0\/24$/, '')), `the ${runtime} pod has an address of ${node.name}'s block (${vm.v4})`);
    // No guest answers ARP for the pod address either: the node's entry for it stands in.
    sh(node.ns, 'ip', 'neigh', 'replace', vm.v4, 'lladdr', ipJson(['link', 'show', 'eth0'], vm.ns)[0].address, 'dev', 'cbr0', 'nud', 'permanent');
    const before = rx(vm.ns);
    await pinger(pods[0].ns, vm.v4, 10); // no guest answers; the packets still arrive
    t.true(rx(vm.ns) - before >= 10, `node 1 pod → ${runtime} pod on ${node.name}: the ten pings reach its eth0`);
  }
  const srv = tcpServer(t, pods[1].ns, 7001);
  await listening(srv);
  t.is(tcpHello(pods[0].ns, pods[1].v4, 7001), `from ${pods[0].v4}`, 'TCP pod → pod keeps the pod address');
  t.is(tcpHello(pods[2].ns, pods[1].v6, 7001), `from ${pods[2].v6}`, 'TCP over IPv6');

  // Leaving the cluster: the outside sees node 1's address, and knit's own nft table did it.
  const out = tcpServer(t, f.outside.ns, 7002);
  await listening(out);
  t.is(tcpHello(pods[0].ns, f.outside.ip4, 7002), `from ${f.outside.node1ip4}`, 'masqueraded to node 1 address');
  t.is(tcpHello(pods[0].ns, f.outside.ip6, 7002), `from ${f.outside.node1ip6}`, 'IPv6 masqueraded too');
  const tables = JSON.parse(sh(n1.ns, '/usr/sbin/nft', '-j', 'list', 'tables')).nftables.filter((x: any) => x.table).map((x: any) => x.table.name);
  t.deepEqual(tables, [`knit-${P.replace(/-/g, '')}n1-cluster`], 'one nft table, knit\'s');
  // Forwarding exactly where needed: the bridge and the uplink, not the global switch.
  t.is(sh(n1.ns, 'cat', '/proc/sys/net/ipv4/conf/cbr0/forwarding').trim(), '1');
  t.is(sh(n1.ns, 'cat', '/proc/sys/net/ipv4/conf/eth0/forwarding').trim(), '1');
  t.is(sh(n1.ns, 'cat', '/proc/sys/net/ipv4/conf/up0/forwarding').trim(), '1', 'and the default route\'s link, where replies come back');
  t.is(sh(n1.ns, 'cat', '/proc/sys/net/ipv4/conf/all/forwarding').trim(), '0', 'the global switch is left alone');
  t.is(sh(n1.ns, 'cat', '/proc/sys/net/ipv4/conf/lo/forwarding').trim(), '0', 'a link nothing crosses is left alone');

  // A stream through node 2 while its knit restarts and is then killed with SIGKILL: no route
  // of node 2 is deleted, and the stream loses nothing.
  const monitor = routeMonitor(n2.ns);
  const stream = tcpStream(pods[0].ns, pods[1].v4, 7001, 6000);
  const d2 = cd.daemons.get('n2')!;
  await d2.stop();
  const d2b = await d2.restart();
  cd.daemons.set('n2', d2b);
  d2b.child.kill('SIGKILL');
  await d2b.exited;
  const d2c = await d2b.restart();
  cd.daemons.set('n2', d2c);
  const result = await stream;
  const lines = monitor.stop();
  t.false(result.broke, 'the TCP stream survived');
  t.is(result.echoed, result.sent, 'every line came back');
  t.deepEqual(lines.filter((l) => l.startsWith('Deleted')), [], 'ip monitor route: no route deleted');
  t.true(onlyFarNode((await d2c.call('NodeStatus', { check_node: true })).cluster_differences), 'the new knit adopted the routes as they were');

  // A node leaves the list: its routes go, the others stay.
  const cfg = JSON.parse(readFileSync(cd.daemons.get('n1')!.configPath, 'utf8'));
  cfg.cluster.nodes = nodeMap(f, [n1, n2, n4]);
  writeFileSync(cd.daemons.get('n1')!.configPath, JSON.stringify(cfg));
  await eventually(() => !ipJson(['route', 'show', 'proto', '201'], n1.ns).some((r: any) => r.dst === n3.pod4), 'route to node 3 removed', 5000);
  t.truthy(ipJson(['route', 'show', 'proto', '201'], n1.ns).find((r: any) => r.dst === n2.pod4), 'the route to node 2 stays');
  // A route knit did not make is never touched: one for node 3's block with another protocol.
  sh(n1.ns, 'ip', 'route', 'add', n3.pod4, 'via', n3.ip4, 'proto', 'static');
  cfg.cluster.nodes = nodeMap(f);
  writeFileSync(cd.daemons.get('n1')!.configPath, JSON.stringify(cfg));
  await eventually(() => ipJson(['-6', 'route', 'show', 'proto', '201'], n1.ns).some((r: any) => r.dst === n3.pod6), 'the node back (its IPv6 route)', 5000);
  t.truthy(ipJson(['route', 'show', n3.pod4, 'proto', 'static'], n1.ns)[0], 'the static route is still there');
  t.falsy(ipJson(['route', 'show', 'proto', '201'], n1.ns).find((r: any) => r.dst === n3.pod4), 'knit did not take it over');
  t.true((await cd.daemons.get('n1')!.call('NodeStatus', { check_node: true })).cluster_differences.some((x: string) => /another owner \(protocol static\)/.test(x)), 'check --node names it');
});
