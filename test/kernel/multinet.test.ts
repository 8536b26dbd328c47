// Several networks per pod, every pair of network kinds (bridge, routed, device — a simulated
// VF: a veth end stands in for its netdev, device-standin.ts): the default route comes from one
// interface only, each other network is reached through its own interface, and the result
// lists every interface with its addresses. Traffic to a peer on each network proves it.
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { toStruct, fromStruct } from '../../src/api/struct.js';
import {
  startDaemon, cleanupDaemon, ipJson, pingFrom, eventually, hostLinks, removeLinkQuietly, podFactory, type Daemon, type DaemonOptions,
} from '../helpers/daemon.js';
import { makeStandIn, type StandIn } from './device-standin.js';

const P = 'mnet';
const pods = podFactory(P);
let d: Daemon | undefined;
let s: StandIn;
let o: DaemonOptions;
const teardowns: (() => unknown)[] = [];

type Kind = 'bridge' | 'routed' | 'device';
/** Two networks of each kind, so a pod can sit on two of the same kind. */
const NETS: Record<string, { kind: Kind; subnet: string; peer?: string }> = {
  b1: { kind: 'bridge', subnet: '10.174.10.0/24' },
  b2: { kind: 'bridge', subnet: '10.174.11.0/24' },
  r1: { kind: 'routed', subnet: '10.174.12.0/24' },
  r2: { kind: 'routed', subnet: '10.174.13.0/24' },
  d1: { kind: 'device', subnet: '10.174.14.0/24', peer: '10.174.14.1' },
  d2: { kind: 'device', subnet: '10.174.15.0/24', peer: '10.174.15.1' },
};
const pool = (n: string) => ({ name: `${P}${n}`, mode: NETS[n].kind, ...(NETS[n].kind === 'bridge' ? { bridge: `${P}${n}br` } : {}), ipv4: { subnet: NETS[n].subnet }, dns: { nameservers: [`${NETS[n].subnet.slice(0, -4)}53`], search: [`${n}.example`] } });

test.before(async () => {
  s = await makeStandIn({ teardown: (fn: () => unknown) => void teardowns.push(fn) } as never, P, 2);
  s.vfs.forEach((vf, i) => execFileSync('ip', ['-n', s.fabric, 'addr', 'add', `${NETS[`d${i + 1}`].peer}/24`, 'dev', vf.peer]));
  o = {
    prefix: P, subnet: '10.174.16.0/24',
    extraNetworks: ['b1', 'b2', 'r1', 'r2'].map(pool),
    config: { sysfsRoot: s.node.root },
  };
  d = await startDaemon(o);
  // One peer pod on each knit network, to ping.
  for (const [i, n] of ['b1', 'b2', 'r1', 'r2'].entries()) {
    const p = pods.pod(100 + i);
    const { result } = await d.call('Attach', { sandbox_id: p.id, netns_path: p.path, interfaces: [{ name: 'eth0', network: `${P}${n}` }] });
    NETS[n].peer = result.ips[0].address.split('/')[0];
  }
});

test.after.always(async () => {
  await cleanupDaemon(d, o, pods.ids);
  for (const n of ['b1', 'b2']) removeLinkQuietly(`${P}${n}br`);
  pods.removeAll();
  for (const fn of teardowns.reverse()) await fn();
});

/** An interface on network n; a device takes VF 1 or 2 with its own address (and, as the
 * default interface, a default route through its fabric). */
function iface(name: string, n: string, isDefault: boolean, mark = false) {
  if (NETS[n].kind !== 'device') return { name, network: `${P}${n}`, ...(mark ? { default_route: true } : {}) };
  const i = Number(n[1]) - 1;
  const address = `${NETS[n].subnet.slice(0, -4)}10/24`;
  const parameters = { addresses: [address], routes: isDefault ? [{ dst: 'default', gw: NETS[n].peer }] : [] };
  return { name, device: { bdf: s.vfs[i].bdf, parameters: toStruct(parameters) }, ...(mark ? { default_route: true } : {}) };
}

const addressOf = (r: any, name: string) => {
  const i = r.interfaces.findIndex((x: any) => x.sandbox && x.name === name);
  return r.ips.filter((ip: any) => ip.interface === i).map((ip: any) => ip.address);
};

