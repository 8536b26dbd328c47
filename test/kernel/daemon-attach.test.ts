// The daemon end to end over gRPC, runc strategy, bridge mode: what a kubelet or runtime sees,
// checked against what `ip` sees.
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { status } from '@grpc/grpc-js';
import { hostIfName, reapGroup, setInstance } from '../../src/base/names.js';
import {
  startDaemon, cleanupDaemon, removeNetns, ipJson, pingFrom, eventually, hostLinks, podFactory, runcAttachReq, type Daemon,
} from '../helpers/daemon.js';
import { linkEventsDuring, type LinkEvent } from '../helpers/link-monitor.js';
import { link } from '../helpers/observe.js';

const P = 'kda';
const SUBNET = '10.231.1.0/24';
const opts = { prefix: P, subnet: SUBNET };
setInstance(`knit-${P}`); // reapGroup() answers for this test's daemon
let d: Daemon | undefined;
const { pod, netnsNames, ids } = podFactory(P);

const attachReq = (id: string, netns: string, extra: object = {}) => runcAttachReq(id, netns, { extra });

test.before(async () => {
  d = await startDaemon(opts);
});

test.after.always(async () => {
  await cleanupDaemon(d, opts, ids);
  for (const n of netnsNames) removeNetns(n);
});

test.serial('the bridge network is set up with its gateway and knit tag', (t) => {
  const [br] = ipJson(['link', 'show', 'dev', `${P}br`]);
  t.is(br.linkinfo.info_kind, 'bridge');
  t.is(br.ifalias, `knit-${P}:network=${P}net`);
  const [addr] = ipJson(['addr', 'show', 'dev', `${P}br`]);
  t.true(addr.addr_info.some((a: any) => a.local === '10.231.1.1' && a.prefixlen === 24));
});

test.serial('attach builds a veth pair, address and default route; the pod pings its gateway and the host pings it', async (t) => {
  const p = pod(1);
  const res = await d!.call('Attach', attachReq(p.id, p.path));
  const r = res.result;
  const podIf = r.interfaces.find((i: any) => i.sandbox === p.path);
  const hostIf = r.interfaces.find((i: any) => !i.sandbox);
  t.is(podIf.name, 'eth0');
  t.is(r.ips.length, 1);
  t.regex(r.ips[0].address, /^10\.231\.1\.\d+\/24$/);
  t.is(r.ips[0].gateway, '10.231.1.1');

  // Independent observer: the host end is on the bridge, tagged, up.
  const [host] = ipJson(['link', 'show', 'dev', hostIf.name]);
  t.is(host.master, `${P}br`);
  t.true(host.ifalias.startsWith(`knit-${P}:sandbox=${p.id};`));
  t.true(host.flags.includes('UP'));
  // In the pod: eth0 with the address and MAC the result reports, default route via gateway.
  const [eth0] = ipJson(['addr', 'show', 'dev', 'eth0'], p.ns);
  t.is(eth0.address, podIf.mac);
  t.true(eth0.addr_info.some((a: any) => `${a.local}/${a.prefixlen}` === r.ips[0].address));
  const routes = ipJson(['route', 'show', 'default'], p.ns);
  t.is(routes[0].gateway, '10.231.1.1');
  t.true(pingFrom(p.ns, '10.231.1.1'), 'pod pings its gateway');
  t.true(pingFrom(undefined, r.ips[0].address.split('/')[0]), 'host pings the pod');
  // A bridge port has no address of its own: no IPv6 link-local even now that it has carrier.
  t.is(ipJson(['link', 'show', 'dev', hostIf.name])[0].inet6_addr_gen_mode, 'none');
  t.deepEqual(ipJson(['-6', 'addr', 'show', 'dev', hostIf.name]).flatMap((l: any) => l.addr_info), []);
});

