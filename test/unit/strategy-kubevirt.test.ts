// The kubevirt strategy's plans: masquerade (default), tap, bridge. Pure plan shapes; the
// kernel tier runs the same plans in a netns.
import test from 'ava';
import { kubevirtStrategy } from '../../runtimes/kubevirt/index.js';
import { KnitError } from '../../src/base/errors.js';
import type { InterfaceRequest } from '../../src/base/types.js';
import type { LinkAddOp, NftApplyAction, TunAddOp } from '../../src/base/ops.js';
import type { Step } from '../../src/base/plan.js';
import type { Handoff, TapHandoff as VmHandoff } from '../../src/base/handoff.js';
import { makeInput, NETNS, V4, V6, createdLinks, inNetns, network, planProblems } from './strategy-plan-check.js';

const BRIDGE = [{ name: 'knbr0', netns: 'host' }];
const eth0 = (binding?: Record<string, string>): InterfaceRequest => ({ name: 'eth0', ...(binding ? { binding } : {}) });
const handoffOf = (plan: { interfaces: { handoff?: Handoff }[] }) => plan.interfaces.find((i) => i.handoff)!.handoff as VmHandoff;
const nftSteps = (steps: Step[]) => steps.filter((s) => s.do.op === 'nft.apply');
const chain = (ruleset: string, name: string) => {
  const m = new RegExp(`chain ${name} \\{\\n([\\s\\S]*?)\\n\\t\\}`).exec(ruleset);
  return (m?.[1] ?? '').split('\n').map((l) => l.trim()).filter(Boolean);
};

test('the plan checker flags a leaked object, a foreign device and a host-wide sysctl', (t) => {
  const bad: Step[] = [
    { description: 'tap without undo', netns: NETNS, do: { op: 'tun.add', name: 'tapx', mode: 'tap' } },
    { description: 'touch host eth0', do: { op: 'link.set', link: 'eth0', mtu: 9000 } },
    { description: 'host forwarding', do: { op: 'sysctl.set', key: 'net.ipv4.ip_forward', value: '1' } },
    { description: 'long name', netns: NETNS, do: { op: 'link.add', kind: 'bridge', name: 'k6t-averylongname' }, undo: { op: 'link.del', link: 'k6t-averylongname' } },
    { description: 'nft without undo', netns: NETNS, do: { op: 'nft.apply', family: 'ip', table: 'nat', ruleset: '' } },
  ];
  const problems = planProblems(bad);
  t.is(problems.length, 5, problems.join('\n'));
});

test('masquerade is the default: runc veth, k6t-eth0 gateway bridge, tap0 for uid 107, forwarding, nft table', (t) => {
  const plan = kubevirtStrategy.planInterface(makeInput('kubevirt', [eth0()]));
  t.deepEqual(planProblems(plan.steps, BRIDGE), []);
  const ns = inNetns(plan.steps, NETNS);
  const br = ns.find((s) => s.do.op === 'link.add' && s.do.kind === 'bridge')!;
  t.like(br.do, { name: 'k6t-eth0', mac: '02:00:00:00:00:00', mtu: 1450, up: true });
  t.true(ns.some((s) => s.do.op === 'addr.add' && s.do.link === 'k6t-eth0' && s.do.address === '10.0.2.1/24'));
  t.true(ns.some((s) => s.do.op === 'sysctl.set' && s.do.key === 'net.ipv4.conf.k6t-eth0.route_localnet' && s.do.value === '1'));
  const tun = ns.find((s) => s.do.op === 'tun.add')!.do as TunAddOp;
  t.like(tun, { name: 'tap0', owner: 107, group: 107, queues: 1, vnetHdr: true });
  t.true(ns.some((s) => s.do.op === 'link.set' && s.do.link === 'tap0' && s.do.master === 'k6t-eth0' && s.do.up === true));
  t.true(ns.some((s) => s.do.op === 'sysctl.set' && s.do.key === 'net.ipv4.ip_forward' && s.do.value === '1'));
  t.false(ns.some((s) => s.do.op === 'sysctl.set' && s.do.key.startsWith('net.ipv6')), 'no IPv6 forwarding for a v4-only pod');
  // The pod keeps its address on eth0.
  t.true(ns.some((s) => s.do.op === 'addr.add' && s.do.link === 'eth0' && s.do.address === '10.88.0.5/16'));
  const nft = nftSteps(plan.steps);
  t.is(nft.length, 1);
  t.like(nft[0], { netns: NETNS, do: { family: 'ip', table: 'nat' }, undo: { op: 'nft.delete', family: 'ip', table: 'nat' } });
  t.is(plan.steps.at(-1), nft[0], 'NAT goes in last, once the devices it names exist');

  const h = handoffOf(plan);
  t.like(h, {
    runtime: 'kubevirt', model: 'masquerade', device: 'tap', name: 'tap0', netns: NETNS, queues: 1, owner: 107, group: 107,
    flags: 'IFF_TAP|IFF_NO_PI|IFF_VNET_HDR', flagsValue: 0x5002, mtu: 1450, podIpsOn: 'pod', bridge: 'k6t-eth0',
  });
  t.deepEqual(h.guest.ips, [{ address: '10.0.2.2/24', family: 4, gateway: '10.0.2.1' }]);
  t.deepEqual(h.guest.routes, [{ dst: '0.0.0.0/0', gateway: '10.0.2.1' }]);
  t.like(h.guest, { mac: '0a:58:0a:58:00:05', mtu: 1450, delivery: 'dhcp' });
  t.deepEqual(h.guest.dns?.search, ['default.svc.cluster.local']);
  t.like(h.nat, { ports: 'all', guest4: '10.0.2.2', gateway4: '10.0.2.1' });
  t.regex((h.libvirt as { target: string }).target, /^<target dev='tap0' managed='no'\/>$/);
  t.deepEqual(plan.ips.map((ip) => plan.interfaces[ip.interface].name), ['eth0']);
});