async function twoNetworks(t: any, first: string, second: string, markSecond = false) {
  const p = pods.pod(pods.ids.length);
  const dflt = markSecond ? 'net1' : 'eth0';
  const interfaces = [iface('eth0', first, !markSecond), iface('net1', second, markSecond, markSecond)];
  const { result } = await d!.call('Attach', { sandbox_id: p.id, netns_path: p.path, interfaces });

  // The answer lists both interfaces with their addresses.
  for (const [name, n] of [['eth0', first], ['net1', second]]) {
    const got = addressOf(result, name);
    t.is(got.length, 1, `${name} has one address: ${JSON.stringify(result.ips)}`);
    t.true(got[0].startsWith(NETS[n].subnet.slice(0, -4)), `${name} is on ${n}: ${got[0]}`);
  }
  // The kernel: one default route, on the default interface.
  const defaults = ipJson(['route', 'show', 'default'], p.ns);
  t.deepEqual(defaults.map((r: any) => r.dev), [dflt], `one default route, via ${dflt}`);
  t.is(result.routes.filter((r: any) => r.dst === '0.0.0.0/0').length, 1, 'one default route in the answer');
  // Each network is reached through its own interface.
  for (const [name, n] of [['eth0', first], ['net1', second]]) {
    t.is(ipJson(['route', 'get', NETS[n].peer!], p.ns)[0].dev, name, `${n}'s peer is routed out of ${name}`);
    t.true(pingFrom(p.ns, NETS[n].peer!), `${first}+${second}: ping ${n}'s peer through ${name}`);
  }
  // DNS: the networks' resolvers, the default network's first (devices have none).
  const knit = [first, second].filter((n) => NETS[n].kind !== 'device');
  const ordered = markSecond ? knit.reverse() : knit;
  t.deepEqual(result.dns?.nameservers ?? [], ordered.map((n) => `${NETS[n].subnet.slice(0, -4)}53`));
  const check = await d!.call('Check', { sandbox_id: p.id });
  t.true(check.ok, check.differences.join('; '));

  await d!.call('Detach', { sandbox_id: p.id });
  await eventually(() => !hostLinks().some((l) => l.ifalias?.includes(`sandbox=${p.id};`)), `${p.id} reaped`);
  await eventually(() => ipJson(['link', 'show'], p.ns).length === 1, `${p.ns} holds only lo`);
  t.deepEqual(ipJson(['link', 'show'], p.ns).map((l: any) => l.ifname), ['lo']);
}

const pairs: [string, string][] = [
  ['b1', 'b2'], ['r1', 'r2'], ['d1', 'd2'],
  ['b1', 'r2'], ['r1', 'b2'],
  ['b1', 'd2'], ['d1', 'b2'],
  ['r1', 'd2'], ['d1', 'r2'],
];
for (const [a, b] of pairs) {
  const label = (n: string) => `${NETS[n].kind}${NETS[n].kind === 'device' ? ' (simulated VF)' : ''}`;
  test.serial(`two networks, ${label(a)} then ${label(b)}: default route from eth0 only, both peers answer`, (t) => twoNetworks(t, a, b));
}

test.serial('default_route on the second interface moves the default route there (bridge + routed)', (t) => twoNetworks(t, 'b1', 'r2', true));

test.serial('two interfaces marked default_route are INVALID_ARGUMENT naming the second', async (t) => {
  const p = pods.pod(pods.ids.length);
  const err = await t.throwsAsync<any>(d!.call('Attach', {
    sandbox_id: p.id, netns_path: p.path, interfaces: [iface('eth0', 'b1', true, true), iface('net1', 'b2', false, true)],
  }));
  t.is(err?.code, 3);
  t.regex(err!.details, /^interfaces\[1\]\.default_route: /);
  t.deepEqual(ipJson(['link', 'show'], p.ns).map((l: any) => l.ifname), ['lo'], 'nothing was made');
});

test.serial('a device that is not the default interface may not bring its own default route', async (t) => {
  const p = pods.pod(pods.ids.length);
  const net1 = iface('net1', 'd1', true);
  const err = await t.throwsAsync<any>(d!.call('Attach', { sandbox_id: p.id, netns_path: p.path, interfaces: [iface('eth0', 'b1', true), net1] }));
  t.is(err?.code, 3);
  t.regex(err!.details, /^interfaces\[1\]\.device\.parameters\.routes\[0\]\.dst: /);
  t.deepEqual(ipJson(['link', 'show'], p.ns).map((l: any) => l.ifname), ['lo'], 'nothing was made');
});

test.serial('Kata and KubeVirt: the second network gives the guest its subnet and routes, never a default route', async (t) => {
  for (const [runtime, binding] of [['KATA', { mode: 'tcfilter' }], ['KUBEVIRT', { binding: 'bridge' }]] as const) {
    const p = pods.pod(pods.ids.length);
    const { result } = await d!.call('Attach', {
      sandbox_id: p.id, netns_path: p.path, runtime,
      interfaces: [{ name: 'eth0', network: `${P}b1`, binding }, { name: 'net1', network: `${P}r2`, binding }],
    });
    const guests = result.interfaces.filter((i: any) => i.handoff).map((i: any) => fromStruct(i.handoff).guest as any);
    t.is(guests.length, 2, runtime);
    t.true(guests[0].routes.some((r: any) => r.dst === '0.0.0.0/0'), `${runtime}: eth0's guest NIC has the default route`);
    t.false(guests[1].routes.some((r: any) => r.dst === '0.0.0.0/0'), `${runtime}: net1's guest NIC has none`);
    t.true(guests[1].routes.some((r: any) => r.dst === NETS.r2.subnet), `${runtime}: net1's guest NIC reaches its routed subnet`);
    await d!.call('Detach', { sandbox_id: p.id });
  }
});