test.serial('attach is idempotent; a different request for the same sandbox is refused', async (t) => {
  const p = pod(2);
  const first = await d!.call('Attach', attachReq(p.id, p.path));
  const again = await d!.call('Attach', attachReq(p.id, p.path));
  t.deepEqual(again.result, first.result);
  const err = await t.throwsAsync(d!.call('Attach', attachReq(p.id, p.path, { interfaces: [{ name: 'net1' }] })));
  t.is((err as any).code, status.FAILED_PRECONDITION);
  t.regex(err!.message, /already attached/);
  t.is(ipJson(['link', 'show'], p.ns).filter((l: any) => l.ifname === 'net1').length, 0, 'the refused request changed nothing');
});

test.serial('query and check report the live state; check names what drifted', async (t) => {
  const p = pod(3);
  await d!.call('Attach', attachReq(p.id, p.path));
  const q = await d!.call('Query', { sandbox_id: p.id });
  t.is(q.sandbox.sandbox_id ?? q.sandbox.request?.sandbox_id ?? p.id, p.id);
  t.true(q.live.ok, q.live.differences.join('; '));
  ipJson(['link', 'show'], p.ns); // observer sanity
  const { execFileSync } = await import('node:child_process');
  execFileSync('ip', ['-n', p.ns, 'link', 'set', 'eth0', 'mtu', '1400']);
  const c = await d!.call('Check', { sandbox_id: p.id });
  t.false(c.ok);
  t.true(c.differences.some((s: string) => /eth0 .*MTU 1400, expected 1500/.test(s)), c.differences.join('; '));
  const hostEnd = q.sandbox.result.interfaces.find((i: any) => !i.sandbox).name;
  execFileSync('ip', ['link', 'set', hostEnd, 'nomaster']);
  const c2 = await d!.call('Check', { sandbox_id: p.id });
  t.true(c2.differences.some((s: string) => s.includes(`${hostEnd} on the host is not a port of bridge ${P}br`)), c2.differences.join('; '));
});

test.serial('detach removes everything of the sandbox and frees its address; detach again is fine', async (t) => {
  const p = pod(4);
  const { result } = await d!.call('Attach', attachReq(p.id, p.path));
  const hostName = result.interfaces.find((i: any) => !i.sandbox).name;
  await d!.call('Detach', { sandbox_id: p.id });
  // Detach answers once the pair is inert (down, off the bridge); the reaper deletes it.
  await eventually(() => !hostLinks().some((l) => l.ifname === hostName || l.ifalias?.includes(`sandbox=${p.id};`)), 'host end reaped');
  t.deepEqual(ipJson(['link', 'show'], p.ns).map((l: any) => l.ifname), ['lo'], 'nothing left in the pod netns');
  await d!.call('Detach', { sandbox_id: p.id });
  const err = await t.throwsAsync(d!.call('Query', { sandbox_id: p.id }));
  t.is((err as any).code, status.NOT_FOUND);
});

test.serial('detach works when the netns is already gone', async (t) => {
  const p = pod(5);
  await d!.call('Attach', attachReq(p.id, p.path));
  removeNetns(p.ns);
  await d!.call('Detach', { sandbox_id: p.id });
  await eventually(() => !hostLinks().some((l) => l.ifalias?.includes(`sandbox=${p.id};`)), 'host end gone');
  t.pass();
});

test.serial('a netns path that is not a network namespace is refused naming netns_path, and changes nothing', async (t) => {
  const err = await t.throwsAsync(d!.call('Attach', attachReq(`${P}-bad`, '/etc/hostname')));
  t.is((err as any).code, status.INVALID_ARGUMENT);
  t.regex(err!.message, /netns_path/);
  t.false(hostLinks().some((l) => l.ifalias?.includes(`sandbox=${P}-bad;`)));
  t.is((await d!.call('List', {})).sandboxes.filter((s: any) => JSON.stringify(s).includes(`${P}-bad`)).length, 0);
});

test.serial('the host netns is refused', async (t) => {
  const err = await t.throwsAsync(d!.call('Attach', attachReq(`${P}-host`, '/proc/1/ns/net')));
  t.is((err as any).code, status.INVALID_ARGUMENT);
  t.regex(err!.message, /netns_path/);
});

