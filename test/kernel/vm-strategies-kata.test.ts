// Kata plans run for real: each in a throwaway netns with a host bridge of its own, checked
// with `ip -j -d` and `tc -j`, then undone, leaving nothing behind.
import test from 'ava';
import { existsSync, readFileSync } from 'node:fs';
import { kataStrategy } from '../../runtimes/kata/index.js';
import type { Handoff, TapHandoff as VmHandoff } from '../../src/base/handoff.js';
import { addrs, filters, ip, link, qdiscs, routes, type Json } from '../helpers/observe.js';
import { attach, check, detach, envInput, hostLeftovers, makeEnv, sandboxLinks } from './vm-strategies-env.js';

const handoffOf = (plan: { interfaces: { handoff?: Handoff }[] }) => plan.interfaces.find((i) => i.handoff)!.handoff as VmHandoff;
const redirectTarget = (fs: Json[]) => fs.flatMap((f: Json) => f.options?.actions ?? []).filter((a: Json) => a.kind === 'mirred').map((a: Json) => [a.mirred_action, a.direction, a.to_dev]);

test('kata tcfilter: tap0_kata beside the veth, ingress redirects both ways; undo leaves nothing', async (t) => {
  const env = makeEnv(t, 'kvka', 'bridge');
  const input = envInput(env, [{ name: 'eth0', binding: { queues: '2' } }], { runtime: 'kata' });
  const plan = await attach(t, env, kataStrategy, input);
  const ns = env.ns.name;
  t.deepEqual(await check(env, input, plan), { ok: true, differences: [] });
  const host = plan.interfaces[0].name;
  t.is(link(undefined, host)?.master, env.bridge);

  const tap = link(ns, 'tap0_kata');
  t.like(tap?.linkinfo, { info_kind: 'tun', info_data: { type: 'tap', pi: false, vnet_hdr: true, multi_queue: true, persist: true } });
  t.is(tap?.mtu, 1450);
  t.true(tap?.flags.includes('UP'));
  t.true(addrs(ns, 'eth0').some((a: Json) => a.local === env.v4.address), 'the veth keeps its address');
  t.is(link(ns, 'eth0')?.address, handoffOf(plan).mac);
  for (const dev of ['eth0', 'tap0_kata']) t.deepEqual(qdiscs(ns, dev).filter((q: Json) => q.kind === 'ingress').length, 1, dev);
  t.deepEqual(redirectTarget(filters(ns, 'eth0', 'ingress')), [['redirect', 'egress', 'tap0_kata']]);
  t.deepEqual(redirectTarget(filters(ns, 'tap0_kata', 'ingress')), [['redirect', 'egress', 'eth0']]);
  t.true(filters(ns, 'eth0', 'ingress').some((f: Json) => f.kind === 'u32' && f.protocol === 'all'));

  t.deepEqual(await detach(env, plan), []);
  t.deepEqual(sandboxLinks(env), ['lo']);
  t.deepEqual(hostLeftovers(env), []);
});

test('kata macvtap: bridge-mode macvtap with the guest MAC on an address-less veth; undo leaves nothing', async (t) => {
  const env = makeEnv(t, 'kvkm', 'bridge');
  const plan = await attach(t, env, kataStrategy, envInput(env, [{ name: 'eth0', binding: { mode: 'macvtap' } }], { runtime: 'kata', dual: true }));
  const ns = env.ns.name;
  const mv = link(ns, 'tap0_kata');
  t.like(mv?.linkinfo, { info_kind: 'macvtap', info_data: { mode: 'bridge' } });
  t.is(mv?.link, 'eth0');
  t.is(mv?.address, handoffOf(plan).mac);
  t.is(mv?.mtu, 1450);
  t.not(link(ns, 'eth0')?.address, mv?.address);
  t.deepEqual(addrs(ns, 'eth0').filter((a: Json) => a.scope === 'global'), [], 'the guest owns the addresses');
  t.deepEqual(routes(ns, 'default'), []);

  t.deepEqual(await detach(env, plan), []);
  t.deepEqual(sandboxLinks(env), ['lo']);
  t.deepEqual(hostLeftovers(env), []);
});

test('kata host-tap (bridge): a host tap on the bridge and the DAN file; nothing in the netns; undo removes both', async (t) => {
  const env = makeEnv(t, 'kvkh', 'bridge');
  const input = envInput(env, [{ name: 'eth0', binding: { mode: 'host-tap', queues: '2' } }], { runtime: 'kata' });
  const plan = await attach(t, env, kataStrategy, input);
  t.deepEqual(await check(env, input, plan), { ok: true, differences: [] });
  const h = handoffOf(plan);
  const tap = link(undefined, h.name);
  t.like(tap?.linkinfo, { info_kind: 'tun', info_data: { type: 'tap', vnet_hdr: true, multi_queue: true, persist: true } });
  t.is(tap?.master, env.bridge);
  t.is(tap?.mtu, 1450);
  t.is(tap?.ifalias, `knit:sandbox=${env.sandboxId};if=eth0`);
  t.deepEqual(sandboxLinks(env), ['lo']);
  const file = `${env.danDir}/${env.sandboxId}.json`;
  const dan = JSON.parse(readFileSync(file, 'utf8'));
  t.deepEqual(dan.devices[0].device, { type: 'host-tap', tap_name: h.name, queue_num: 2, queue_size: 256 });
  t.deepEqual(dan.devices[0].network_info.interface.ip_addresses, [`${env.v4.address}/24`]);

  t.deepEqual(await detach(env, plan), []);
  t.is(link(undefined, h.name), undefined);
  t.false(existsSync(file));
  t.deepEqual(hostLeftovers(env), []);
});

test('kata host-tap (routed): gateway MAC on the tap, host routes and forwarding on it; undo removes them', async (t) => {
  const env = makeEnv(t, 'kvkr', 'routed');
  const plan = await attach(t, env, kataStrategy, envInput(env, [{ name: 'eth0', binding: { mode: 'host-tap' } }], { runtime: 'kata', dual: true }));
  const name = handoffOf(plan).name;
  t.is(link(undefined, name)?.address, 'ee:ee:ee:ee:ee:ee');
  t.deepEqual(routes(undefined, `${env.v4.address}/32`).map((r: Json) => [r.dev, r.scope]), [[name, 'link']]);
  t.deepEqual(ip(undefined, '-6', 'route', 'show', `${env.v6.address}/128`).map((r: Json) => r.dev), [name]);
  t.is(readFileSync(`/proc/sys/net/ipv4/conf/${name}/forwarding`, 'utf8').trim(), '1');

  t.deepEqual(await detach(env, plan), []);
  t.deepEqual(routes(undefined, `${env.v4.address}/32`), []);
  t.deepEqual(hostLeftovers(env), []);
  t.false(existsSync(`${env.danDir}/${env.sandboxId}.json`));
});
