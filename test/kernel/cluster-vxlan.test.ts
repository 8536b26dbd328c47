// crossNode "vxlan" (flannel's scheme) across four node netns, one of them behind a router on
// another segment: a tagged VTEP per node with a MAC that survives a restart, per peer a route,
// a permanent neighbour and an FDB entry, checked with ip -j, bridge -j fdb, ping and TCP.
import test from 'ava';
import { readFileSync, writeFileSync } from 'node:fs';
import { uniquePrefix, makeNetns } from '../helpers/names.js';
import { eventually, ipJson, pingFrom, runcAttachReq } from '../helpers/daemon.js';
import { buildFabric, clusterDaemons, listening, routeMonitor, sh, tcpHello, tcpServer } from '../helpers/cluster-fabric.js';

test('vxlan: every pod reaches every other node\'s pods, the node behind the router too; the VTEP and its entries outlive a restart unchanged', async (t) => {
  t.timeout(240_000);
  const P = uniquePrefix('clv');
  const f = buildFabric(t, P, 226);
  const net = { name: `${P}net`, mode: 'bridge', bridge: 'cbr0', mtu: 1500, ipv4: { subnet: 'node' }, ipv6: { subnet: 'node' }, crossNode: 'vxlan' };
  const cd = clusterDaemons(t, f);
  for (const node of f.nodes) await cd.start(node, net);
  const [n1, , , n4] = f.nodes;

  const pods = [];
  for (const node of f.nodes) {
    const ns = makeNetns(t, P, `p${node.name}`);
    const r = (await cd.daemons.get(node.name)!.call('Attach', runcAttachReq(`${P}${node.name}-pod`, ns.path))).result;
    pods.push({ node, ns: ns.name, v4: r.ips.find((i: any) => !i.address.includes(':')).address.split('/')[0], v6: r.ips.find((i: any) => i.address.includes(':')).address.split('/')[0] });
  }
  // The pod MTU leaves room for the encapsulation.
  t.is(ipJson(['link', 'show', 'eth0'], pods[0].ns)[0].mtu, 1450);

  // Node 1's VTEP, and its entries for node 4 (behind the router).
  const vtep = ipJson(['link', 'show', 'knit-vx1'], n1.ns)[0];
  t.is(vtep.linkinfo.info_kind, 'vxlan');
  t.is(vtep.linkinfo.info_data.id, 1);
  t.regex(vtep.ifalias, /network=.*;if=vtep/);
  const fdb = JSON.parse(sh(n1.ns, 'bridge', '-j', 'fdb', 'show', 'dev', 'knit-vx1'));
  const vtep4 = ipJson(['link', 'show', 'knit-vx1'], n4.ns)[0].address;
  t.truthy(fdb.find((e: any) => e.mac === vtep4 && e.dst === n4.ip4 && e.state === 'permanent'), 'FDB: node 4\'s VTEP MAC goes to node 4\'s address');
  const neigh = ipJson(['neigh', 'show', 'dev', 'knit-vx1'], n1.ns).find((n: any) => n.dst === '10.226.4.0');
  t.is(neigh?.lladdr, vtep4);
  const route = ipJson(['route', 'show', n4.pod4], n1.ns)[0];
  t.like(route, { gateway: '10.226.4.0', dev: 'knit-vx1', protocol: '201' });
  t.true(route.flags.includes('onlink'));
  const s1 = await cd.daemons.get('n1')!.call('NodeStatus', {});
  t.true(s1.networks[0].peers.every((p: any) => p.in_place), 'every peer in place, node 4 included');

  // Traffic: every pod to every other node's pod, IPv4 and IPv6, and TCP to the far node.
  for (const a of pods) {
    for (const b of pods) {
      if (a === b) continue;
      t.true(pingFrom(a.ns, b.v4), `${a.node.name} pod → ${b.node.name} pod (IPv4)`);
      t.true(await eventually(() => pingFrom(a.ns, b.v6), `${a.node.name} pod → ${b.node.name} pod (IPv6)`), 'IPv6');
    }
  }
  const srv = tcpServer(t, pods[3].ns, 7011);
  await listening(srv);
  t.is(tcpHello(pods[0].ns, pods[3].v4, 7011), `from ${pods[0].v4}`, 'TCP to the pod behind the router');

  // A restart keeps the VTEP (same ifindex, same MAC) and changes no route.
  const before = ipJson(['link', 'show', 'knit-vx1'], n4.ns)[0];
  const monitor = routeMonitor(n4.ns);
  const d4 = cd.daemons.get('n4')!;
  d4.child.kill('SIGKILL');
  await d4.exited;
  cd.daemons.set('n4', await d4.restart());
  t.true(pingFrom(pods[0].ns, pods[3].v4), 'still reachable after the kill -9 and restart');
  t.deepEqual(monitor.stop().filter((l) => l.startsWith('Deleted')), []);
  const after = ipJson(['link', 'show', 'knit-vx1'], n4.ns)[0];
  t.is(after.ifindex, before.ifindex);
  t.is(after.address, before.address);

  // Node 1's network switches to crossNode routes (a config reload): its VTEP and every entry
  // through it go; the routes to its segment's peers take their place.
  const d1 = cd.daemons.get('n1')!;
  const cfg = JSON.parse(readFileSync(d1.configPath, 'utf8'));
  cfg.networks[0].crossNode = 'routes';
  writeFileSync(d1.configPath, JSON.stringify(cfg));
  await eventually(() => ipJson(['link', 'show'], n1.ns).every((l: any) => l.ifname !== 'knit-vx1'), 'node 1\'s VTEP removed', 10_000);
  await eventually(() => ipJson(['route', 'show', f.nodes[1].pod4], n1.ns)[0]?.gateway === f.nodes[1].ip4, 'node 2 routed via its address', 10_000);
  t.falsy(ipJson(['route', 'show', 'proto', '201'], n1.ns).find((r: any) => r.dst === n4.pod4), 'node 4 is off the segment: no route');
});