test.serial('an interface name already taken in the pod fails cleanly, leaving no device and no address held', async (t) => {
  const p = pod(6);
  const { execFileSync } = await import('node:child_process');
  execFileSync('ip', ['-n', p.ns, 'link', 'add', 'eth0', 'type', 'bridge']); // the user's, not knit's
  const statusBefore = await d!.call('NodeStatus', {});
  const err = await t.throwsAsync(d!.call('Attach', attachReq(p.id, p.path)));
  t.is((err as any).code, status.ALREADY_EXISTS);
  t.regex(err!.message, /eth0/);
  const statusAfter = await d!.call('NodeStatus', {});
  t.deepEqual(statusAfter.networks[0].pools, statusBefore.networks[0].pools, 'no address held');
  await eventually(() => !hostLinks().some((l) => l.ifalias?.includes(`sandbox=${p.id};`)), 'no host device left');
  t.is(ipJson(['link', 'show', 'dev', 'eth0'], p.ns)[0].linkinfo.info_kind, 'bridge', "the user's eth0 is untouched");
});

test.serial('GarbageCollect removes unlisted sandboxes and leaked tagged devices, never untagged ones', async (t) => {
  const keep = pod(7);
  const drop = pod(8);
  await d!.call('Attach', attachReq(keep.id, keep.path));
  await d!.call('Attach', attachReq(drop.id, drop.path));
  const { execFileSync } = await import('node:child_process');
  const leaked = `${P}leak0`;
  const foreign = `${P}mine0`;
  ids.push(`${P}-lost`);
  execFileSync('ip', ['link', 'add', leaked, 'type', 'bridge']);
  execFileSync('ip', ['link', 'set', leaked, 'alias', `knit-${P}:sandbox=${P}-lost;if=eth0`]);
  execFileSync('ip', ['link', 'add', foreign, 'type', 'bridge']);
  try {
    await d!.call('GarbageCollect', { valid_attachments: [{ sandbox_id: keep.id, interface_name: 'eth0' }] });
    const list = await d!.call('List', {});
    const listed = list.sandboxes.map((s: any) => s.sandbox_id ?? s.request?.sandbox_id);
    t.true(listed.includes(keep.id));
    t.false(listed.includes(drop.id));
    await eventually(() => !hostLinks().some((l) => l.ifname === leaked), 'leaked device removed');
    t.true(hostLinks().some((l) => l.ifname === foreign), 'untagged device untouched');
  } finally {
    execFileSync('ip', ['link', 'del', foreign]);
  }
});

test.serial('a new sandbox can attach into a netns the moment the previous one detached from it', async (t) => {
  const p = pod(9);
  ids.push(`${P}-sb9b`);
  await d!.call('Attach', attachReq(p.id, p.path));
  const hostName = hostLinks().find((l) => l.ifalias?.includes(`sandbox=${p.id};`))!.ifname;
  const isPark = (e: LinkEvent) => e.ifname === hostName && !e.deleted && e.group === String(reapGroup());
  const events = await linkEventsDuring(() => d!.call('Detach', { sandbox_id: p.id }), { again: () => d!.call('Attach', attachReq(p.id, p.path)) });
  // Detach answered once the pair was inert. The kernel's announcement of the park (seen even if
  // the reaper has deleted the pair since): the host end down, in the reap group, under its own
  // name. While the reaper has not deleted it, it is a disabled port of the bridge (ip can see
  // that only while it exists; the reaper takes it off the bridge with the delete).
  const park = events.find(isPark);
  t.truthy(park, events.map((e) => e.line).join('\n'));
  t.false(park!.flags.includes('UP'), park!.line);
  t.false(events.some((e) => e.ifindex === park!.ifindex && e.ifname !== hostName), 'never renamed');
  const host: any = ipJson(['link', 'show']).find((l: any) => l.ifalias?.includes(`sandbox=${p.id};`));
  if (host) t.is(host.linkinfo?.info_slave_data?.state, 'disabled', JSON.stringify(host.linkinfo));
  const podEnd = link(p.ns, 'eth0'); // unless reaped already
  if (podEnd) t.true(podEnd.flags.includes('NO-CARRIER') || !podEnd.flags.includes('LOWER_UP'), JSON.stringify(podEnd.flags));
  t.false(pingFrom(p.ns, '10.231.1.1'), 'no traffic leaves the detached pod');
  // No waiting for the reaper: the next attach takes eth0 from the old pair if it is still there.
  const { result } = await d!.call('Attach', attachReq(`${P}-sb9b`, p.path));
  t.is(result.interfaces.find((i: any) => i.sandbox).name, 'eth0');
  t.true(pingFrom(p.ns, '10.231.1.1'));
  await d!.call('Detach', { sandbox_id: `${P}-sb9b` });
});

