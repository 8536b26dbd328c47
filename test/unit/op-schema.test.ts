// The op schema is written twice: as TypeScript types (src/base/ops.ts), which strategies build
// plans from, and as the addon's parsers (native/src/nl/*.cc), which read those plans. This
// test sends one sample of every op type with EVERY field TypeScript declares filled in (the
// compiler enforces that: `full<T>` takes only a value with all optional fields present) and
// asks the addon which fields it read. A field TypeScript declares that the addon never reads
// would be silently dropped; a field the addon reads that TypeScript does not declare can
// never be set. Either fails here, naming the op and the field.
import test from 'ava';
import { readFileSync } from 'node:fs';
import { native } from '../../src/net/native.js';
import type {
  AddrListOp, AddrOp, FilterDelOp, FilterListOp, LinkAddOp, LinkDelGroupOp, LinkDelOp, LinkEvictOp, LinkGetOp, LinkListOp, LinkSetOp,
  NeighAddOp, NeighDelOp, NeighListOp, FdbOp, FdbListOp, Op, QdiscListOp, QdiscOp, TbfQdiscAddOp, TbfQdiscDelOp, RedirectFilterAddOp, RouteListOp, RouteOp, SysctlGetOp, SysctlSetOp,
  TunAddOp, TunOpenOp, VfSetOp,
} from '../../src/base/ops.js';

type Full<T> = T extends object ? { [K in keyof T]-?: Full<NonNullable<T[K]>> } : T;
/** The sample must carry every field of T, nested objects included. */
const full = <T extends Op>(op: Full<T>): T => op as T;

type Variant<K extends LinkAddOp['kind']> = Extract<LinkAddOp, { kind: K }>;
type MacvlanOp = Variant<'macvlan' | 'macvtap'>;

