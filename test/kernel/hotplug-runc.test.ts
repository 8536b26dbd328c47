// Interfaces added to and removed from a running runc sandbox (AddInterface/RemoveInterface),
// against a real daemon, checked with ip, ping and knit's own Query/Check/NodeStatus.
import test from 'ava';
import { spawn } from 'node:child_process';
import { fromStruct } from '../../src/api/struct.js';
import * as grpc from '@grpc/grpc-js';
import { knitProto } from '../../src/api/proto.js';
import {
  startDaemon, cleanupDaemon, ipJson, pingFrom, eventually, hostLinks, removeLinkQuietly, podFactory, runcAttachReq, type Daemon,
} from '../helpers/daemon.js';
import { linkEventsDuring, type LinkEvent } from '../helpers/link-monitor.js';
import { reapGroup, setInstance } from '../../src/base/names.js';

const P = 'mhot';
const NET_B = `${P}b`;
const opts = {
  prefix: P,
  subnet: '10.174.1.0/24',
  extraNetworks: [
    {
      name: NET_B, mode: 'bridge', bridge: `${P}bbr`, ipv4: { subnet: '10.174.2.0/24' },
      routes: [{ dst: '10.174.3.0/24' }], dns: { nameservers: ['10.174.2.53'], search: ['b.example'] },
    },
  ],
};
const NET_A = `${P}net`;
let d: Daemon | undefined;
const pods = podFactory(P);

test.after.always(async () => {
  await cleanupDaemon(d, opts, pods.ids);
  removeLinkQuietly(`${P}bbr`);
  pods.removeAll();
});

const addr = (r: any, ifname: string) => {
  const i = r.interfaces.findIndex((x: any) => x.name === ifname && x.sandbox);
  return r.ips.find((ip: any) => ip.interface === i)?.address as string | undefined;
};

