// KubeVirt's bridge binding on a routed network, on a node with no default route (an air-gapped
// node, or one whose routes come from BGP later): the guest, configured by DHCP, has no
// permanent neighbour entry for its gateway 169.254.1.1 and ARPs for it, and the pod's host end
// must answer with its fixed MAC. Proxy ARP would not: the kernel answers a proxied ARP only
// for an address it has a route to (projectcalico/calico#3270). The daemon runs in a node netns
// whose only address is on lo; a python helper plays the guest on tap0 as QEMU opens it.
// Prefix kvbr; subnet 10.220.2.0/24; the node's address 10.220.3.1.
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { startDaemon, cleanupDaemon, eventually, type Daemon } from '../helpers/daemon.js';
import { makeNetns, uniquePrefix } from '../helpers/names.js';
import { ip, type Json } from '../helpers/observe.js';
import { openTapPeer } from '../fixtures/tap-peer.js';
import { arpReplyFrom, arpRequest, arpSenderMac, framesAfter } from '../helpers/arp-frames.js';
import { vmHandoff } from '../helpers/vm-launcher.js';

const GATEWAY = '169.254.1.1';

test('bridge binding on a routed network, node without a default route: the host end answers the guest\'s ARP for its gateway with ee:ee:ee:ee:ee:ee; detach takes the address with the veth', async (t) => {
  const P = uniquePrefix('kvbr');
  const node = makeNetns(t, P, 'node').name;
  execFileSync('ip', ['-n', node, 'link', 'set', 'lo', 'up']);
  execFileSync('ip', ['-n', node, 'addr', 'add', '10.220.3.1/32', 'dev', 'lo']);
  t.deepEqual(ip(node, 'route', 'show', 'default'), [], 'the node has no default route');
  const o = { prefix: P.replace(/-/g, ''), subnet: '10.220.2.0/24', mode: 'routed' as const, netns: node };
  const id = `${P}vm`;
  const d: Daemon = await startDaemon(o);
  t.teardown(() => cleanupDaemon(d, o, [id]));
  const vm = makeNetns(t, P, 'vm');

  const res = (await d.call('Attach', {
    sandbox_id: id, netns_path: vm.path, runtime: 'KUBEVIRT', interfaces: [{ name: 'eth0', binding: { binding: 'bridge' } }],
  })).result;
  const { handoff: h } = vmHandoff(res);
  const guestIp = h.guest.ips[0].address.split('/')[0];
  t.deepEqual(h.guest.routes[0], { dst: '0.0.0.0/0', gateway: GATEWAY, onlink: true });
  const hostEnd = res.interfaces.find((i: { sandbox?: string }) => !i.sandbox).name as string;

  const peer = await openTapPeer(vm.name, h.name);
  t.teardown(() => peer.stop());
  const frames = await framesAfter(peer, arpRequest(h.mac, guestIp, GATEWAY), (f) => arpReplyFrom(f, GATEWAY));
  const reply = arpReplyFrom(frames, GATEWAY);
  t.truthy(reply, `no ARP reply for ${GATEWAY} reached the guest (${frames.length} frames)`);
  if (reply) t.is(arpSenderMac(reply), 'ee:ee:ee:ee:ee:ee');
  await peer.stop();
  // How: the host end holds the gateway's address, with scope host so that the node's own
  // traffic to the guest keeps the node's address as its source.
  const v4 = (dev: string) => ip(node, 'addr', 'show', 'dev', dev)[0]?.addr_info.filter((a: Json) => a.family === 'inet').map((a: Json) => `${a.local}/${a.prefixlen} scope ${a.scope}`);
  t.deepEqual(v4(hostEnd), [`${GATEWAY}/32 scope host`]);
  t.is(ip(node, 'route', 'get', guestIp)[0]?.prefsrc, '10.220.3.1');

  await d.call('Detach', { sandbox_id: id });
  await eventually(() => !ip(node, 'link', 'show').some((l: Json) => l.ifalias?.includes(`sandbox=${id};`)), 'the host end is reaped').catch(() => undefined);
  t.deepEqual(ip(node, 'link', 'show').filter((l: Json) => l.ifalias?.includes(`sandbox=${id};`)).map((l: Json) => l.ifname), []);
  t.deepEqual(ip(node, 'addr', 'show').flatMap((l: Json) => l.addr_info).filter((a: Json) => a.local === GATEWAY), [], `no ${GATEWAY} left on the node`);
});
