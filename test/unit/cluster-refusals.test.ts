// The peers knit refuses to route (src/cluster/refusals.ts, docs/cluster.md "Nodes knit does
// not route"): a block overlapping this node's own, either way round and in either family; a
// block overlapping an older Node's (the older keeps its routes; unknown or equal age: neither);
// an InternalIP that is this node's. A refused peer gets no route, neighbour or FDB entry in any
// mode, a route knit made for it earlier goes, and the literal node list refuses the same claims.
import test from 'ava';
import { validateConfig } from '../../src/config/load.js';
import { nodeNetworks } from '../../src/cluster/node-networks.js';
import { planNetwork } from '../../src/cluster/plan.js';
import { peersInPlace, reconcile, type KernelView } from '../../src/cluster/reconcile.js';
import { refusedPeers } from '../../src/cluster/refusals.js';
import { clusterNodeOf, nodeKept } from '../../src/daemon/kube-nodes.js';
import { ROUTE_PROTOCOL } from '../../src/base/names.js';
import type { ClusterNode } from '../../src/cluster/types.js';
import type { AddrInfo, RouteInfo } from '../../src/base/ops.js';

const self: ClusterNode = { name: 'a', podCIDRs: ['10.244.1.0/24', 'fd00:1::/64'], internalIPs: ['192.168.0.1', 'fd6b::1'] };
const b: ClusterNode = { name: 'b', podCIDRs: ['10.244.2.0/24', 'fd00:2::/64'], internalIPs: ['192.168.0.2', 'fd6b::2'] };
const own = [{ cidr: '10.244.1.0/24', what: "this node's podCIDR 10.244.1.0/24" }, { cidr: 'fd00:1::/64', what: "this node's podCIDR fd00:1::/64" }];
const refuse = (nodes: ClusterNode[], ownAddresses = ['192.168.0.1', 'fd6b::1']) => refusedPeers({ self: 'a', nodes: [self, ...nodes], ownBlocks: own, ownAddresses });

