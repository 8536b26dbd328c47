// The cluster network's pure parts: the config's cluster keys, node subnets filled in (or
// waited for, or kept under pods), the plans for routes and vxlan, the reconciler's
// differences (only what differs), and the masquerade ruleset.
import test from 'ava';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { validateConfig, ConfigError } from '../../src/config/load.js';
import { nodeNetworks } from '../../src/cluster/node-networks.js';
import { planNetwork } from '../../src/cluster/plan.js';
import { reconcile, peersInPlace, type KernelView } from '../../src/cluster/reconcile.js';
import { masqueradeRuleset } from '../../src/cluster/masquerade.js';
import { clusterNodeOf, nodeKept } from '../../src/daemon/kube-nodes.js';
import { vtepDrift } from '../../src/daemon/cluster-kernel.js';
import { vtepMac, ROUTE_PROTOCOL } from '../../src/base/names.js';
import type { ClusterNode } from '../../src/cluster/types.js';
import type { AddrInfo, RouteInfo } from '../../src/base/ops.js';

const nodes: ClusterNode[] = [
  { name: 'a', podCIDRs: ['10.244.1.0/24', 'fd00:1::/64'], internalIPs: ['192.168.0.1', 'fd6b::1'] },
  { name: 'b', podCIDRs: ['10.244.2.0/24', 'fd00:2::/64'], internalIPs: ['192.168.0.2', 'fd6b::2'] },
  { name: 'c', podCIDRs: ['10.244.3.0/24'], internalIPs: ['192.168.9.3'] },
];
const cfg = (crossNode: string, extra: object = {}) =>
  validateConfig({
    cluster: { nodeName: 'a', nodes: Object.fromEntries(nodes.map((n) => [n.name, { podCIDRs: n.podCIDRs, internalIPs: n.internalIPs }])) },
    networks: [{ name: 'pods', mode: 'bridge', ipv4: { subnet: 'node' }, ipv6: { subnet: 'node' }, crossNode, ...extra }],
  });
const addrs: AddrInfo[] = [
  { index: 2, family: 4, address: '192.168.0.1', prefixLen: 24, scope: 'global', flags: [] },
  { index: 2, family: 6, address: 'fd6b::1', prefixLen: 64, scope: 'global', flags: [] },
];
const linkNames = new Map([[2, 'eth0'], [3, 'pods'], [4, 'knit-vx1']]);
const resolved = (c: ReturnType<typeof cfg>, node = nodes[0]) => nodeNetworks({ networks: c.networks, nodeName: 'a', node, source: 'test', held: () => false });

test('config: "node" subnets need the cluster section; a malformed literal map is an error at start', (t) => {
  t.throws(() => validateConfig({ networks: [{ name: 'p', ipv4: { subnet: 'node' }, crossNode: 'routes' }] }), { instanceOf: ConfigError, message: /needs the "cluster" section/ });
  t.throws(() => validateConfig({ cluster: { nodes: { a: { podCIDRs: ['10.1.1.1/24'] } } }, networks: [{ name: 'p', ipv4: { subnet: 'node' } }] }), { message: /cluster\.nodes\.a\.podCIDRs\[0\]: "10\.1\.1\.1\/24" has host bits set/ });
  t.throws(() => validateConfig({ cluster: {}, networks: [{ name: 'p', ipv4: { subnet: '10.1.0.0/16' }, crossNode: 'routes' }] }), { message: /every node must have its own block/ });
  t.throws(() => validateConfig({ cluster: {}, networks: [{ name: 'p', ipv4: { subnet: 'node', gateway: '10.0.0.1' } }] }), { message: /cannot be set when subnet is "node"/ });
  t.is(cfg('vxlan').networks[0].vxlan?.device, 'knit-vx1');
});

