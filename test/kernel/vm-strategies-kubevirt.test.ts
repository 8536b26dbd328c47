// KubeVirt plans run for real: each in a throwaway netns with a host bridge of its own,
// checked with `ip -j -d`, `tc -j` and `nft`, then undone, leaving nothing behind.
import test from 'ava';
import { readFileSync } from 'node:fs';
import { kubevirtStrategy } from '../../runtimes/kubevirt/index.js';
import type { Handoff, TapHandoff as VmHandoff } from '../../src/base/handoff.js';
import { addrs, filters, link, neighs, sysctl, tunOwner, type Json } from '../helpers/observe.js';
import { attach, check, detach, envInput, hostLeftovers, makeEnv, nftChain, nftTables, sandboxLinks } from './vm-strategies-env.js';

const handoffOf = (plan: { interfaces: { handoff?: Handoff }[] }) => plan.interfaces.find((i) => i.handoff)!.handoff as VmHandoff;
const localAddrs = (ns: string, dev: string) => addrs(ns, dev).filter((a: Json) => a.scope !== 'link').map((a: Json) => `${a.local}/${a.prefixlen}`);

test('kubevirt masquerade (dual-stack): k6t-eth0 gateway, tap0 for uid 107, forwarding, nat tables; undo leaves nothing', async (t) => {
  const env = makeEnv(t, 'kvvm', 'bridge');
  const input = envInput(env, [{ name: 'eth0', binding: { ports: 'tcp:80' } }], { runtime: 'kubevirt', dual: true });
  const plan = await attach(t, env, kubevirtStrategy, input);
  t.deepEqual(await check(env, input, plan), { ok: true, differences: [] });
  const ns = env.ns.name;
  const br = link(ns, 'k6t-eth0');
  t.is(br?.linkinfo?.info_kind, 'bridge');
  t.is(br?.address, '02:00:00:00:00:00');
  t.is(br?.mtu, 1450);
  t.deepEqual(localAddrs(ns, 'k6t-eth0').sort(), ['10.0.2.1/24', 'fd10:0:2::1/120']);
  const tap = link(ns, 'tap0');
  t.like(tap?.linkinfo, { info_kind: 'tun', info_data: { type: 'tap', vnet_hdr: true, multi_queue: false, persist: true } });
  t.deepEqual(tunOwner(ns, 'tap0'), { user: 107, group: 107 });
  t.is(tap?.master, 'k6t-eth0');
  t.is(tap?.mtu, 1450);
  t.deepEqual(localAddrs(ns, 'eth0').sort(), [`${env.v4.address}/24`, `${env.v6.address}/64`], 'the pod keeps its addresses');
  t.is(sysctl(ns, 'net.ipv4.ip_forward'), '1');
  t.is(sysctl(ns, 'net.ipv6.conf.all.forwarding'), '1');
  t.is(sysctl(ns, 'net.ipv4.conf.k6t-eth0.route_localnet'), '1');

  t.deepEqual(
    nftTables(env).map((x: Json) => `${x.family} ${x.name}`).sort(),
    ['ip nat', 'ip6 nat'],
    'the runner must run nft(8) itself: under npm/npx, PATH finds node_modules/.bin/nft (@vercel/nft) first',
  );
  t.deepEqual(nftChain(env, 'ip', 'nat', 'KUBEVIRT_PREINBOUND'), ['tcp dport 80 counter dnat to 10.0.2.2']);
  t.deepEqual(nftChain(env, 'ip', 'nat', 'postrouting'), ['ip saddr 10.0.2.2 counter masquerade', 'oifname "k6t-eth0" counter jump KUBEVIRT_POSTINBOUND']);
  t.deepEqual(nftChain(env, 'ip', 'nat', 'prerouting'), ['iifname "eth0" counter jump KUBEVIRT_PREINBOUND']);
  t.deepEqual(nftChain(env, 'ip6', 'nat', 'KUBEVIRT_PREINBOUND'), ['tcp dport 80 counter dnat to fd10:0:2::2']);

  t.deepEqual(await detach(env, plan), []);
  t.deepEqual(nftTables(env), []);
  t.deepEqual(sandboxLinks(env), ['lo']);
  t.deepEqual(hostLeftovers(env), []);
});