test('masquerade NAT without declared ports: everything from eth0 to 10.0.2.2, loopback hairpin, masquerade out', (t) => {
  const plan = kubevirtStrategy.planInterface(makeInput('kubevirt', [eth0({ binding: 'masquerade' })]));
  const rs = (nftSteps(plan.steps)[0].do as NftApplyAction).ruleset;
  t.true(rs.startsWith('table ip nat {\n'));
  t.deepEqual(chain(rs, 'prerouting'), ['type nat hook prerouting priority -100; policy accept;', 'iifname "eth0" counter jump KUBEVIRT_PREINBOUND']);
  t.deepEqual(chain(rs, 'postrouting'), [
    'type nat hook postrouting priority 100; policy accept;',
    'ip saddr 10.0.2.2 counter masquerade',
    'oifname "k6t-eth0" counter jump KUBEVIRT_POSTINBOUND',
  ]);
  t.deepEqual(chain(rs, 'input'), ['type nat hook input priority 100; policy accept;']);
  t.deepEqual(chain(rs, 'output'), ['type nat hook output priority -100; policy accept;', 'ip daddr { 127.0.0.1 } counter dnat to 10.0.2.2']);
  t.deepEqual(chain(rs, 'KUBEVIRT_PREINBOUND'), ['counter dnat to 10.0.2.2']);
  t.deepEqual(chain(rs, 'KUBEVIRT_POSTINBOUND'), ['ip saddr { 127.0.0.1 } counter snat to 10.0.2.1']);
});

test('masquerade NAT with declared ports: only those are forwarded', (t) => {
  const plan = kubevirtStrategy.planInterface(makeInput('kubevirt', [eth0({ ports: 'tcp:80, udp:53' })]));
  const rs = (nftSteps(plan.steps)[0].do as NftApplyAction).ruleset;
  t.deepEqual(chain(rs, 'KUBEVIRT_PREINBOUND'), ['tcp dport { 80 } counter dnat to 10.0.2.2', 'udp dport { 53 } counter dnat to 10.0.2.2']);
  t.deepEqual(chain(rs, 'KUBEVIRT_POSTINBOUND'), [
    'tcp dport 80 ip saddr { 127.0.0.1 } counter snat to 10.0.2.1',
    'udp dport 53 ip saddr { 127.0.0.1 } counter snat to 10.0.2.1',
  ]);
  t.deepEqual(chain(rs, 'output').slice(1), [
    'ip daddr { 127.0.0.1 } tcp dport 80 counter dnat to 10.0.2.2',
    'ip daddr { 127.0.0.1 } udp dport 53 counter dnat to 10.0.2.2',
  ]);
  t.false(rs.includes('\t\tcounter dnat to'), 'no catch-all DNAT');
  t.deepEqual(handoffOf(plan).nat, { ports: [{ protocol: 'tcp', port: 80 }, { protocol: 'udp', port: 53 }], guest4: '10.0.2.2', gateway4: '10.0.2.1' });
});