test('node subnets: filled in from the node; waited for, naming the node and field; kept while pods hold the old one', (t) => {
  const r = resolved(cfg('routes'));
  t.is(r.networks[0].ipv4?.subnet, '10.244.1.0/24');
  t.is(r.networks[0].ipv4?.gateway, '10.244.1.1');
  t.is(r.networks[0].ipv6?.subnet, 'fd00:1::/64');
  const waiting = nodeNetworks({ networks: cfg('routes').networks, nodeName: 'a', node: { ...nodes[0], podCIDRs: [] }, source: 'test', held: () => false });
  t.regex(waiting.notReady.get('pods')!, /Node "a" has no IPv4 entry in spec\.podCIDRs/);
  t.is(waiting.networks[0].ipv4, undefined, 'no pool until the subnet is known');
  const gone = nodeNetworks({ networks: cfg('routes').networks, nodeName: 'a', node: undefined, source: 'the API', held: () => false });
  t.regex(gone.notReady.get('pods')!, /Node "a" is not in the API/);
  const moved = nodeNetworks({ networks: cfg('routes').networks, nodeName: 'a', node: { ...nodes[0], podCIDRs: ['10.244.7.0/24', 'fd00:1::/64'] }, source: 'test', previous: r.networks, held: (_n, f) => f === 4 });
  t.is(moved.networks[0].ipv4?.subnet, '10.244.1.0/24', 'not re-addressed under its pods');
  t.regex(moved.notReady.get('pods')!, /changed its IPv4 entry from 10\.244\.1\.0\/24 to 10\.244\.7\.0\/24 while pods hold addresses/);
  t.is(resolved(cfg('vxlan')).networks[0].mtu, 1450, 'vxlan pods leave room for 50 bytes of encapsulation');
});

test('routes: a route per on-link peer and family, the own block a blackhole, an off-link peer reported', (t) => {
  const net = resolved(cfg('routes')).networks[0];
  const plan = planNetwork({ net, self: nodes[0], nodes, addrs, linkNames });
  t.deepEqual(plan.routes.filter((r) => r.type === 'blackhole').map((r) => r.dst), ['10.244.1.0/24', 'fd00:1::/64']);
  t.deepEqual(plan.routes.filter((r) => r.gateway).map((r) => `${r.dst} via ${r.gateway} dev ${r.link}`), ['10.244.2.0/24 via 192.168.0.2 dev eth0', 'fd00:2::/64 via fd6b::2 dev eth0']);
  t.regex(plan.peers.find((p) => p.node === 'c')!.problem!, /192\.168\.9\.3 is not on a link of this node/);
  t.deepEqual(plan.forwarding, ['pods', 'eth0']);
});

test('vxlan: flannel\'s three entries per peer, the VTEP MAC from the node name', (t) => {
  const net = resolved(cfg('vxlan')).networks[0];
  const plan = planNetwork({ net, self: nodes[0], nodes, addrs, linkNames });
  t.like(plan.vtep, { name: 'knit-vx1', vni: 1, port: 8472, local: '192.168.0.1', dev: 'eth0', mac: vtepMac('a', 'pods'), address: '10.244.1.0/32' });
  t.deepEqual(plan.fdb.map((f) => f.dst), ['192.168.0.2', '192.168.9.3'], 'the far node too: VXLAN needs only IP reachability');
  t.deepEqual(plan.neighs.find((n) => n.address === '10.244.3.0'), { link: 'knit-vx1', address: '10.244.3.0', lladdr: vtepMac('c', 'pods') });
  t.like(plan.routes.find((r) => r.dst === '10.244.3.0/24'), { gateway: '10.244.3.0', link: 'knit-vx1', onlink: true });
  t.is(vtepMac('c', 'pods'), vtepMac('c', 'pods'), 'stable');
});

const route = (r: Partial<RouteInfo> & { dst: string }): RouteInfo => ({ family: r.dst.includes(':') ? 6 : 4, table: 254, scope: 'universe', protocol: String(ROUTE_PROTOCOL), type: 'unicast', ...r });

