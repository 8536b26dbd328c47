// Links through the netlink handle, in throwaway netns, checked with `ip -j -d link`.
import test from 'ava';
import { NetHandle } from '../../src/net/handle.js';
import { getLink, findLink, listLinks } from '../helpers/net-calls.js';
import { link, linkNames } from '../helpers/observe.js';
import { makeNetns, uniquePrefix } from '../helpers/names.js';
import { linkEventsDuring, type LinkEvent } from '../helpers/link-monitor.js';

function open(t: import('ava').ExecutionContext, path: string): NetHandle {
  const h = NetHandle.open(path);
  t.teardown(() => h.close());
  return h;
}

test('link.add veth makes the peer straight in another netns with name, MAC, MTU and alias', async (t) => {
  const p = uniquePrefix('knla');
  const a = makeNetns(t, p, 'a');
  const b = makeNetns(t, p, 'b');
  const h = open(t, a.path);
  let r: any;
  const hostUp = (e: LinkEvent) => e.ifname === `${p}h` && e.flags.includes('UP');
  const events = await linkEventsDuring(async () => {
    [r] = await h.run([
      {
        op: 'link.add', kind: 'veth', name: `${p}h`, mtu: 1450, mac: '02:aa:00:00:00:01', alias: 'knit:test-host', up: true,
        peer: { name: `${p}p`, netns: b.path, mac: '02:aa:00:00:00:02', mtu: 1450, alias: 'knit:test-peer' },
      },
    ]);
  }, { ns: a.name });
  // Made down, its alias set, then up: the kernel announces (and IPv6 walks the netns's whole
  // routing table for) a change of a device only while it is up, so the alias adds no
  // announcement. Created up and aliased after, it would be announced up twice.
  const ofHost = events.filter((e) => e.ifname === `${p}h`);
  t.false(ofHost[0]?.flags.includes('UP'), events.map((e) => e.line).join('\n'));
  t.is(ofHost.filter(hostUp).length, 1, events.map((e) => e.line).join('\n'));
  const host = link(a.name, `${p}h`);
  const peer = link(b.name, `${p}p`);
  t.is(r.index, host.ifindex);
  t.is(host.linkinfo.info_kind, 'veth');
  t.is(host.mtu, 1450);
  t.is(host.address, '02:aa:00:00:00:01');
  t.is(host.ifalias, 'knit:test-host');
  t.true(host.flags.includes('UP'));
  t.is(peer.linkinfo.info_kind, 'veth');
  t.is(peer.mtu, 1450);
  t.is(peer.address, '02:aa:00:00:00:02');
  t.is(peer.ifalias, 'knit:test-peer');
  t.deepEqual(linkNames(a.name).sort(), ['lo', `${p}h`].sort(), 'the peer is not in the first netns');

  const viaKnit = await getLink(h, `${p}h`);
  t.like(viaKnit, { index: host.ifindex, name: `${p}h`, kind: 'veth', mtu: 1450, mac: '02:aa:00:00:00:01', alias: 'knit:test-host', up: true });
  t.is(viaKnit.parentIndex, peer.ifindex, 'IFLA_LINK is the peer ifindex in its netns');
  t.is(typeof viaKnit.linkNetnsId, 'number');
  t.deepEqual(await getLink(h, host.ifindex), viaKnit, 'by index and by name agree');
});

test('link.add bridge, macvlan, macvtap and vxlan with their kind options', async (t) => {
  const p = uniquePrefix('knlb');
  const a = makeNetns(t, p, 'a');
  const h = open(t, a.path);
  const res = await h.run([
    { op: 'link.add', kind: 'bridge', name: `${p}br`, stpOff: true, mtu: 1400 },
    { op: 'link.add', kind: 'veth', name: `${p}v0`, peer: { name: `${p}v1` } },
    { op: 'link.add', kind: 'macvlan', name: `${p}mv`, parent: `${p}v0`, mode: 'bridge' },
    { op: 'link.add', kind: 'macvtap', name: `${p}mt`, parent: `${p}v1`, mode: 'private' },
    { op: 'link.add', kind: 'vxlan', name: `${p}vx`, vni: 4242, local: '10.31.0.1', remote: '10.31.0.2', dev: `${p}v0`, learning: false },
  ]);
  t.is(res.length, 5);
  const br = link(a.name, `${p}br`);
  t.is(br.linkinfo.info_kind, 'bridge');
  t.is(br.linkinfo.info_data.stp_state, 0);
  t.is(br.mtu, 1400);
  const mv = link(a.name, `${p}mv`);
  t.is(mv.linkinfo.info_kind, 'macvlan');
  t.is(mv.linkinfo.info_data.mode, 'bridge');
  t.is(mv.link, `${p}v0`);
  const mt = link(a.name, `${p}mt`);
  t.is(mt.linkinfo.info_kind, 'macvtap');
  t.is(mt.linkinfo.info_data.mode, 'private');
  t.is(mt.link, `${p}v1`);
  const vx = link(a.name, `${p}vx`);
  t.is(vx.linkinfo.info_kind, 'vxlan');
  t.like(vx.linkinfo.info_data, { id: 4242, port: 4789, local: '10.31.0.1', remote: '10.31.0.2', link: `${p}v0`, learning: false });
  t.is(res[4].index, vx.ifindex);

  const kinds = (await listLinks(h, 'macvtap')).map((l) => l.name);
  t.deepEqual(kinds, [`${p}mt`]);
  const all = (await listLinks(h)).map((l) => l.name).sort();
  t.deepEqual(all, linkNames(a.name).sort());
});