test('masquerade dual-stack: an ip6 nat table, fd10:0:2::1/120 on the bridge, IPv6 forwarding', (t) => {
  const plan = kubevirtStrategy.planInterface(makeInput('kubevirt', [eth0()], { addresses: [V4, V6] }));
  t.deepEqual(planProblems(plan.steps, BRIDGE), []);
  const nft = nftSteps(plan.steps);
  t.deepEqual(nft.map((s) => (s.do as NftApplyAction).family), ['ip', 'ip6']);
  const rs6 = (nft[1].do as NftApplyAction).ruleset;
  t.deepEqual(chain(rs6, 'KUBEVIRT_PREINBOUND'), ['counter dnat to fd10:0:2::2']);
  t.true(chain(rs6, 'postrouting').includes('ip6 saddr fd10:0:2::2 counter masquerade'));
  t.deepEqual(chain(rs6, 'KUBEVIRT_POSTINBOUND'), ['ip6 saddr { ::1 } counter snat to fd10:0:2::1']);
  t.like(nft[1].undo, { op: 'nft.delete', family: 'ip6', table: 'nat' });
  t.true(plan.steps.some((s) => s.do.op === 'addr.add' && s.do.link === 'k6t-eth0' && s.do.address === 'fd10:0:2::1/120'));
  t.true(plan.steps.some((s) => s.netns === NETNS && s.do.op === 'sysctl.set' && s.do.key === 'net.ipv6.conf.all.forwarding'));
  t.deepEqual(handoffOf(plan).guest.ips.map((ip) => ip.address), ['10.0.2.2/24', 'fd10:0:2::2/120']);
});

test('tap binding: tap0 cross-connected to the pod veth by tc redirects, libvirt target in the hand-off', (t) => {
  const plan = kubevirtStrategy.planInterface(makeInput('kubevirt', [eth0({ binding: 'tap', queues: '4', owner: '0', group: '36' })]));
  t.deepEqual(planProblems(plan.steps, BRIDGE), []);
  const ns = inNetns(plan.steps, NETNS);
  t.like(ns.find((s) => s.do.op === 'tun.add')!.do, { name: 'tap0', queues: 4, owner: 0, group: 36 });
  t.deepEqual(
    ns.filter((s) => s.do.op === 'filter.add').map((s) => s.do),
    [
      { op: 'filter.add', link: 'eth0', parent: 'ingress', redirectTo: 'tap0' },
      { op: 'filter.add', link: 'tap0', parent: 'ingress', redirectTo: 'eth0' },
    ],
  );
  t.false(plan.steps.some((s) => s.do.op === 'nft.apply' || (s.do.op === 'link.add' && s.do.kind === 'bridge')));
  const h = handoffOf(plan);
  t.like(h, { model: 'tap', name: 'tap0', queues: 4, owner: 0, group: 36, flags: 'IFF_TAP|IFF_NO_PI|IFF_VNET_HDR|IFF_MULTI_QUEUE', podIpsOn: 'pod+guest' });
  const xml = (h.libvirt as { interface: string }).interface;
  t.true(xml.includes("<target dev='tap0' managed='no'/>"));
  t.true(xml.includes("<mac address='0a:58:0a:58:00:05'/>"));
  t.true(xml.includes("<mtu size='1450'/>"));
  t.true(xml.includes("<driver name='vhost' queues='4'/>"));
  t.deepEqual(h.guest.ips, [{ address: '10.88.0.5/16', family: 4, gateway: '10.88.0.1' }]);
});

test('tap binding names taps as KubeVirt does: net1 → tap1', (t) => {
  const plan = kubevirtStrategy.planInterface(makeInput('kubevirt', [eth0(), { name: 'net1', binding: { binding: 'tap' } }], { index: 1 }));
  t.is(handoffOf(plan).name, 'tap1');
  t.false((handoffOf(plan).libvirt as { interface: string }).interface.includes('<driver'), 'single queue: no vhost queues element');
});