test.serial("what detached sandboxes left for the reaper is moved aside by the next attach; devices that are not knit's are not", async (t) => {
  // What detached sandboxes leave until the reaper deletes their pairs: pod ends still named
  // eth0 / net1, tagged by this daemon, eth0 with its address and default route (a link
  // without carrier keeps them). Made by hand here so that no reaper can take them first.
  const p = pod(11);
  const { execFileSync } = await import('node:child_process');
  const ip = (...a: string[]) => execFileSync('ip', ['-n', p.ns, ...a]);
  ip('link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', `${P}x0`);
  ip('link', 'set', 'eth0', 'alias', `knit-${P}:sandbox=${P}-gone;if=eth0`, 'up');
  ip('addr', 'add', '10.231.1.250/24', 'dev', 'eth0');
  ip('route', 'add', 'default', 'via', '10.231.1.1', 'dev', 'eth0', 'onlink');
  ip('link', 'add', 'net1', 'type', 'veth', 'peer', 'name', `${P}x1`);
  ip('link', 'set', 'net1', 'alias', `knit-${P}:sandbox=${P}-gone2;if=net1`);
  ip('link', 'set', `${P}x1`, 'alias', `not-knit:sandbox=${P}-gone2;if=net1`);
  const before = new Map(ipJson(['link', 'show'], p.ns).map((l: any) => [l.ifname, l.ifindex]));

  const { result } = await d!.call('Attach', attachReq(p.id, p.path));
  const links = ipJson(['link', 'show'], p.ns);
  const eth0 = links.find((l: any) => l.ifname === 'eth0');
  t.not(eth0.ifindex, before.get('eth0'), 'eth0 is the new pod end');
  t.is(eth0.address, result.interfaces.find((i: any) => i.sandbox).mac);
  t.true(eth0.ifalias.startsWith(`knit-${P}:sandbox=${p.id};`));
  for (const name of ['eth0', 'net1']) {
    const left = links.find((l: any) => l.ifindex === before.get(name));
    t.is(left.ifname, `kxe${left.ifindex}`, `the old ${name} is renamed out of the way`);
    t.false(left.flags.includes('UP'), `the old ${name} is down`);
    t.is(String(left.group), String(reapGroup()), `the old ${name} is in this daemon's reap group`);
  }
  t.truthy(links.find((l: any) => l.ifname === `${P}x0`), 'an untagged device is left alone');
  t.truthy(links.find((l: any) => l.ifname === `${P}x1`), "a device tagged by someone else is left alone");
  t.deepEqual(ipJson(['route', 'show', 'default'], p.ns).map((r: any) => r.dev), ['eth0']);
  t.true(pingFrom(p.ns, '10.231.1.1'));
  await d!.call('Detach', { sandbox_id: p.id });
});