test('link.set: up/down, mtu, mac, rename, master/nomaster, alias set and clear, group, txqlen, hairpin', async (t) => {
  const p = uniquePrefix('knlc');
  const a = makeNetns(t, p, 'a');
  const h = open(t, a.path);
  await h.run([
    { op: 'link.add', kind: 'bridge', name: `${p}br`, up: true },
    { op: 'link.add', kind: 'veth', name: `${p}v0`, peer: { name: `${p}v1` } },
  ]);
  await h.run([
    { op: 'link.set', link: `${p}v0`, mtu: 1300, mac: '02:bb:00:00:00:01', txqlen: 500, group: 7, alias: 'knit:x' },
    { op: 'link.set', link: `${p}v0`, name: `${p}r0` },
    { op: 'link.set', link: `${p}r0`, master: `${p}br`, up: true, hairpin: true },
  ]);
  let v = link(a.name, `${p}r0`);
  t.truthy(v, 'renamed');
  t.is(link(a.name, `${p}v0`), undefined);
  t.like(v, { mtu: 1300, address: '02:bb:00:00:00:01', txqlen: 500, ifalias: 'knit:x', master: `${p}br` });
  t.is(String(v.group), '7');
  t.true(v.flags.includes('UP'));
  t.is(v.linkinfo.info_slave_kind, 'bridge');
  t.is(v.linkinfo.info_slave_data.hairpin, true);

  await h.run([
    { op: 'link.set', link: `${p}r0`, hairpin: false },
    { op: 'link.set', link: `${p}r0`, master: null, up: false, alias: '' },
  ]);
  v = link(a.name, `${p}r0`);
  t.is(v.master, undefined);
  t.false(v.flags.includes('UP'));
  t.is(v.ifalias, undefined, 'alias cleared');
  const info = await getLink(h, `${p}r0`);
  t.is(info.master, undefined);
  t.is(info.group, 7);
  t.is(info.txqlen, 500);
});

test('link.set netns moves a link into another netns, renamed in the same request', async (t) => {
  const p = uniquePrefix('knld');
  const a = makeNetns(t, p, 'a');
  const b = makeNetns(t, p, 'b');
  const h = open(t, a.path);
  await h.run([{ op: 'link.add', kind: 'veth', name: `${p}v0`, peer: { name: `${p}v1` } }]);
  await h.run([{ op: 'link.set', link: `${p}v1`, netns: b.path, name: 'eth0' }]);
  t.is(link(a.name, `${p}v1`), undefined);
  t.truthy(link(b.name, 'eth0'));
  t.is(link(b.name, 'eth0').linkinfo.info_kind, 'veth');
  const hb = open(t, b.path);
  t.is((await getLink(hb, 'eth0')).parentIndex, link(a.name, `${p}v0`).ifindex);
});

test('link.del by name and by index, ignoreMissing, and link.delGroup deletes a group in one request', async (t) => {
  const p = uniquePrefix('knle');
  const a = makeNetns(t, p, 'a');
  const h = open(t, a.path);
  const made = await h.run([
    { op: 'link.add', kind: 'bridge', name: `${p}b0` },
    { op: 'link.add', kind: 'bridge', name: `${p}b1` },
    ...[0, 1, 2].map((i) => ({ op: 'link.add' as const, kind: 'veth' as const, name: `${p}g${i}`, group: 77, peer: { name: `${p}q${i}` } })),
  ]);
  const res = await h.run([
    { op: 'link.del', link: `${p}b0` },
    { op: 'link.del', link: made[1].index! },
    { op: 'link.del', link: `${p}b0`, ignoreMissing: true },
    { op: 'link.del', link: 9999, ignoreMissing: true },
  ]);
  t.deepEqual(res.slice(2), [{ skipped: true }, { skipped: true }]);
  t.is(link(a.name, `${p}b0`), undefined);
  t.is(link(a.name, `${p}b1`), undefined);

  // Deleting one end of a veth takes its peer; the group holds the three host ends.
  const bytes = h.encode({ op: 'link.delGroup', group: 77 });
  t.is(bytes.readUInt16LE(4), 17, 'one RTM_DELLINK');
  t.is(bytes.readInt32LE(16 + 4), 0, 'ifindex 0: the group attribute selects');
  await h.run([{ op: 'link.delGroup', group: 77 }]);
  t.deepEqual(linkNames(a.name), ['lo']);
  t.is(await findLink(h, `${p}g0`), undefined);
});

test('link.get asks for one link (no dump) by name or index', (t) => {
  const p = uniquePrefix('knlf');
  const a = makeNetns(t, p, 'a');
  const h = open(t, a.path);
  const byName = h.encode({ op: 'link.get', link: 'lo' });
  const byIndex = h.encode({ op: 'link.get', link: 1 });
  for (const b of [byName, byIndex]) {
    t.is(b.readUInt16LE(4), 18, 'RTM_GETLINK');
    t.is(b.readUInt16LE(6) & 0x300, 0, 'no NLM_F_DUMP');
  }
  t.true(byName.includes(Buffer.from('lo\0')), 'IFLA_IFNAME carries the name');
  t.is(byIndex.readInt32LE(16 + 4), 1);
  const [r] = h.runSync([{ op: 'link.get', link: 'lo' }]);
  t.like(r.link, { index: 1, name: 'lo', mtu: 65536 });
});
