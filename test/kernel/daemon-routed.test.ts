// Routed mode (no bridge: host routes to each pod, a link-local gateway answered by a fixed
// MAC) and dual-stack bridge mode, against a real daemon and checked with ip and ping.
import test from 'ava';
import { readFileSync } from 'node:fs';
import {
  startDaemon, cleanupDaemon, makeNetns, removeNetns, ipJson, pingFrom, eventually, hostLinks, removeLinkQuietly, type Daemon,
} from '../helpers/daemon.js';

const P = 'krt';
const opts = {
  prefix: P,
  subnet: '10.231.6.0/24',
  subnet6: 'fd6b:6e69:7406::/64',
  mode: 'routed' as const,
  extraNetworks: [{ name: `${P}ds`, mode: 'bridge', bridge: `${P}dbr`, ipv4: { subnet: '10.231.7.0/24' }, ipv6: { subnet: 'fd6b:6e69:7407::/64' } }],
};
let d: Daemon | undefined;
const ns = [0, 1, 2].map((i) => `${P}-pod${i}`);
const ids = [0, 1, 2].map((i) => `${P}-sb${i}`);

let ipForwardBefore = '';
let ipv6ForwardBefore = '';

test.before(async () => {
  ipForwardBefore = readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8');
  ipv6ForwardBefore = readFileSync('/proc/sys/net/ipv6/conf/all/forwarding', 'utf8');
  d = await startDaemon(opts);
  ns.forEach(makeNetns);
});

test.after.always(async () => {
  await cleanupDaemon(d, opts, ids);
  removeLinkQuietly(`${P}dbr`);
  ns.forEach(removeNetns);
});

const attach = (i: number, network?: string) =>
  d!.call('Attach', { sandbox_id: ids[i], netns_path: `/run/netns/${ns[i]}`, runtime: 'RUNC', interfaces: [{ name: 'eth0', ...(network ? { network } : {}) }] });

test.serial('routed: /32 addresses, host routes, a link-local gateway; pods reach each other and the host reaches them', async (t) => {
  const a = (await attach(0)).result;
  const b = (await attach(1)).result;
  const ipA = a.ips[0].address.split('/')[0];
  const ipB = b.ips[0].address.split('/')[0];
  t.is(a.ips[0].address, `${ipA}/32`);
  t.is(a.ips[0].gateway, '169.254.1.1');
  t.false(hostLinks().some((l) => l.ifname === `${P}br`), 'no bridge in routed mode');

  const hostEnd = a.interfaces.find((i: any) => !i.sandbox).name;
  const hostRoute = ipJson(['route', 'show', `${ipA}/32`]);
  t.is(hostRoute[0]?.dev, hostEnd, 'the host routes the pod address to its veth');
  const neigh = ipJson(['neigh', 'show', '169.254.1.1'], ns[0]);
  t.is(neigh[0]?.lladdr, 'ee:ee:ee:ee:ee:ee');
  t.true(neigh[0]?.state.includes('PERMANENT'));
  t.is(readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8'), ipForwardBefore, "the host's global ip_forward is not knit's to change");
  t.is(readFileSync(`/proc/sys/net/ipv4/conf/${hostEnd}/forwarding`, 'utf8').trim(), '1', 'forwarding is on for the pod veth alone');

  t.true(pingFrom(undefined, ipA), 'host → pod');
  t.true(pingFrom(ns[0], ipB), 'pod → pod through the host');
  // IPv6: a /128, forwarded per device (Linux 6.17+), the host's global switch untouched.
  const v6A = a.ips.find((i: any) => i.address.includes(':')).address;
  const v6B = b.ips.find((i: any) => i.address.includes(':')).address.split('/')[0];
  t.regex(v6A, /^fd6b:6e69:7406::[0-9a-f]+\/128$/);
  t.is(readFileSync('/proc/sys/net/ipv6/conf/all/forwarding', 'utf8'), ipv6ForwardBefore, "the host's global IPv6 forwarding is not knit's to change");
  // The host ends' own link-local addresses finish DAD about a second after creation; until
  // then the host cannot resolve the far pod (NDP needs a source).
  t.truthy(await eventually(() => pingFrom(ns[0], v6B), 'pod → pod over IPv6 through the host', 8000));

  for (const i of [0, 1]) await d!.call('Detach', { sandbox_id: ids[i] });
  t.deepEqual(ipJson(['route', 'show', `${ipA}/32`]), [], 'host route removed');
  await eventually(() => !hostLinks().some((l) => ids.some((id) => l.ifalias?.includes(`sandbox=${id};`))), 'host ends reaped');
});

test.serial('dual-stack bridge network: one v4 and one v6 address, both gateways answer', async (t) => {
  const r = (await attach(2, `${P}ds`)).result;
  const v4 = r.ips.find((i: any) => i.family === 4 || /\./.test(i.address));
  const v6 = r.ips.find((i: any) => /:/.test(i.address));
  t.regex(v4.address, /^10\.231\.7\.\d+\/24$/);
  t.regex(v6.address, /^fd6b:6e69:7407::[0-9a-f]+\/64$/);
  const addrs = ipJson(['addr', 'show', 'dev', 'eth0'], ns[2])[0].addr_info.map((a: any) => `${a.local}/${a.prefixlen}`);
  t.true(addrs.includes(v4.address) && addrs.includes(v6.address), addrs.join(' '));
  t.true(pingFrom(ns[2], v4.gateway), 'v4 gateway');
  t.true(pingFrom(ns[2], v6.gateway), 'v6 gateway');
  await d!.call('Detach', { sandbox_id: ids[2] });
});
