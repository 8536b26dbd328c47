// NIC hot-plug into a running VM: a real QEMU guest (TCG) boots on its sandbox's eth0; then
// AddInterface gives the sandbox net1 on a second network, and the launcher does what Kata's
// runtime and virt-launcher do with the new tap's hand-off: QMP netdev_add + device_add into
// the running guest, and the guest's NIC configuration delivered by an agent (a stand-in on
// port 8081, fixtures/guest-init.ts). A peer pod on the second network pings the guest through
// net1; then device_del + netdev_del, RemoveInterface, and nothing of net1 is left while eth0
// keeps answering.
import test from 'ava';
import { Cleanup } from '../fixtures/cleanup.js';
import { Qmp } from '../fixtures/qmp.js';
import { startDaemon, cleanupDaemon, makeNetns, removeNetns, removeLinkQuietly, eventually, hostLinks, pingFrom, type Daemon } from '../helpers/daemon.js';
import { ip, tc, type Json } from '../helpers/observe.js';
import { askGuestAgent, launchVm, vmHandoff, type Handoff } from '../helpers/vm-launcher.js';

/** The guest answers once /init has configured it; allow a few lost first packets. */
function pingsSoon(ns: string | undefined, addr: string): boolean {
  for (let i = 0; i < 5; i++) if (pingFrom(ns, addr)) return true;
  return false;
}

/** What the agent stand-in is told: the NIC's MAC, address and non-default routes. */
async function deliverToAgent(agentAddr: string, h: Handoff): Promise<string> {
  const v4 = h.guest.ips.find((i) => i.family === 4)!;
  const routes = h.guest.routes.filter((r) => !r.dst.includes(':') && r.dst !== '0.0.0.0/0').map((r) => (r.gateway ? `${r.dst}@${r.gateway}` : r.dst));
  const line = ['nic', h.guest.mac, v4.address, ...routes].join(' ');
  return askGuestAgent(agentAddr, line);
}

/** Devices and qdiscs of one interface in the sandbox netns, and its host end. */
function leftoversOf(ns: string, sandboxId: string, names: string[]) {
  return {
    links: ip(ns, 'link', 'show').map((l: Json) => l.ifname).filter((n: string) => names.includes(n)),
    qdiscs: tc(ns, 'qdisc', 'show').filter((q: Json) => names.includes(q.dev) && q.kind !== 'noqueue').map((q: Json) => `${q.kind} on ${q.dev}`),
    host: hostLinks().filter((l) => l.ifalias?.includes(`sandbox=${sandboxId};if=net1`)).map((l) => l.ifname),
  };
}

const cases = [
  {
    tag: 'mvm1', runtime: 'KATA', net: 40,
    eth0: { mode: 'tcfilter' }, net1: { mode: 'tcfilter' }, tap: 'tap1_kata',
    /** Where the guest's eth0 is reached from the host. */
    agentAddr: (h: Handoff, _pod: string) => h.guest.ips[0].address.split('/')[0],
  },
  {
    tag: 'mvm2', runtime: 'KUBEVIRT', net: 42,
    eth0: { binding: 'masquerade' }, net1: { binding: 'bridge' }, tap: 'tap1',
    // Masquerade: the guest is 10.0.2.2 behind NAT; the pod IP forwards every port to it.
    agentAddr: (_h: Handoff, pod: string) => pod,
  },
];

