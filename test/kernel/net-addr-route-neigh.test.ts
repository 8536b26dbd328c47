// Addresses, routes and neighbours through the netlink handle, checked with `ip -j -d`.
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { NetHandle } from '../../src/net/handle.js';
import { listAddrs, listNeighs, listRoutes } from '../helpers/net-calls.js';
import { addrs, neighs, routes } from '../helpers/observe.js';
import { makeNetns, uniquePrefix } from '../helpers/names.js';

async function netnsWithVeth(t: ExecutionContext, tag: string) {
  const p = uniquePrefix(tag);
  const ns = makeNetns(t, p, 'a');
  const h = NetHandle.open(ns.path);
  t.teardown(() => h.close());
  const dev = `${p}v0`;
  await h.run([
    { op: 'link.add', kind: 'veth', name: dev, up: true, peer: { name: `${p}v1` } },
    { op: 'link.set', link: `${p}v1`, up: true },
  ]);
  return { p, ns, h, dev };
}

test('addr.add/del/list: v4 and v6, prefix, peer, scope, nodad, noprefixroute', async (t) => {
  const { ns, h, dev } = await netnsWithVeth(t, 'knaa');
  await h.run([
    { op: 'addr.add', link: dev, address: '10.40.0.2/24' },
    { op: 'addr.add', link: dev, address: '10.41.0.1/32', peer: '10.41.0.9', scope: 'link' },
    { op: 'addr.add', link: dev, address: 'fd40::2/64', noDad: true },
    { op: 'addr.add', link: dev, address: 'fd41::2/64', noDad: true, noPrefixRoute: true },
  ]);
  const seen = addrs(ns.name, dev);
  const v4 = seen.find((a: any) => a.local === '10.40.0.2');
  t.like(v4, { family: 'inet', prefixlen: 24, scope: 'global', broadcast: '10.40.0.255' });
  t.like(seen.find((a: any) => a.local === '10.41.0.1'), { address: '10.41.0.9', prefixlen: 32, scope: 'link' });
  const v6 = seen.find((a: any) => a.local === 'fd40::2');
  t.like(v6, { family: 'inet6', prefixlen: 64 });
  t.true(v6.nodad);
  t.true(seen.find((a: any) => a.local === 'fd41::2').noprefixroute);
  t.falsy(v6.tentative, 'nodad: usable at once');
  // noprefixroute: no fd41::/64 route appears.
  t.false(routes(ns.name, '-6').some((r: any) => r.dst === 'fd41::/64'));
  t.true(routes(ns.name, '-6').some((r: any) => r.dst === 'fd40::/64'));

  const viaKnit = await listAddrs(h, dev);
  t.like(viaKnit.find((a) => a.address === '10.41.0.1'), { family: 4, prefixLen: 32, peer: '10.41.0.9', scope: 'link' });
  t.deepEqual(viaKnit.find((a) => a.address === 'fd41::2')?.flags.filter((f) => f !== 'permanent').sort(), ['nodad', 'noprefixroute']);
  t.deepEqual((await listAddrs(h, dev, 6)).map((a) => a.family).filter((f) => f !== 6), []);

  const del = await h.run([
    { op: 'addr.del', link: dev, address: '10.40.0.2/24' },
    { op: 'addr.del', link: dev, address: 'fd40::2/64' },
    { op: 'addr.del', link: dev, address: '10.40.0.2/24', ignoreMissing: true },
    { op: 'addr.del', link: `${dev}x`, address: '10.40.0.2/24', ignoreMissing: true },
  ]);
  t.deepEqual(del.slice(2), [{ skipped: true }, { skipped: true }]);
  const left = addrs(ns.name, dev).map((a: any) => a.local);
  t.false(left.includes('10.40.0.2'));
  t.false(left.includes('fd40::2'));
});