test('reconcile: nothing for what is in place, replace what differs, remove what no node owns, never a route of another owner or a pod route', (t) => {
  const net = resolved(cfg('routes')).networks[0];
  const plan = planNetwork({ net, self: nodes[0], nodes, addrs, linkNames });
  const inPlace: RouteInfo[] = [
    route({ dst: '10.244.1.0/24', type: 'blackhole', metric: 4242 }),
    route({ dst: 'fd00:1::/64', type: 'blackhole', metric: 4242, index: 1 }),
    route({ dst: '10.244.2.0/24', gateway: '192.168.0.2', index: 2 }),
    route({ dst: 'fd00:2::/64', gateway: 'fd6b::2', index: 2, metric: 1024 }),
  ];
  const kernel = (routes: RouteInfo[]): KernelView => ({ routes, links: [...linkNames].map(([index, name]) => ({ index, name }) as any), neighs: new Map(), fdb: new Map() });
  t.deepEqual(reconcile([plan], kernel(inPlace)).ops, [], 'adopted as it is');
  t.true(peersInPlace(plan, kernel(inPlace)).find((p) => p.node === 'b')!.inPlace);
  const drifted = [
    ...inPlace.slice(0, 2),
    route({ dst: '10.244.2.0/24', gateway: '192.168.0.99', index: 2 }),
    route({ dst: '10.244.9.0/24', gateway: '192.168.0.9', index: 2 }), // a node that left
    route({ dst: '10.244.8.0/24', gateway: '192.168.0.8', index: 2, protocol: 'static' }), // not knit's
    route({ dst: '10.244.1.5/32', index: 3, scope: 'link' }), // a routed pod's
  ];
  const r = reconcile([plan], kernel(drifted));
  t.deepEqual(r.ops.map((o: any) => `${o.op} ${o.dst}${o.gateway ? ` via ${o.gateway}` : ''}`), [
    'route.replace 10.244.2.0/24 via 192.168.0.2', 'route.replace fd00:2::/64 via fd6b::2', 'route.del 10.244.9.0/24 via 192.168.0.9',
  ]);
  t.true(r.ops.every((o: any) => o.protocol === ROUTE_PROTOCOL));
  t.is(r.differences.length, 3);
  // Another owner's route where knit's would go: left alone, and named.
  const taken = reconcile([plan], kernel([...inPlace.slice(0, 2), inPlace[3]!, route({ dst: '10.244.2.0/24', gateway: '192.168.0.7', index: 2, protocol: 'static' })]));
  t.deepEqual(taken.ops, []);
  t.regex(taken.differences[0]!, /route 10\.244\.2\.0\/24 via 192\.168\.0\.2 dev eth0: a route of another owner \(protocol static\) holds that destination/);
});

test('masquerade: the own block leaving the cluster, never to any node\'s block, the cluster and service CIDRs, or nonMasqueradeCIDRs', (t) => {
  const c = validateConfig({
    cluster: { nodeName: 'a', nodes: {}, serviceCIDRs: ['10.96.0.0/12'] },
    networks: [{ name: 'pods', ipv4: { subnet: 'node' }, crossNode: 'routes', nonMasqueradeCIDRs: ['172.16.0.0/12'] }],
  });
  const net = resolved(c).networks[0];
  const rules = masqueradeRuleset({ table: 'knit-cluster', networks: [net], nodes, cluster: c.cluster! })!;
  t.regex(rules, /table inet knit-cluster/);
  t.regex(rules, /ip saddr 10\.244\.1\.0\/24 ip daddr != \{ 10\.244\.1\.0\/24, 10\.244\.2\.0\/24, 10\.244\.3\.0\/24, 10\.96\.0\.0\/12, 172\.16\.0\.0\/12 \} masquerade/);
  t.is(masqueradeRuleset({ table: 't', networks: [{ ...net, masquerade: false }], nodes, cluster: c.cluster! }), undefined);
});

test('a Node object read as knit reads it: podCIDRs (or podCIDR), InternalIPs only', (t) => {
  t.deepEqual(clusterNodeOf({ metadata: { name: 'x' }, spec: { podCIDR: '10.1.0.0/24' }, status: { addresses: [{ type: 'Hostname', address: 'x' }, { type: 'InternalIP', address: '192.0.2.1' }] } } as any), { name: 'x', podCIDRs: ['10.1.0.0/24'], internalIPs: ['192.0.2.1'] });
});