test.serial('AddInterface plugs net1 on a second network into a running pod; RemoveInterface takes it out and eth0 keeps flowing', async (t) => {
  d = await startDaemon(opts);
  const a = pods.pod(0);
  const peer = pods.pod(1);
  await d.call('Attach', runcAttachReq(a.id, a.path));
  const peerIp = addr((await d.call('Attach', runcAttachReq(peer.id, peer.path, { extra: { interfaces: [{ name: 'eth0', network: NET_B }] } }))).result, 'eth0')!.split('/')[0];
  const routeTo = (dst: string) => ipJson(['route', 'get', dst], a.ns)[0].dev;
  t.is(routeTo(peerIp), 'eth0', 'before the add, network B is only beyond the default route');

  const plan = await d.call('Plan', { add_interface: { sandbox_id: a.id, interface: { name: 'net1', network: NET_B } } });
  t.true(plan.steps.some((s: any) => /create veth .* net1/.test(s.description)), 'knit plan shows the add');

  const { result } = await d.call('AddInterface', { sandbox_id: a.id, interface: { name: 'net1', network: NET_B } });
  const net1Ip = addr(result, 'net1')!;
  t.regex(net1Ip, /^10\.174\.2\.\d+\/24$/);
  t.regex(addr(result, 'eth0')!, /^10\.174\.1\.\d+\/24$/, 'the answer still lists eth0 with its address');
  t.deepEqual(result.dns.nameservers, ['10.174.2.53'], "network B's DNS is merged into the result");
  t.true(result.routes.some((r: any) => r.dst === '10.174.3.0/24' && r.gw === '10.174.2.1'));
  t.false(result.routes.some((r: any) => r.dst === '0.0.0.0/0' && r.gw === '10.174.2.1'), 'no second default route');

  // Independent observer: the kernel of the pod.
  const net1 = ipJson(['addr', 'show', 'dev', 'net1'], a.ns)[0];
  t.true(net1.addr_info.some((x: any) => `${x.local}/${x.prefixlen}` === net1Ip));
  const routes = ipJson(['route', 'show'], a.ns);
  t.deepEqual(routes.filter((r: any) => r.dst === 'default').map((r: any) => r.dev), ['eth0'], 'the default route stays on eth0');
  t.true(routes.some((r: any) => r.dst === '10.174.3.0/24' && r.gateway === '10.174.2.1' && r.dev === 'net1'));
  t.is(routeTo(peerIp), 'net1');
  t.true(pingFrom(a.ns, peerIp), 'pod → network B peer through net1');
  t.true(pingFrom(a.ns, '10.174.1.1'), 'pod → its eth0 gateway');

  // A repeated Attach (a CNI ADD retried for eth0) still gets the sandbox's answer.
  const repeat = await d.call('Attach', runcAttachReq(a.id, a.path));
  t.is(addr(repeat.result, 'net1'), net1Ip);
  // Idempotent; a different request under the same name is refused.
  const again = await d.call('AddInterface', { sandbox_id: a.id, interface: { name: 'net1', network: NET_B } });
  t.is(addr(again.result, 'net1'), net1Ip);
  const clash = await t.throwsAsync<any>(d.call('AddInterface', { sandbox_id: a.id, interface: { name: 'net1', network: NET_A } }));
  t.is(clash?.code, 9, 'FAILED_PRECONDITION');
  const dflt = await t.throwsAsync<any>(d.call('AddInterface', { sandbox_id: a.id, interface: { name: 'net2', network: NET_B, default_route: true } }));
  t.is(dflt?.code, 3);
  t.regex(dflt!.details, /^interface\.default_route: /);
  const badNet = await t.throwsAsync<any>(d.call('AddInterface', { sandbox_id: a.id, interface: { name: 'net2', network: 'nope' } }));
  t.regex(badNet!.details, /^interface\.network: /);

  // Query and Check cover the added interface.
  const q = await d.call('Query', { sandbox_id: a.id });
  t.true(q.live.ok, q.live.differences.join('; '));
  t.true(q.pod_ips.includes(net1Ip.split('/')[0]));
  t.deepEqual(q.sandbox.request.interfaces.map((i: any) => i.name), ['eth0', 'net1']);
  const hostEnd = result.interfaces.find((i: any) => i.sandbox && i.name === 'net1').host_name;
  t.is(hostLinks().find((l) => l.ifname === hostEnd)?.master, `${P}bbr`, "net1's host end is a port of network B's bridge");
  // Check notices when the added interface is broken behind knit's back.
  ipJson(['link', 'set', 'net1', 'down'], a.ns);
  const broken = await d.call('Check', { sandbox_id: a.id });
  t.false(broken.ok);
  t.true(broken.differences.some((x: string) => x.includes('net1')), broken.differences.join('; '));
  ipJson(['link', 'set', 'net1', 'up'], a.ns);

  // The default interface cannot be unplugged alone.
  const eth0 = await t.throwsAsync<any>(d.call('RemoveInterface', { sandbox_id: a.id, name: 'eth0' }));
  t.is(eth0?.code, 9);

  // Remove net1 while eth0 carries traffic: not one packet of it is lost.
  const ping = spawn('ip', ['netns', 'exec', a.ns, 'ping', '-c', '30', '-i', '0.05', '10.174.1.1'], { stdio: ['ignore', 'pipe', 'ignore'] });
  let out = '';
  ping.stdout.on('data', (b) => (out += b));
  const pinged = new Promise((r) => ping.once('exit', r));
  await new Promise((r) => setTimeout(r, 300));
  setInstance(`knit-${P}`); // reapGroup() of this test's daemon
  const isPark = (e: LinkEvent) => e.ifname === hostEnd && !e.deleted && e.group === String(reapGroup());
  const events = await linkEventsDuring(() => d!.call('RemoveInterface', { sandbox_id: a.id, name: 'net1' }));
  await pinged;
  t.regex(out, / 0% packet loss/, 'eth0 traffic during the removal');

  // net1's host end is parked at once (the kernel's announcement, seen even once the reaper has
  // deleted it): down, in the reap group, under its own name, until the reaper deletes the
  // pair, pod end included. If still there, it is a disabled port of its bridge.
  const parked = events.find(isPark);
  t.truthy(parked, events.map((e) => e.line).join('\n'));
  t.false(parked!.flags.includes('UP'), 'the host end is down at once');
  const still = hostLinks().find((l) => l.ifname === hostEnd);
  if (still) t.is(still.linkinfo?.info_slave_data?.state, 'disabled', JSON.stringify(still.linkinfo));
  await eventually(() => !hostLinks().some((l) => l.ifname === hostEnd), 'net1 host end reaped');
  t.deepEqual(ipJson(['link', 'show'], a.ns).map((l: any) => l.ifname).sort(), ['eth0', 'lo']);
  t.is(routeTo(peerIp), 'eth0', 'network B is no longer on-link');
  t.true(pingFrom(a.ns, '10.174.1.1'));
  const status = await d.call('NodeStatus', {});
  t.is(Number(status.networks.find((n: any) => n.name === NET_B).pools[0].used), 1, "net1's address went back to the pool (the peer holds the other)");
  const q2 = await d.call('Query', { sandbox_id: a.id });
  t.true(q2.live.ok, q2.live.differences.join('; '));
  t.deepEqual(q2.sandbox.result.interfaces.filter((i: any) => i.sandbox).map((i: any) => i.name), ['eth0']);
  await d.call('RemoveInterface', { sandbox_id: a.id, name: 'net1' }); // idempotent

  // Plug it again (same name), then GC with only eth0 valid takes net1 away.
  await d.call('AddInterface', { sandbox_id: a.id, interface: { name: 'net1', network: NET_B } });
  t.true(pingFrom(a.ns, peerIp));
  const gc = await d.call('GarbageCollect', { valid_attachments: [{ sandbox_id: a.id, interface_name: 'eth0' }, { sandbox_id: peer.id }] });
  t.true(gc.removed.includes(`sandbox ${a.id} interface net1`), gc.removed.join('; '));
  await eventually(() => ipJson(['link', 'show'], a.ns).length === 2, 'net1 reaped after GC');
  t.deepEqual(ipJson(['link', 'show'], a.ns).map((l: any) => l.ifname).sort(), ['eth0', 'lo']);

  // Detach after hot-plugs leaves nothing.
  await d.call('AddInterface', { sandbox_id: a.id, interface: { name: 'net2', network: NET_B } });
  for (const id of pods.ids) await d.call('Detach', { sandbox_id: id });
  await eventually(() => !hostLinks().some((l) => pods.ids.some((id) => l.ifalias?.includes(`sandbox=${id};`))), 'every device reaped');
  t.deepEqual(ipJson(['link', 'show'], a.ns).map((l: any) => l.ifname), ['lo']);
  const end = await d.call('NodeStatus', {});
  t.true(end.networks.every((n: any) => n.pools.every((p: any) => Number(p.used) === 0)));
});