const ns = '/run/netns/schema-sample';
const SAMPLES: Op[] = [
  full<Variant<'veth'>>({
    op: 'link.add', kind: 'veth', name: 'a0', mtu: 1500, mac: '02:00:00:00:00:01', alias: 'x', addrGenMode: 'none', group: 1, master: 'br0', up: true, txqlen: 10, reclaimParked: { group: 7, tagPrefix: 'knit:sandbox=' },
    peer: { name: 'b0', mac: '02:00:00:00:00:02', mtu: 1500, alias: 'y', netns: ns, nameIfTaken: 'b1' },
  }),
  full<Variant<'bridge'>>({
    op: 'link.add', kind: 'bridge', name: 'br0', mtu: 1500, mac: '02:00:00:00:00:03', alias: 'x', addrGenMode: 'none', group: 1, master: 'br1', up: true, txqlen: 10, reclaimParked: { group: 7, tagPrefix: 'knit:sandbox=' }, stpOff: true, netfilter: true,
  }),
  full<MacvlanOp>({
    op: 'link.add', kind: 'macvtap', name: 'm0', mtu: 1500, mac: '02:00:00:00:00:04', alias: 'x', addrGenMode: 'none', group: 1, master: 'br0', up: true, txqlen: 10, reclaimParked: { group: 7, tagPrefix: 'knit:sandbox=' },
    parent: 'a0', mode: 'bridge', index: 9000,
  }),
  full<Variant<'ifb'>>({ op: 'link.add', kind: 'ifb', name: 'ifb9', mtu: 1500, mac: '02:00:00:00:00:09', alias: 'x', addrGenMode: 'none', group: 1, master: 'br0', up: true, txqlen: 10, reclaimParked: { group: 7, tagPrefix: 'knit:sandbox=' } }),
  full<Variant<'vxlan'>>({
    op: 'link.add', kind: 'vxlan', name: 'vx0', mtu: 1450, mac: '02:00:00:00:00:05', alias: 'x', addrGenMode: 'none', group: 1, master: 'br0', up: true, txqlen: 10, reclaimParked: { group: 7, tagPrefix: 'knit:sandbox=' },
    vni: 42, port: 4789, local: '10.0.0.1', remote: '10.0.0.2', dev: 'a0', learning: false,
  }),
  full<LinkSetOp>({
    op: 'link.set', link: 'a0', up: true, mtu: 1400, mac: '02:00:00:00:00:06', name: 'a1', master: 'br0', netns: ns, alias: '', group: 2, txqlen: 5,
    hairpin: true, learning: false, bridgeNetfilter: true, ignoreMissing: true,
  }),
  full<LinkDelOp>({ op: 'link.del', link: 'a0', ignoreMissing: true }),
  full<LinkDelGroupOp>({ op: 'link.delGroup', group: 7, ignoreMissing: true }),
  full<LinkGetOp>({ op: 'link.get', link: 3, vfs: true }),
  full<LinkListOp>({ op: 'link.list', kind: 'veth' }),
  full<LinkEvictOp>({ op: 'link.evict', tagPrefix: 'knit:sandbox=', sparePrefix: 'knit:sandbox=sb;', claim: 'knit:sandbox=sb;if=eth0', group: 7 }),
  ...(['addr.add', 'addr.del'] as const).map((op) =>
    full<AddrOp>({ op, link: 'a0', address: '10.0.0.2/24', peer: '10.0.0.3', scope: 'global', noDad: true, noPrefixRoute: true, ignoreMissing: true }),
  ),
  full<AddrListOp>({ op: 'addr.list', link: 'a0', family: 6 }),
  ...(['route.add', 'route.replace', 'route.del'] as const).map((op) =>
    full<RouteOp>({
      op, dst: '10.1.0.0/16', family: 4, gateway: '10.0.0.1', link: 'a0', table: 254, metric: 10, scope: 'universe', onlink: true, mtu: 1400,
      src: '10.0.0.2', ignoreMissing: true, protocol: 201, type: 'unicast',
    }),
  ),
  full<RouteListOp>({ op: 'route.list', family: 4, table: 254 }),
  ...(['neigh.add', 'neigh.replace'] as const).map((op) =>
    full<NeighAddOp>({ op, link: 'a0', address: '10.0.0.9', lladdr: '02:00:00:00:00:07', proxy: false, ignoreMissing: true }),
  ),
  full<NeighDelOp>({ op: 'neigh.del', link: 'a0', address: '10.0.0.9', proxy: false, ignoreMissing: true }),
  full<NeighListOp>({ op: 'neigh.list', link: 'a0', family: 4 }),
  ...(['fdb.replace', 'fdb.del'] as const).map((op) => full<FdbOp>({ op, link: 'vx0', mac: '02:00:00:00:00:0a', dst: '10.0.0.2', ignoreMissing: true })),
  full<FdbListOp>({ op: 'fdb.list', link: 'vx0' }),
  ...(['qdisc.add', 'qdisc.del'] as const).map((op) => full<QdiscOp>({ op, link: 'a0', kind: 'clsact', ignoreMissing: true })),
  full<TbfQdiscAddOp>({ op: 'qdisc.add', link: 'a0', kind: 'tbf', rate: 2_500_000, burst: 250_000, limit: 312_500 }),
  full<TbfQdiscDelOp>({ op: 'qdisc.del', link: 'a0', kind: 'tbf', ignoreMissing: true }),
  full<QdiscListOp>({ op: 'qdisc.list', link: 'a0' }),
  full<RedirectFilterAddOp>({ op: 'filter.add', link: 'a0', parent: 'ingress', redirectTo: 'b0', prio: 1 }),
  full<FilterDelOp>({ op: 'filter.del', link: 'a0', parent: 'egress', prio: 1, ignoreMissing: true }),
  full<FilterListOp>({ op: 'filter.list', link: 'a0', parent: 'ingress' }),
  full<VfSetOp>({
    op: 'vf.set', link: 'pf0', vf: 1, mac: '02:00:00:00:00:08', vlan: 10, qos: 1, vlanProto: '802.1Q', spoofchk: true, trust: false,
    minTxRate: 10, maxTxRate: 100, linkState: 'auto',
  }),
  full<SysctlSetOp>({ op: 'sysctl.set', key: 'net.ipv4.conf.a0.forwarding', value: '1' }),
  full<SysctlGetOp>({ op: 'sysctl.get', key: 'net.ipv4.conf.a0.forwarding' }),
  full<TunAddOp>({ op: 'tun.add', name: 't0', mode: 'tap', queues: 2, owner: 0, group: 0, vnetHdr: true, persist: true, returnFds: true }),
  full<TunOpenOp>({ op: 'tun.open', name: 't0', mode: 'tap', queues: 2, vnetHdr: true }),
];

/** "a", "peer", "peer.name": every field path present in a sample. */
function fieldPaths(value: object, prefix = ''): string[] {
  return Object.entries(value).flatMap(([k, v]) => {
    const p = prefix + k;
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? [p, ...fieldPaths(v as object, p + '.')] : [p];
  });
}

function describe(op: Op): string {
  return op.op === 'link.add' || op.op === 'qdisc.add' || op.op === 'qdisc.del' ? `${op.op} (${op.kind})` : op.op;
}

const reads: string[][] = native.describeOps(SAMPLES);

for (const [i, op] of SAMPLES.entries()) {
  test(`${describe(op)}: the addon reads every field TypeScript declares, and no other`, (t) => {
    const declared = new Set(fieldPaths(op));
    const read = new Set(reads[i]);
    t.deepEqual([...declared].filter((f) => !read.has(f)), [], 'declared in src/base/ops.ts but never read by the addon');
    t.deepEqual([...read].filter((f) => !declared.has(f)), [], 'read by the addon but not declared in src/base/ops.ts');
  });
}

test('every op the addon dispatches on has a sample, and the addon refuses one it does not know', (t) => {
  const dispatch = readFileSync('native/src/nl/prepare.cc', 'utf8');
  const known = [...dispatch.matchAll(/name == "([a-z]+\.[a-zA-Z]+)"/g)].map((m) => m[1]!);
  t.true(known.length >= 20, 'prepare.cc still dispatches on op names this way');
  const sampled = new Set<string>(SAMPLES.map((op) => op.op));
  t.deepEqual(known.filter((name) => !sampled.has(name)), []);
  t.throws(() => native.describeOps([{ op: 'link.frobnicate' }]), { message: /unknown op 'link.frobnicate'/ });
});