test('`knit serve` without a cluster network loads neither src/kube nor the cluster code: only dynamic imports reach them', (t) => {
  const seen = new Set<string>();
  const walk = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = readFileSync(file, 'utf8');
    // Static imports and re-exports only; `await import(...)` is how the daemon loads them on demand.
    for (const m of text.matchAll(/^(?:import|export)\s[^;]*?from\s+'(\.{1,2}\/[^']+)'/gms)) {
      if (/^import\s+type\s/.test(m[0]) || /^export\s+type\s/.test(m[0])) continue;
      walk(path.normalize(path.join(path.dirname(file), m[1]!.replace(/\.js$/, '.ts'))));
    }
  };
  walk('src/daemon/serve.ts');
  t.true(seen.has('src/core/manager.ts') && seen.has('src/net/handle.ts'), 'the walk follows the daemon\'s imports');
  t.deepEqual([...seen].filter((f) => f.startsWith('src/kube/') || f === 'src/daemon/cluster.ts' || f === 'src/daemon/kube-nodes.ts'), []);
});

test('vtepDrift names each VXLAN setting the kernel\'s VTEP no longer shares with the plan, and nothing when all match', (t) => {
  const links = [{ index: 2, name: 'eth0', mtu: 1500, up: true, lowerUp: true, operstate: 'up', group: 0 }, { index: 3, name: 'eth1', mtu: 1500, up: true, lowerUp: true, operstate: 'up', group: 0 }];
  const want = { network: 'n', name: 'knit-vx', vni: 7, port: 4789, local: '192.168.1.1', dev: 'eth0', mac: '0e:00:00:00:00:01', mtu: 1450 };
  const vtep = (vxlan: object) => ({ index: 9, name: 'knit-vx', kind: 'vxlan', mtu: 1450, up: true, lowerUp: true, operstate: 'up', group: 0, vxlan: { vni: 7, port: 4789, local: '192.168.1.1', dev: 2, ...vxlan } });
  t.deepEqual(vtepDrift(vtep({}), want, links), []);
  t.deepEqual(vtepDrift(vtep({ vni: 1, port: 8472 }), want, links), ['vni 1 → 7', 'port 8472 → 4789']);
  t.deepEqual(vtepDrift(vtep({ local: '192.168.1.9', dev: 3 }), want, links), ['local 192.168.1.9 → 192.168.1.1', 'dev eth1 → eth0']);
  t.deepEqual(vtepDrift(vtep({ dev: 44 }), want, links), ['dev ifindex 44 → eth0'], 'an underlay that is gone is named by its index');
});

test('the Node informer keeps only what the cluster view reads: clusterNodeOf sees the same node, the images and conditions are gone', (t) => {
  const full = {
    metadata: { name: 'n1', uid: 'u1', resourceVersion: '7', labels: { a: 'b' }, managedFields: [{ manager: 'kubelet' }] },
    spec: { podCIDR: '10.1.0.0/24', podCIDRs: ['10.1.0.0/24', 'fd00:1::/64'], providerID: 'x' },
    status: {
      addresses: [{ type: 'InternalIP', address: '192.168.1.1' }, { type: 'Hostname', address: 'n1' }],
      conditions: [{ type: 'Ready', status: 'True' as const }],
      images: Array.from({ length: 50 }, (_, i) => ({ names: [`registry.example/image-${i}:v1`], sizeBytes: 1000 })),
    },
  };
  const kept = nodeKept(full as any);
  t.deepEqual(clusterNodeOf(kept), clusterNodeOf(full as any));
  t.deepEqual(kept.metadata, { name: 'n1', uid: 'u1', resourceVersion: '7' }, 'what the informer\'s cache and relist diff need');
  t.true(JSON.stringify(kept).length * 10 < JSON.stringify(full).length);
});

test('a Node\'s podCIDR or InternalIP that does not parse stays out of the cluster view (the API server does not check them all)', (t) => {
  const n = { metadata: { name: 'n1' }, spec: { podCIDRs: ['10.1.0.0/24', 'fd00:1::/200'] }, status: { addresses: [{ type: 'InternalIP', address: '192.168.1.300' }, { type: 'InternalIP', address: 'fd6b::1' }] } };
  t.deepEqual(clusterNodeOf(n as any), { name: 'n1', podCIDRs: ['10.1.0.0/24'], internalIPs: ['fd6b::1'] });
});