test('a peer block overlapping this node\'s, inside it, around it or equal, in either family, is refused; one beside it is not', (t) => {
  const r = refuse([
    b,
    { name: 'inside', podCIDRs: ['10.244.1.0/25'], internalIPs: ['192.168.0.3'] },
    { name: 'around', podCIDRs: ['10.244.0.0/23'], internalIPs: ['192.168.0.4'] },
    { name: 'same', podCIDRs: ['10.244.1.0/24'], internalIPs: ['192.168.0.5'] },
    { name: 'v6', podCIDRs: ['10.244.9.0/24', 'fd00:1::/80'], internalIPs: ['192.168.0.6'] },
  ]);
  t.false(r.has('b'));
  t.is(r.get('inside')?.problem, "refused: podCIDR 10.244.1.0/25 overlaps this node's podCIDR 10.244.1.0/24");
  t.deepEqual(r.get('inside')?.reasons, ['overlaps_this_node']);
  t.regex(r.get('around')!.problem, /podCIDR 10\.244\.0\.0\/23 overlaps this node's podCIDR 10\.244\.1\.0\/24/);
  t.regex(r.get('same')!.problem, /podCIDR 10\.244\.1\.0\/24 overlaps this node's podCIDR/);
  t.regex(r.get('v6')!.problem, /podCIDR fd00:1::\/80 overlaps this node's podCIDR fd00:1::\/64/);
  t.deepEqual(r.get('around')?.reasons, ['overlaps_this_node'], 'refused peers take no part in the contest among peers');
});

test('of two peers whose blocks overlap, the Node created first is routed; created in the same second, or neither with a timestamp: neither is', (t) => {
  const c = { name: 'c', podCIDRs: ['10.244.2.0/25'], internalIPs: ['192.168.0.3'] };
  const older = refuse([{ ...b, createdAt: '2024-05-01T10:00:00Z' }, { ...c, createdAt: '2024-05-01T10:00:01Z' }]);
  t.false(older.has('b'), 'the older Node keeps its route');
  t.is(older.get('c')?.problem, "refused: podCIDR 10.244.2.0/25 overlaps node b's podCIDR 10.244.2.0/24, whose Node was created first");
  t.deepEqual(older.get('c')?.reasons, ['overlaps_peer']);
  const younger = refuse([{ ...b, createdAt: '2024-05-01T10:00:02Z' }, { ...c, createdAt: '2024-05-01T10:00:01Z' }]);
  t.deepEqual([...younger.keys()], ['b'], 'whichever is older, whatever the order or the prefix length');
  t.deepEqual([...refuse([{ ...b, createdAt: '2024-05-01T10:00:00Z' }, c]).keys()], ['c'], 'a Node without a creationTimestamp counts as the youngest');
  for (const [x, y] of [[undefined, undefined], ['2024-05-01T10:00:00Z', '2024-05-01T10:00:00Z']]) {
    const tie = refuse([{ ...b, ...(x && { createdAt: x }) }, { ...c, ...(y && { createdAt: y }) }]);
    t.deepEqual([...tie.keys()].sort(), ['b', 'c'], `${x} / ${y}: neither`);
    t.regex(tie.get('b')!.problem, /overlaps node c's podCIDR 10\.244\.2\.0\/25, and neither Node was created before the other/);
  }
});

test('a refused Node takes no other node\'s routes: a claim on 10.0.0.0/8 overlapping this node\'s block, or one that lost to an older Node, blocks no one', (t) => {
  const at = (s: number) => `2024-05-01T10:00:${String(s).padStart(2, '0')}Z`;
  const others = [3, 4, 5].map((i) => ({ name: `n${i}`, podCIDRs: [`10.244.${i}.0/24`], internalIPs: [`192.168.0.${i}`], createdAt: at(10 + i) }));
  const giant = refuse([{ name: 'giant', podCIDRs: ['10.0.0.0/8'], internalIPs: ['192.168.0.99'], createdAt: at(0) }, ...others]);
  t.deepEqual([...giant.keys()], ['giant'], 'the oldest Node, but refused for overlapping this node: the younger ones are routed');
  // x is the oldest; wide (10.244.0.0/16 without this node's block is not possible, so: 10.244.4.0/22)
  // overlaps x and is older than n4 and n5.
  const chain = refuse([
    { name: 'x', podCIDRs: ['10.244.6.0/24'], internalIPs: ['192.168.0.6'], createdAt: at(1) },
    { name: 'wide', podCIDRs: ['10.244.4.0/22'], internalIPs: ['192.168.0.7'], createdAt: at(2) },
    ...others,
  ]);
  t.deepEqual([...chain.keys()], ['wide'], 'wide loses to x; n4 and n5 overlap only wide, which is not routed');
  t.regex(chain.get('wide')!.problem, /^refused: podCIDR 10\.244\.4\.0\/22 overlaps node x's podCIDR 10\.244\.6\.0\/24, whose Node was created first$/);
  // One Node overlapping many of the same age: three named, the count of the rest.
  const many = refuse([{ name: 'w', podCIDRs: ['10.244.0.0/20'], internalIPs: ['192.168.0.8'] }, ...[2, 3, 4, 5, 6].map((i) => ({ name: `m${i}`, podCIDRs: [`10.244.${i}.0/24`], internalIPs: [`192.168.0.${i}`] }))].map((n) => ({ ...n, podCIDRs: n.podCIDRs.map((c) => c.replace('10.244.', '10.245.')) })));
  t.regex(many.get('w')!.problem, /overlaps node m2's .*; .*m3's .*; .*m4's [^;]* \(and 2 more\)$/);
});

test('a peer whose InternalIP is this node\'s (an address of the host, or this node\'s InternalIP, however written) is refused', (t) => {
  const r = refuse([
    { name: 'x', podCIDRs: ['10.244.7.0/24'], internalIPs: ['198.18.0.1'] },
    { name: 'y', podCIDRs: ['10.244.8.0/24'], internalIPs: ['192.168.0.8', 'FD6B:0::0001'] },
    b,
  ], ['192.168.0.1', 'fd6b::1', '198.18.0.1', '127.0.0.1']);
  t.is(r.get('x')?.problem, 'refused: InternalIP 198.18.0.1 is an address of this node');
  t.deepEqual(r.get('x')?.reasons, ['this_node_address']);
  t.is(r.get('y')?.problem, 'refused: InternalIP FD6B:0::0001 is an address of this node');
  t.false(r.has('b'));
  const both = refuse([{ name: 'z', podCIDRs: ['10.244.1.128/25'], internalIPs: ['192.168.0.1'] }]);
  t.deepEqual(both.get('z')?.reasons, ['overlaps_this_node', 'this_node_address']);
  t.is(both.get('z')?.problem, "refused: podCIDR 10.244.1.128/25 overlaps this node's podCIDR 10.244.1.0/24; InternalIP 192.168.0.1 is an address of this node");
});

const cfg = (crossNode: string) => validateConfig({
  cluster: { nodeName: 'a', nodes: {} },
  networks: [{ name: 'pods', mode: 'bridge', ipv4: { subnet: 'node' }, ipv6: { subnet: 'node' }, crossNode }],
});
const addrs: AddrInfo[] = [
  { index: 2, family: 4, address: '192.168.0.1', prefixLen: 24, scope: 'global', flags: [] },
  { index: 2, family: 6, address: 'fd6b::1', prefixLen: 64, scope: 'global', flags: [] },
];
const linkNames = new Map([[2, 'eth0'], [3, 'pods'], [4, 'knit-vx1']]);
const bad: ClusterNode = { name: 'bad', podCIDRs: ['10.244.1.0/25'], internalIPs: ['192.168.0.9'] };
const planFor = (crossNode: string) => {
  const net = nodeNetworks({ networks: cfg(crossNode).networks, nodeName: 'a', node: self, source: 'test', held: () => false }).networks[0]!;
  const nodes = [self, b, bad];
  const refused = refusedPeers({ self: 'a', nodes, ownBlocks: own, ownAddresses: ['192.168.0.1'] });
  return planNetwork({ net, self, nodes, addrs, linkNames, refused });
};
const route = (r: Partial<RouteInfo> & { dst: string }): RouteInfo => ({ family: r.dst.includes(':') ? 6 : 4, table: 254, scope: 'universe', protocol: String(ROUTE_PROTOCOL), type: 'unicast', ...r });
const kernel = (routes: RouteInfo[]): KernelView => ({ routes, links: [...linkNames].map(([index, name]) => ({ index, name }) as any), neighs: new Map(), fdb: new Map() });

test('a refused peer gets no route, neighbour or FDB entry in any mode, and its status says why', (t) => {
  for (const mode of ['routes', 'vxlan', 'none']) {
    const plan = planFor(mode);
    t.false(plan.routes.some((r) => r.dst === '10.244.1.0/25'), `${mode}: no route for the refused block`);
    t.false(plan.fdb.some((f) => f.dst === '192.168.0.9'), `${mode}: no FDB entry`);
    t.false(plan.neighs.some((n) => n.address === '10.244.1.0'), `${mode}: no neighbour`);
    t.like(plan.peers.find((p) => p.node === 'bad'), { inPlace: false, subnets: ['10.244.1.0/25'], problem: "refused: podCIDR 10.244.1.0/25 overlaps this node's podCIDR 10.244.1.0/24" });
    t.deepEqual(plan.peers.map((p) => p.node), ['b', 'bad'], `${mode}: peers in name order`);
  }
  t.deepEqual(planFor('routes').routes.filter((r) => r.gateway).map((r) => r.dst), ['10.244.2.0/24', 'fd00:2::/64'], 'the other peer is routed as before');
  t.deepEqual(planFor('vxlan').fdb.map((f) => f.dst), ['192.168.0.2']);
  // crossNode none: a route to the block from someone else (a BGP speaker) does not make it in place.
  const none = planFor('none');
  t.false(peersInPlace(none, kernel([route({ dst: '10.244.1.0/25', gateway: '192.168.0.9', index: 2, protocol: 'bird' })])).find((p) => p.node === 'bad')!.inPlace);
});

test('a route knit made for a peer that is now refused is removed; another owner\'s route for that block is left alone', (t) => {
  const plan = planFor('routes');
  const inPlace = [
    route({ dst: '10.244.1.0/24', type: 'blackhole', metric: 4242 }),
    route({ dst: 'fd00:1::/64', type: 'blackhole', metric: 4242 }),
    route({ dst: '10.244.2.0/24', gateway: '192.168.0.2', index: 2 }),
    route({ dst: 'fd00:2::/64', gateway: 'fd6b::2', index: 2, metric: 1024 }),
  ];
  const made = reconcile([plan], kernel([...inPlace, route({ dst: '10.244.1.0/25', gateway: '192.168.0.9', index: 2 })]));
  t.deepEqual(made.ops, [{ op: 'route.del', dst: '10.244.1.0/25', family: 4, protocol: ROUTE_PROTOCOL, ignoreMissing: true, gateway: '192.168.0.9' }]);
  t.deepEqual(reconcile([plan], kernel([...inPlace, route({ dst: '10.244.1.0/25', gateway: '192.168.0.9', index: 2, protocol: 'static' })])).ops, []);
});

test('the literal node list is refused when two nodes\' podCIDRs overlap or two nodes share an InternalIP, naming the field', (t) => {
  const withNodes = (nodes: object) => () => validateConfig({ cluster: { nodeName: 'a', nodes }, networks: [{ name: 'p', ipv4: { subnet: 'node' }, crossNode: 'routes' }] });
  t.throws(withNodes({ a: { podCIDRs: ['10.1.1.0/24'], internalIPs: ['192.168.1.1'] }, b: { podCIDRs: ['10.1.1.0/25'], internalIPs: ['192.168.1.2'] } }), {
    message: /cluster\.nodes\.b\.podCIDRs\[0\]: 10\.1\.1\.0\/25 overlaps 10\.1\.1\.0\/24 of cluster\.nodes\.a/,
  });
  t.throws(withNodes({ a: { podCIDRs: ['10.1.2.0/24', 'fd00::/48'], internalIPs: [] }, b: { podCIDRs: ['10.1.1.0/24', 'fd00:0:0:7::/64'], internalIPs: [] } }), {
    message: /cluster\.nodes\.b\.podCIDRs\[1\]: fd00:0:0:7::\/64 overlaps fd00::\/48 of cluster\.nodes\.a/,
  });
  t.throws(withNodes({ a: { podCIDRs: ['10.1.1.0/24'], internalIPs: ['fd6b::1'] }, b: { podCIDRs: ['10.1.2.0/24'], internalIPs: ['192.168.1.2', 'fd6b:0::1'] } }), {
    message: /cluster\.nodes\.b\.internalIPs\[1\]: "fd6b:0::1" is also cluster\.nodes\.a's InternalIP/,
  });
  t.notThrows(withNodes({ a: { podCIDRs: ['10.1.1.0/24'], internalIPs: ['192.168.1.1'] }, b: { podCIDRs: ['10.1.2.0/24'], internalIPs: ['192.168.1.2'] } }));
});

test('a Node\'s creationTimestamp is kept and read as createdAt', (t) => {
  const n = { metadata: { name: 'n1', uid: 'u', resourceVersion: '1', creationTimestamp: '2024-05-01T10:00:00Z' }, spec: { podCIDRs: ['10.1.0.0/24'] }, status: { addresses: [] } };
  t.is(clusterNodeOf(nodeKept(n as any)).createdAt, '2024-05-01T10:00:00Z');
});