test.serial('Kata: interfaces plugged and unplugged in any order; a removed tap number is taken by the next added interface', async (t) => {
  const vm = pods.pod(2);
  const add = (name: string) => d!.call('AddInterface', { sandbox_id: vm.id, interface: { name, network: NET_B, binding: { mode: 'tcfilter' } } });
  const taps = () => ipJson(['link', 'show'], vm.ns).map((l: any) => l.ifname).filter((n: string) => /^tap\d+_kata$/.test(n)).sort();
  await d!.call('Attach', { sandbox_id: vm.id, netns_path: vm.path, runtime: 'KATA', interfaces: [{ name: 'eth0', binding: { mode: 'tcfilter' } }] });
  await add('net1');
  await add('net2');
  t.deepEqual(taps(), ['tap0_kata', 'tap1_kata', 'tap2_kata']);
  await d!.call('RemoveInterface', { sandbox_id: vm.id, name: 'net1' });
  await eventually(() => taps().length === 2, 'tap1_kata gone');
  const { result } = await add('net3');
  const tapOf = (name: string) => result.interfaces.find((i: any) => i.handoff && (fromStruct(i.handoff) as any).guest?.name === name)?.name;
  t.is(tapOf('net3'), 'tap1_kata', 'net3 takes the number net1 gave back');
  t.is(tapOf('net2'), 'tap2_kata');
  t.deepEqual(taps(), ['tap0_kata', 'tap1_kata', 'tap2_kata']);
  const q = await d!.call('Query', { sandbox_id: vm.id });
  t.true(q.live.ok, q.live.differences.join('; '));
  t.deepEqual(q.sandbox.request.interfaces.map((i: any) => i.name), ['eth0', 'net2', 'net3']);
  await d!.call('Detach', { sandbox_id: vm.id });
  await eventually(() => ipJson(['link', 'show'], vm.ns).length === 1, 'VM sandbox emptied');
  t.deepEqual(ipJson(['link', 'show'], vm.ns).map((l: any) => l.ifname), ['lo']);
});

test.serial('Watch reports interface-added and interface-removed, each with the sandbox result after it', async (t) => {
  const p = pods.pod(3);
  const client = new (knitProto().Knit)(`unix://${d!.socket}`, grpc.credentials.createInsecure());
  t.teardown(() => client.close());
  const events: any[] = [];
  const stream = (client as any).Watch({ sandbox_id: p.id }) as grpc.ClientReadableStream<any>;
  stream.on('data', (e: any) => e.sandbox && events.push(e.sandbox)); // link events of its host ends come too
  stream.on('error', () => undefined); // CANCELLED at the end
  t.teardown(() => stream.cancel());
  await new Promise<void>((resolve) => stream.once('metadata', () => resolve()));

  await d!.call('Attach', runcAttachReq(p.id, p.path));
  await d!.call('AddInterface', { sandbox_id: p.id, interface: { name: 'net1', network: NET_B } });
  await d!.call('AddInterface', { sandbox_id: p.id, interface: { name: 'net1', network: NET_B } }); // a repeat changes nothing
  await d!.call('RemoveInterface', { sandbox_id: p.id, name: 'net1' });
  await d!.call('RemoveInterface', { sandbox_id: p.id, name: 'net1' });
  await d!.call('Detach', { sandbox_id: p.id });
  await eventually(() => events.some((e) => e?.type === 'detach'), 'the detach event');
  t.deepEqual(events.map((e) => e.type), ['attach', 'interface-added', 'interface-removed', 'detach'], 'each change once, in order');
  const podSide = (e: any) => e.result.interfaces.filter((i: any) => i.sandbox).map((i: any) => i.name);
  t.deepEqual(podSide(events[1]), ['eth0', 'net1']);
  t.deepEqual(podSide(events[2]), ['eth0']);
});
