// The BGP variant: routed networks with crossNode "none" on three node netns, and an
// unmodified bird2 per node in an iBGP full mesh that exports what knit marks with its route
// protocol (the node's block: a blackhole of protocol 201). Pods reach pods across nodes over
// the routes BIRD learned, and a knit restart withdraws nothing. bird runs with its own config,
// control socket and pid file under the test's directory and is ended by PID.
import test from 'ava';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { uniquePrefix, makeNetns } from '../helpers/names.js';
import { eventually, ipJson, pingFrom, runcAttachReq } from '../helpers/daemon.js';
import { buildFabric, clusterDaemons, listening, routeMonitor, tcpHello, tcpServer, type FabricNode } from '../helpers/cluster-fabric.js';

const SEG = 216;

/** bird2's config for one node: the docs' example (docs/cluster.md, "BGP"), with this test's addresses. */
function birdConfig(self: FabricNode, peers: FabricNode[]): string {
  const peerBlocks = peers.flatMap((p) => [
    `protocol bgp m4_${p.name} from mesh { neighbor ${p.ip4} as 64512; ipv4 { import all; export filter knit_blocks; }; }`,
    `protocol bgp m6_${p.name} from mesh { neighbor ${p.ip6} as 64512; ipv6 { import all; export filter knit_blocks; }; }`,
  ]);
  return `router id ${self.ip4};
filter knit_blocks { if dest = RTD_BLACKHOLE then accept; reject; }
protocol device { scan time 1; }
protocol direct { ipv4; ipv6; interface "eth0"; }
protocol kernel k4 { ipv4 { import filter { if krt_source = 201 then accept; reject; }; export filter { if source = RTS_BGP then accept; reject; }; }; learn; scan time 1; }
protocol kernel k6 { ipv6 { import filter { if krt_source = 201 then accept; reject; }; export filter { if source = RTS_BGP then accept; reject; }; }; learn; scan time 1; }
template bgp mesh { local as 64512; direct; connect retry time 1; }
${peerBlocks.join('\n')}
`;
}

test('BGP: bird2 exports each node\'s block as knit marks it; pods reach pods across nodes; a knit restart withdraws nothing', async (t) => {
  t.timeout(240_000);
  const P = uniquePrefix('clb');
  const f = buildFabric(t, P, SEG);
  const nodes = f.nodes.slice(0, 3); // the fabric's; BGP to the far node would need an IGP
  const net = { name: `${P}net`, mode: 'routed', ipv4: { subnet: 'node' }, ipv6: { subnet: 'node' }, crossNode: 'none' };
  const cd = clusterDaemons(t, f);
  for (const node of nodes) await cd.start(node, net);

  const dir = mkdtempSync(path.join(os.tmpdir(), `knit-${P}bird-`));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const node of nodes) {
    const conf = path.join(dir, `${node.name}.conf`);
    writeFileSync(conf, birdConfig(node, nodes.filter((n) => n !== node)));
    const bird = spawn('ip', ['netns', 'exec', node.ns, '/usr/sbin/bird', '-f', '-c', conf, '-s', path.join(dir, `${node.name}.ctl`), '-P', path.join(dir, `${node.name}.pid`)], { stdio: 'ignore' });
    t.teardown(() => {
      if (bird.exitCode === null) bird.kill('SIGKILL');
    });
  }

  const pods: { node: FabricNode; ns: string; v4: string; v6: string }[] = [];
  for (const node of nodes) {
    const ns = makeNetns(t, P, `p${node.name}`);
    const r = (await cd.daemons.get(node.name)!.call('Attach', runcAttachReq(`${P}${node.name}-pod`, ns.path))).result;
    pods.push({ node, ns: ns.name, v4: r.ips.find((i: any) => !i.address.includes(':')).address.split('/')[0], v6: r.ips.find((i: any) => i.address.includes(':')).address.split('/')[0] });
  }
  // knit's marks: the block a blackhole, the pod's /32 with the same protocol.
  const [n1, n2, n3] = nodes;
  const own = ipJson(['route', 'show', 'proto', '201'], n1.ns);
  t.truthy(own.find((r: any) => r.dst === n1.pod4 && r.type === 'blackhole'));
  t.truthy(own.find((r: any) => r.dst === pods[0].v4));

  // Each node learns the others' blocks from BIRD, and only the blocks.
  await eventually(() => ipJson(['route', 'show', 'proto', 'bird'], n1.ns).length >= 2 && ipJson(['-6', 'route', 'show', 'proto', 'bird'], n1.ns).length >= 2, 'node 1 learns two blocks per family over BGP', 60_000);
  const learned = ipJson(['route', 'show', 'proto', 'bird'], n1.ns);
  t.deepEqual(learned.map((r: any) => `${r.dst} via ${r.gateway}`).sort(), [`${n2.pod4} via ${n2.ip4}`, `${n3.pod4} via ${n3.ip4}`]);
  const s1 = await cd.daemons.get('n1')!.call('NodeStatus', {});
  t.is(s1.networks[0].cross_node, 'none');
  t.deepEqual(s1.networks[0].peers.map((p: any) => `${p.node} ${p.in_place}`), ['n2 true', 'n3 true', 'n4 false'], 'knit sees the routes BIRD put in (node 4 has no BGP session)');

  for (const a of pods) {
    for (const b of pods) {
      if (a === b) continue;
      t.true(pingFrom(a.ns, b.v4), `${a.node.name} pod → ${b.node.name} pod (IPv4)`);
      t.true(await eventually(() => pingFrom(a.ns, b.v6), `${a.node.name} pod → ${b.node.name} pod (IPv6)`), 'IPv6');
    }
  }
  const srv = tcpServer(t, pods[1].ns, 7021);
  await listening(srv);
  t.is(tcpHello(pods[0].ns, pods[1].v4, 7021), `from ${pods[0].v4}`);

  // Node 2's knit restarts: its block stays in its kernel, BIRD withdraws nothing, node 1's
  // route to it never goes.
  const monitor = routeMonitor(n1.ns);
  const d2 = cd.daemons.get('n2')!;
  await d2.stop();
  cd.daemons.set('n2', await d2.restart());
  await new Promise((r) => setTimeout(r, 3000)); // BIRD scans every second: give it three
  t.deepEqual(monitor.stop().filter((l) => l.startsWith('Deleted')), [], 'ip monitor route on node 1: nothing withdrawn');
  t.true(pingFrom(pods[0].ns, pods[1].v4));
});