test('vxlan: a VTEP whose VNI or port the config changes is made again under the same name, with the same MAC, and traffic resumes', async (t) => {
  t.timeout(180_000);
  const P = uniquePrefix('clw');
  const f = buildFabric(t, P, 227, 2);
  const net = { name: `${P}net`, mode: 'bridge', bridge: 'cbr0', mtu: 1500, ipv4: { subnet: 'node' }, crossNode: 'vxlan', vxlan: { device: 'knit-vx', vni: 1 } };
  const cd = clusterDaemons(t, f);
  const [n1, n2] = f.nodes;
  for (const node of [n1, n2]) await cd.start(node, net);
  const pods: { ns: string; v4: string }[] = [];
  for (const node of [n1, n2]) {
    const ns = makeNetns(t, P, `p${node.name}`);
    const r = (await cd.daemons.get(node.name)!.call('Attach', runcAttachReq(`${P}${node.name}-pod`, ns.path))).result;
    pods.push({ ns: ns.name, v4: r.ips[0].address.split('/')[0] });
  }
  t.true(pingFrom(pods[0].ns, pods[1].v4), 'reachable on VNI 1');
  const before = new Map([n1, n2].map((n) => [n.name, ipJson(['-d', 'link', 'show', 'knit-vx'], n.ns)[0]]));
  t.like(before.get('n1').linkinfo.info_data, { id: 1, port: 8472 });

  for (const node of [n1, n2]) {
    const d = cd.daemons.get(node.name)!;
    const cfg = JSON.parse(readFileSync(d.configPath, 'utf8'));
    cfg.networks[0].vxlan = { device: 'knit-vx', vni: 7, port: 4789 };
    writeFileSync(d.configPath, JSON.stringify(cfg));
  }
  for (const node of [n1, n2]) {
    const vni = () => ipJson(['-d', 'link', 'show'], node.ns).find((l: any) => l.ifname === 'knit-vx')?.linkinfo.info_data.id;
    await eventually(() => vni() === 7, `${node.name}'s VTEP on VNI 7`, 10_000);
    const after = ipJson(['-d', 'link', 'show', 'knit-vx'], node.ns)[0];
    t.like(after.linkinfo.info_data, { id: 7, port: 4789 });
    t.not(after.ifindex, before.get(node.name).ifindex, 'a new device: the kernel changes no VNI in place');
    t.is(after.address, before.get(node.name).address, 'the MAC is the node\'s, whatever the VNI');
  }
  // The routes, neighbours and FDB entries that went with the old device are back on the new one.
  await eventually(() => ipJson(['route', 'show', n2.pod4], n1.ns)[0]?.dev === 'knit-vx', 'node 2\'s route on the new VTEP', 10_000);
  const fdb = JSON.parse(sh(n1.ns, 'bridge', '-j', 'fdb', 'show', 'dev', 'knit-vx'));
  t.truthy(fdb.find((e: any) => e.mac === before.get('n2').address && e.dst === n2.ip4), 'FDB entry for node 2 on the new VTEP');
  t.true(await eventually(() => pingFrom(pods[0].ns, pods[1].v4), 'reachable on VNI 7'));
  t.deepEqual(ipJson(['link', 'show'], n1.ns).filter((l: any) => l.ifname.startsWith('knit-vx')).map((l: any) => l.ifname), ['knit-vx'], 'no second VTEP left behind');
});