for (const c of cases) {
  test.serial(`${c.runtime}: AddInterface's tap is hot-plugged into the running guest (QMP netdev_add/device_add), a peer pings it through net1; device_del/netdev_del and RemoveInterface leave nothing`, async (t) => {
    const cleanup = new Cleanup();
    t.teardown(() => cleanup.run());
    const B = `${c.tag}b`;
    const opts = {
      prefix: c.tag, subnet: `10.174.${c.net}.0/24`,
      extraNetworks: [{ name: B, mode: 'bridge', bridge: `${c.tag}bbr`, ipv4: { subnet: `10.174.${c.net + 1}.0/24` } }],
    };
    const vm = { ns: `${c.tag}-vm`, id: `${c.tag}-vm` };
    const peer = { ns: `${c.tag}-peer`, id: `${c.tag}-peer` };
    let d: Daemon | undefined;
    cleanup.defer(`stop daemon ${c.tag}`, async () => {
      await cleanupDaemon(d, opts, [vm.id, peer.id]);
      removeLinkQuietly(`${c.tag}bbr`);
    });
    d = await startDaemon(opts);
    for (const s of [vm, peer]) {
      makeNetns(s.ns);
      cleanup.defer(`remove netns ${s.ns}`, () => removeNetns(s.ns));
    }
    const peerIp = (await d.call('Attach', { sandbox_id: peer.id, netns_path: `/run/netns/${peer.ns}`, interfaces: [{ name: 'eth0', network: B }] })).result.ips[0].address.split('/')[0];

    const attached = (await d.call('Attach', { sandbox_id: vm.id, netns_path: `/run/netns/${vm.ns}`, runtime: c.runtime, interfaces: [{ name: 'eth0', binding: c.eth0 }] })).result;
    const eth0 = vmHandoff(attached).handoff;
    const podIp = attached.ips[0].address.split('/')[0];
    const { guest } = await launchVm({ sandboxId: vm.id, ifname: 'eth0', handoff: eth0, by: 'name', name: c.tag, qmp: true });
    cleanup.defer(`stop guest ${c.tag}`, () => guest.stop());
    await guest.waitFor(/KNIT-READY/);
    const agent = c.agentAddr(eth0, podIp);
    t.true(pingsSoon(undefined, agent), `host reaches the guest's eth0 at ${agent}`);

    // Hot-plug: the answer is the whole sandbox, with the new tap's hand-off.
    const added = (await d.call('AddInterface', { sandbox_id: vm.id, interface: { name: 'net1', network: B, binding: c.net1 } })).result;
    const withHandoff = added.interfaces.filter((i: any) => i.handoff);
    t.is(withHandoff.length, 2, 'eth0 and net1 each have a hand-off');
    const net1 = vmHandoff({ sandbox_id: vm.id, interfaces: withHandoff.slice(1) }).handoff;
    t.like(net1, { name: c.tap, device: 'tap', netns: `/run/netns/${vm.ns}` });
    t.is(net1.guest.name, 'net1');
    t.false(net1.guest.routes.some((r) => r.dst === '0.0.0.0/0'), 'the default route stays on eth0');
    const net1Ip = net1.guest.ips[0].address.split('/')[0];
    t.true(net1Ip.startsWith(`10.174.${c.net + 1}.`), net1Ip);
    t.false(pingFrom(peer.ns, net1Ip), 'no guest NIC behind net1 yet: nobody answers');

    const qmp = await Qmp.connect(guest.qmpSocket!);
    cleanup.defer('close QMP', () => qmp.close());
    await qmp.command('netdev_add', { type: 'tap', id: 'hp1', ifname: net1.name, script: 'no', downscript: 'no', vhost: false });
    await qmp.command('device_add', { driver: 'virtio-net-pci', id: 'nic1', netdev: 'hp1', mac: net1.mac });
    const answer = await deliverToAgent(agent, net1);
    t.regex(answer, /^OK \S+$/, `agent: ${answer}\n${guest.serial().slice(-1500)}`);
    await guest.waitFor(new RegExp(`KNIT-AGENT-NIC \\S+ mac=${net1.mac}`));
    t.true(pingsSoon(peer.ns, net1Ip), `peer on ${B} → guest ${net1Ip} through net1:\n${guest.serial().slice(-1000)}`);
    t.true(pingsSoon(undefined, agent), 'eth0 still answers');
    const check = await d.call('Check', { sandbox_id: vm.id });
    t.true(check.ok, check.differences.join('; '));

    // Unplug from the guest, then from the sandbox.
    await qmp.command('device_del', { id: 'nic1' });
    await qmp.waitEvent('DEVICE_DELETED', (e) => e?.device === 'nic1');
    await qmp.command('netdev_del', { id: 'hp1' });
    await d.call('RemoveInterface', { sandbox_id: vm.id, name: 'net1' });
    const net1Devices = added.interfaces.filter((i: any) => i.sandbox && !attached.interfaces.some((a: any) => a.name === i.name)).map((i: any) => i.name);
    t.true(net1Devices.includes(c.tap), JSON.stringify(net1Devices));
    await eventually(() => {
      const l = leftoversOf(vm.ns, vm.id, net1Devices);
      return l.links.length + l.qdiscs.length + l.host.length === 0;
    }, 'nothing of net1 left');
    t.deepEqual(leftoversOf(vm.ns, vm.id, net1Devices), { links: [], qdiscs: [], host: [] });
    t.false(pingFrom(peer.ns, net1Ip), 'net1 is gone');
    t.true(pingsSoon(undefined, agent), 'eth0 still answers after the unplug');
    const after = await d.call('Query', { sandbox_id: vm.id });
    t.true(after.live.ok, after.live.differences.join('; '));
    t.deepEqual(after.sandbox.request.interfaces.map((i: any) => i.name), ['eth0']);

    await guest.stop();
    for (const s of [vm, peer]) await d.call('Detach', { sandbox_id: s.id });
    await eventually(() => ip(vm.ns, 'link', 'show').length === 1, 'VM sandbox emptied');
  });
}