test('kubevirt tap binding: multi-queue tap0 cross-connected to eth0 by redirects; undo leaves nothing', async (t) => {
  const env = makeEnv(t, 'kvvt', 'bridge');
  const input = envInput(env, [{ name: 'eth0', binding: { binding: 'tap', queues: '2' } }], { runtime: 'kubevirt' });
  const plan = await attach(t, env, kubevirtStrategy, input);
  t.deepEqual(await check(env, input, plan), { ok: true, differences: [] });
  const ns = env.ns.name;
  t.like(link(ns, 'tap0')?.linkinfo, { info_kind: 'tun', info_data: { multi_queue: true } });
  t.deepEqual(tunOwner(ns, 'tap0'), { user: 107, group: 107 });
  t.is(handoffOf(plan).flags, 'IFF_TAP|IFF_NO_PI|IFF_VNET_HDR|IFF_MULTI_QUEUE');
  const redirect = (dev: string) => filters(ns, dev, 'ingress').flatMap((f: Json) => f.options?.actions ?? []).map((a: Json) => a.to_dev);
  t.deepEqual(redirect('eth0'), ['tap0']);
  t.deepEqual(redirect('tap0'), ['eth0']);
  t.deepEqual(nftTables(env), []);

  t.deepEqual(await detach(env, plan), []);
  t.deepEqual(sandboxLinks(env), ['lo']);
  t.deepEqual(hostLeftovers(env), []);
});

test('kubevirt bridge binding (routed): eth0-nic and tap0 on k6t-eth0, no pod IP in the netns, 169.254.1.1 and proxy NDP on the host end; undo leaves nothing', async (t) => {
  const env = makeEnv(t, 'kvvb', 'routed');
  const plan = await attach(t, env, kubevirtStrategy, envInput(env, [{ name: 'eth0', binding: { binding: 'bridge' } }], { runtime: 'kubevirt', dual: true }));
  const ns = env.ns.name;
  const host = plan.interfaces[0].name;
  t.is(link(ns, 'eth0-nic')?.master, 'k6t-eth0');
  t.false(link(ns, 'eth0-nic')?.linkinfo?.info_slave_data?.learning, 'ip -d link: the pod NIC\'s port learns no MAC (KubeVirt\'s LinkSetLearningOff)');
  t.is(link(ns, 'tap0')?.master, 'k6t-eth0');
  t.is(link(ns, 'k6t-eth0')?.address, link(ns, 'eth0-nic')?.address);
  t.is(link(ns, 'eth0'), undefined, 'no dummy eth0 (this kernel has none); the record keeps the pod IP');
  t.deepEqual(addrs(ns, 'eth0-nic'), [], 'no addresses, not even link-local (IPv6 off)');
  t.is(sysctl(ns, 'net.ipv6.conf.eth0-nic.disable_ipv6'), '1');
  t.deepEqual(localAddrs(ns, 'k6t-eth0'), ['169.254.75.10/32']);
  t.is(sysctl(ns, 'net.ipv4.conf.k6t-eth0.arp_ignore'), '1');
  const proc = (key: string) => readFileSync(`/proc/sys/${key.replaceAll('.', '/')}`, 'utf8').trim();
  t.deepEqual(addrs(undefined, host).filter((a: Json) => a.family === 'inet').map((a: Json) => `${a.local}/${a.prefixlen} ${a.scope}`), ['169.254.1.1/32 host']);
  t.is(proc(`net.ipv6.conf.${host}.proxy_ndp`), '1');
  t.true(neighs(undefined, 'proxy', 'dev', host).some((n: Json) => n.dst === 'fe80::1'));
  const h = handoffOf(plan);
  t.deepEqual(h.guest.ips.map((ip) => ip.address), [`${env.v4.address}/32`, `${env.v6.address}/128`]);

  t.deepEqual(await detach(env, plan), []);
  t.deepEqual(sandboxLinks(env), ['lo']);
  t.deepEqual(hostLeftovers(env), []);
});