test.serial("a host end Detach parked under its own name is moved aside by the next attach that wants the name; one that is not parked is not", async (t) => {
  // Detach parks the host end (down, in the reap group) under its own name until
  // the reaper deletes it. The same sandbox attached again before that wants the same name.
  // Made by hand here, once the reaper has finished with what earlier tests parked (it deletes
  // the whole reap group when a detach kicks it, and nothing kicks it during this attach).
  const inReapGroup = () => hostLinks().filter((l) => l.ifalias?.startsWith(`knit-${P}:`) && l.group === String(reapGroup()));
  await eventually(() => inReapGroup().length === 0, 'earlier parked devices reaped');
  const p = pod(12);
  const name = hostIfName(p.id, 'eth0');
  const peer = `${P}h12`;
  t.teardown(() => {
    try { execFileSync('ip', ['link', 'del', peer], { stdio: 'ignore' }); } catch { /* gone with its pair */ }
  });
  execFileSync('ip', ['link', 'add', name, 'type', 'veth', 'peer', 'name', peer]);
  execFileSync('ip', ['link', 'set', name, 'alias', `knit-${P}:sandbox=${p.id};if=eth0`, 'group', String(reapGroup())]);
  const parked = hostLinks().find((l) => l.ifname === name)!;

  const { result } = await d!.call('Attach', attachReq(p.id, p.path));
  const host = hostLinks().find((l) => l.ifname === name)!;
  t.not(host.ifindex, parked.ifindex, 'the name is the new host end');
  t.is(host.master, `${P}br`);
  t.is(host.group, 'default');
  const old = hostLinks().find((l) => l.ifindex === parked.ifindex);
  if (old) t.is(old.ifname, `kxr${parked.ifindex}`, 'the parked one is renamed out of the way (or already reaped)');
  t.is(result.interfaces.find((i: any) => !i.sandbox).name, name);
  t.true(pingFrom(p.ns, '10.231.1.1'));

  // Detach parks it again, under its own name, and answers; then the reaper deletes the pair.
  // Should other tests' link announcements in the host netns overflow the monitor, the pod is
  // attached again and the detach watched again (linkEventsDuring's `again`).
  let hostEnd = host;
  const isPark = (e: LinkEvent) => e.ifindex === hostEnd.ifindex && !e.deleted && e.group === String(reapGroup());
  const events = await linkEventsDuring(() => d!.call('Detach', { sandbox_id: p.id }), {
    again: async () => {
      await d!.call('Attach', attachReq(p.id, p.path));
      hostEnd = hostLinks().find((l) => l.ifname === name)!;
    },
  });
  const park = events.find(isPark);
  t.truthy(park, events.map((e) => e.line).join('\n'));
  t.is(park!.ifname, name, 'parked under its own name');
  t.false(park!.flags.includes('UP'), park!.line);
  await eventually(() => !hostLinks().some((l) => l.ifindex === hostEnd.ifindex), 'the parked host end reaped');

  // Up, or outside the reap group: in use, not parked. The attach is ALREADY_EXISTS and the
  // device is left as it was.
  execFileSync('ip', ['link', 'add', name, 'type', 'veth', 'peer', 'name', peer]);
  execFileSync('ip', ['link', 'set', name, 'alias', `knit-${P}:sandbox=${p.id};if=eth0`, 'up']);
  const taken = await t.throwsAsync(d!.call('Attach', attachReq(p.id, p.path)));
  t.is((taken as any).code, status.ALREADY_EXISTS);
  const kept = hostLinks().find((l) => l.ifname === name)!;
  t.true(kept.flags.includes('UP'), 'left as it was (ip link)');
  t.is(kept.group, 'default');
});

test.serial('a second sandbox in a netns that is already attached is refused naming netns_path; after detach it is free', async (t) => {
  const p = pod(10);
  ids.push(`${P}-sb10b`);
  await d!.call('Attach', attachReq(p.id, p.path));
  const err = await t.throwsAsync(d!.call('Attach', attachReq(`${P}-sb10b`, p.path, { interfaces: [{ name: 'net1' }] })));
  t.is((err as any).code, status.FAILED_PRECONDITION);
  t.regex(err!.message, new RegExp(`netns_path: .* is already attached as sandbox ${p.id}`));
  t.false(hostLinks().some((l) => l.ifalias?.includes(`sandbox=${P}-sb10b;`)), 'the refused attach made nothing');
  await d!.call('Detach', { sandbox_id: p.id });
  await d!.call('Attach', attachReq(`${P}-sb10b`, p.path, { interfaces: [{ name: 'net1' }] }));
  await d!.call('Detach', { sandbox_id: `${P}-sb10b` });
  t.pass();
});