test('bridge binding: eth0-nic without addresses, k6t-eth0 joining it and tap0, pod IP handed to the guest', (t) => {
  const plan = kubevirtStrategy.planInterface(makeInput('kubevirt', [eth0({ binding: 'bridge' })], { addresses: [V4, V6] }));
  t.deepEqual(planProblems(plan.steps, BRIDGE), []);
  const veth = plan.steps[0].do as LinkAddOp & { kind: 'veth' };
  t.is(veth.peer.name, 'eth0-nic');
  t.is(veth.peer.netns, NETNS);
  const ns = inNetns(plan.steps, NETNS);
  t.false(ns.some((s) => s.do.op === 'route.add' || (s.do.op === 'addr.add' && s.do.link === 'eth0-nic')));
  t.true(ns.some((s) => s.do.op === 'sysctl.set' && s.do.key === 'net.ipv6.conf.eth0-nic.disable_ipv6' && s.do.value === '1'));
  const br = ns.find((s) => s.do.op === 'link.add' && s.do.kind === 'bridge')!.do as LinkAddOp;
  t.like(br, { name: 'k6t-eth0', mac: veth.peer.mac, mtu: 1450 });
  t.true(ns.some((s) => s.do.op === 'link.set' && s.do.link === 'eth0-nic' && s.do.master === 'k6t-eth0'));
  t.true(ns.some((s) => s.do.op === 'link.set' && s.do.link === 'tap0' && s.do.master === 'k6t-eth0'));
  t.true(ns.some((s) => s.do.op === 'addr.add' && s.do.link === 'k6t-eth0' && s.do.address === '169.254.75.10/32'));
  t.true(ns.some((s) => s.do.op === 'sysctl.set' && s.do.key === 'net.ipv4.conf.k6t-eth0.arp_ignore'));
  t.false(plan.steps.some((s) => s.do.op === 'nft.apply'));

  const h = handoffOf(plan);
  t.like(h, { model: 'bridge', name: 'tap0', mac: '0a:58:0a:58:00:05', podIpsOn: 'guest', bridge: 'k6t-eth0' });
  t.not(veth.peer.mac, h.mac, 'the guest owns the pod MAC; the NIC has its own');
  t.deepEqual(h.guest.ips.map((ip) => ip.address), ['10.88.0.5/16', 'fd88::5/64']);
  t.deepEqual(h.guest.routes.map((r) => r.dst), ['0.0.0.0/0', '10.96.0.0/12', '::/0']);
  t.deepEqual(plan.ips.map((ip) => plan.interfaces[ip.interface].name), ['tap0', 'tap0']);
  t.deepEqual(plan.interfaces.map((i) => i.name).slice(1), ['eth0-nic', 'k6t-eth0', 'tap0']);
});

test('bridge binding on a routed network: the host end answers ARP and NDP for the guest\'s gateway', (t) => {
  const plan = kubevirtStrategy.planInterface(makeInput('kubevirt', [eth0({ binding: 'bridge' })], { mode: 'routed', addresses: [V4, V6] }));
  t.deepEqual(planProblems(plan.steps), []);
  const host = plan.interfaces[0].name;
  const hostSteps = inNetns(plan.steps, undefined);
  // The gateway's address itself, not proxy ARP: that answers only while the node has a route
  // covering 169.254.1.1 (test/kernel/kubevirt-bridge-routed.test.ts has a node without one).
  t.true(hostSteps.some((s) => s.do.op === 'addr.add' && s.do.link === host && s.do.address === '169.254.1.1/32' && s.do.scope === 'host'));
  t.false(hostSteps.some((s) => s.do.op === 'sysctl.set' && s.do.key.includes('proxy_arp')));
  t.true(hostSteps.some((s) => s.do.op === 'sysctl.set' && s.do.key === `net.ipv6.conf.${host}.proxy_ndp`));
  t.true(hostSteps.some((s) => s.do.op === 'neigh.add' && s.do.link === host && s.do.address === 'fe80::1' && s.do.proxy === true));
  t.true(hostSteps.some((s) => s.do.op === 'route.add' && s.do.dst === '10.88.0.5/32'), 'host route to the guest IP stays');
  const h = handoffOf(plan);
  t.deepEqual(h.guest.routes[0], { dst: '0.0.0.0/0', gateway: '169.254.1.1', onlink: true });
  t.deepEqual(h.guest.neighbors.map((n) => n.address), ['169.254.1.1', 'fe80::1']);
});