test('route.add/replace/del/list: table, metric, scope, gateway, onlink, dev, mtu, src, default v4 and v6', async (t) => {
  const { ns, h, dev } = await netnsWithVeth(t, 'knab');
  await h.run([
    { op: 'addr.add', link: dev, address: '10.50.0.2/24' },
    { op: 'addr.add', link: dev, address: 'fd50::2/64', noDad: true },
    { op: 'route.add', dst: 'default', gateway: '10.50.0.1', link: dev, mtu: 1400 },
    { op: 'route.add', dst: 'default', family: 6, gateway: 'fd50::1', link: dev },
    { op: 'route.add', dst: '10.60.0.0/16', gateway: '10.50.0.1', metric: 50, src: '10.50.0.2' },
    { op: 'route.add', dst: '10.61.0.0/24', link: dev, table: 1000, scope: 'link' },
    { op: 'route.add', dst: '10.62.0.0/24', gateway: '192.0.2.1', link: dev, onlink: true },
  ]);
  const v4 = routes(ns.name);
  t.like(v4.find((r: any) => r.dst === 'default'), { gateway: '10.50.0.1', dev, metrics: [{ mtu: 1400 }] });
  t.like(v4.find((r: any) => r.dst === '10.60.0.0/16'), { gateway: '10.50.0.1', metric: 50, prefsrc: '10.50.0.2' });
  t.deepEqual(v4.find((r: any) => r.dst === '10.62.0.0/24').flags, ['onlink']);
  t.like(routes(ns.name, 'table', '1000')[0], { dst: '10.61.0.0/24', dev, scope: 'link' });
  t.like(routes(ns.name, '-6').find((r: any) => r.dst === 'default'), { gateway: 'fd50::1', dev });

  const viaKnit = await listRoutes(h, { family: 4 });
  t.like(viaKnit.find((r) => r.dst === 'default'), { gateway: '10.50.0.1', mtu: 1400, table: 254, protocol: 'boot' });
  t.like(viaKnit.find((r) => r.dst === '10.60.0.0/16'), { metric: 50, src: '10.50.0.2' });
  t.true(viaKnit.find((r) => r.dst === '10.62.0.0/24')?.onlink);
  t.deepEqual((await listRoutes(h, { table: 1000 })).map((r) => r.dst), ['10.61.0.0/24']);

  await h.run([{ op: 'route.replace', dst: '10.60.0.0/16', gateway: '10.50.0.3', metric: 50 }]);
  t.is(routes(ns.name).find((r: any) => r.dst === '10.60.0.0/16').gateway, '10.50.0.3');
  const del = await h.run([
    { op: 'route.del', dst: '10.60.0.0/16', metric: 50 },
    { op: 'route.del', dst: '10.61.0.0/24', table: 1000 },
    { op: 'route.del', dst: 'default', family: 6 },
    { op: 'route.del', dst: '10.60.0.0/16', metric: 50, ignoreMissing: true },
  ]);
  t.deepEqual(del[3], { skipped: true });
  t.false(routes(ns.name).some((r: any) => r.dst === '10.60.0.0/16'));
  t.deepEqual(routes(ns.name, 'table', '1000'), []);
  t.false(routes(ns.name, '-6').some((r: any) => r.dst === 'default'));
  const err = await t.throwsAsync(h.run([{ op: 'route.del', dst: '10.60.0.0/16', metric: 50 }]));
  t.regex(err!.message, /^ESRCH deleting route 10\.60\.0\.0\/16: no such route in netns /);
});

test('neigh.add/del/list: permanent entries and NTF_PROXY entries', async (t) => {
  const { ns, h, dev } = await netnsWithVeth(t, 'knac');
  await h.run([
    { op: 'neigh.add', link: dev, address: '10.70.0.5', lladdr: '02:cc:00:00:00:05' },
    { op: 'neigh.add', link: dev, address: 'fd70::5', lladdr: '02:cc:00:00:00:06' },
    { op: 'neigh.add', link: dev, address: '10.70.0.6', proxy: true },
  ]);
  t.like(neighs(ns.name, 'dev', dev).find((n: any) => n.dst === '10.70.0.5'), { lladdr: '02:cc:00:00:00:05', state: ['PERMANENT'] });
  t.like(neighs(ns.name, '-6', 'dev', dev).find((n: any) => n.dst === 'fd70::5'), { lladdr: '02:cc:00:00:00:06', state: ['PERMANENT'] });
  t.truthy(neighs(ns.name, 'proxy', 'dev', dev).find((n: any) => n.dst === '10.70.0.6'));

  const viaKnit = await listNeighs(h, dev);
  t.like(viaKnit.find((n) => n.address === '10.70.0.5'), { family: 4, lladdr: '02:cc:00:00:00:05', state: ['permanent'], proxy: false });
  t.like(viaKnit.find((n) => n.address === '10.70.0.6'), { proxy: true });
  t.like(viaKnit.find((n) => n.address === 'fd70::5'), { family: 6 });

  const del = await h.run([
    { op: 'neigh.del', link: dev, address: '10.70.0.5' },
    { op: 'neigh.del', link: dev, address: '10.70.0.6', proxy: true },
    { op: 'neigh.del', link: dev, address: '10.70.0.5', ignoreMissing: true },
  ]);
  t.deepEqual(del[2], { skipped: true });
  t.false(neighs(ns.name, 'dev', dev).some((n: any) => n.dst === '10.70.0.5'));
  t.false(neighs(ns.name, 'proxy', 'dev', dev).some((n: any) => n.dst === '10.70.0.6'));
});