test('every kubevirt device name fits 15 bytes', (t) => {
  for (const binding of ['tap', 'masquerade', 'bridge']) {
    const plan = kubevirtStrategy.planInterface(makeInput('kubevirt', [{ name: 'pod1a2b3c4d5e6', binding: { binding } }]));
    for (const l of createdLinks(plan.steps)) t.true(Buffer.byteLength(l.name) <= 15, `${binding}: ${l.name}`);
  }
});

function invalidField(t: import('ava').ExecutionContext, fn: () => unknown, field: string) {
  const err = t.throws(fn, { instanceOf: KnitError });
  t.is(err?.code, 'INVALID_ARGUMENT');
  t.is(err?.details.field, field);
  t.true(err?.message.startsWith(`${field}: `));
}

test('bad kubevirt options are INVALID_ARGUMENT naming the field', (t) => {
  const plan = (binding: Record<string, string>) => () => kubevirtStrategy.planInterface(makeInput('kubevirt', [eth0(), { name: 'net1', binding }], { index: 1 }));
  invalidField(t, plan({ binding: 'slirp' }), 'interfaces[1].binding.binding');
  invalidField(t, plan({ binding: 'tap', ports: 'tcp:80' }), 'interfaces[1].binding.ports');
  invalidField(t, plan({ binding: 'tap', queues: '300' }), 'interfaces[1].binding.queues');
  invalidField(t, plan({ binding: 'tap', owner: 'qemu' }), 'interfaces[1].binding.owner');
  invalidField(t, plan({ binding: 'tap', group: '-1' }), 'interfaces[1].binding.group');
  invalidField(t, plan({ binding: 'tap', mode: 'tcfilter' }), 'interfaces[1].binding.mode');
  // The first interface is masquerade by default: a second one cannot be.
  invalidField(t, plan({ binding: 'masquerade' }), 'interfaces[1].binding.binding');
  const single = (binding: Record<string, string>) => () => kubevirtStrategy.planInterface(makeInput('kubevirt', [eth0(binding)]));
  invalidField(t, single({ ports: 'tcp:0' }), 'interfaces[0].binding.ports');
  invalidField(t, single({ ports: 'sctp:9' }), 'interfaces[0].binding.ports');
  invalidField(t, single({ ports: 'tcp:80,tcp:80' }), 'interfaces[0].binding.ports');
  invalidField(t, single({ ports: '80' }), 'interfaces[0].binding.ports');
  invalidField(t, () => kubevirtStrategy.planInterface(makeInput('kubevirt', [{ name: 'averylongname', binding: { binding: 'bridge' } }])), 'interfaces[0].name');
  invalidField(t, () => kubevirtStrategy.planInterface(makeInput('kubevirt', [eth0()], { addresses: [] })), 'interfaces[0].network');
  invalidField(t, () => kubevirtStrategy.planInterface(makeInput('kubevirt', [{ name: 'eth1' }, { name: 'x', binding: { binding: 'tap' } }], { index: 1 })), 'interfaces[1].name');
});

test('the guest\'s DNS is the request\'s, then its network\'s: with none in the request (a CNI ADD sends none), the network\'s alone, on every binding (issue 34)', (t) => {
  const netDns = { nameservers: ['10.88.0.53', 'fd88::53'], search: ['pods.example'], options: [], domain: 'example' };
  for (const binding of ['masquerade', 'tap', 'bridge']) {
    const input = makeInput('kubevirt', [eth0({ binding })], { addresses: [V4, V6] });
    const withNet = { ...input, network: network('bridge', { dns: netDns }) };
    t.deepEqual(handoffOf(kubevirtStrategy.planInterface(withNet)).guest.dns, {
      nameservers: ['10.96.0.10', '10.88.0.53', 'fd88::53'], search: ['default.svc.cluster.local', 'pods.example'], options: ['ndots:5'], domain: 'example',
    }, binding);
    const { dns: _none, ...request } = withNet.request;
    t.deepEqual(handoffOf(kubevirtStrategy.planInterface({ ...withNet, request })).guest.dns, netDns, `${binding}, no DNS in the request`);
  }
});
