// Concurrency, pool exhaustion and malformed requests against a real daemon.
import test from 'ava';
import { status } from '@grpc/grpc-js';
import {
  startDaemon, cleanupDaemon, makeNetns, removeNetns, eventually, hostLinks, removeLinkQuietly, type Daemon,
} from '../helpers/daemon.js';

const P = 'kld';
const opts = {
  prefix: P,
  subnet: '10.231.3.0/24',
  extraNetworks: [{ name: `${P}tiny`, mode: 'bridge', bridge: `${P}tbr`, ipv4: { subnet: '10.231.4.0/29' } }],
};
let d: Daemon | undefined;
const namespaces: string[] = [];
const ids: string[] = [];

function pods(n: number, tag: string) {
  return Array.from({ length: n }, (_, i) => {
    const ns = `${P}-${tag}${i}`;
    namespaces.push(ns);
    ids.push(`${P}-${tag}${i}`);
    return { ns, path: makeNetns(ns), id: `${P}-${tag}${i}` };
  });
}

const req = (id: string, netns: string, network?: string) => ({
  sandbox_id: id, netns_path: netns, runtime: 'RUNC', interfaces: [{ name: 'eth0', ...(network ? { network } : {}) }],
});

test.before(async () => {
  d = await startDaemon(opts);
});

test.after.always(async () => {
  await cleanupDaemon(d, opts, ids);
  removeLinkQuietly(`${P}tbr`);
  for (const n of namespaces) removeNetns(n);
});

test.serial('50 concurrent attaches, each sent twice at once: 50 sandboxes, 50 distinct addresses', async (t) => {
  const ps = pods(50, 'c');
  const results = await Promise.all(ps.flatMap((p) => [d!.call('Attach', req(p.id, p.path)), d!.call('Attach', req(p.id, p.path))]));
  for (let i = 0; i < ps.length; i++) t.deepEqual(results[2 * i].result, results[2 * i + 1].result, `duplicate of ${ps[i].id} got the same answer`);
  const addrs = new Set(results.map((r) => r.result.ips[0].address));
  t.is(addrs.size, 50);
  const status1 = await d!.call('NodeStatus', {});
  t.is(Number(status1.sandboxes), 50);
  t.is(hostLinks().filter((l) => l.master === `${P}br`).length, 50, 'ip sees 50 ports on the bridge');

  await Promise.all(ps.map((p) => d!.call('Detach', { sandbox_id: p.id })));
  await eventually(() => hostLinks().filter((l) => ids.some((id) => l.ifalias?.includes(`sandbox=${id};`))).length === 0, 'all host ends reaped', 20_000);
  const status2 = await d!.call('NodeStatus', {});
  t.is(Number(status2.networks.find((n: any) => n.name === `${P}net`).pools[0].used), 0);
});

test.serial('an exhausted pool answers RESOURCE_EXHAUSTED and marks the node unschedulable, still ready', async (t) => {
  const ps = pods(6, 'x');
  for (const p of ps.slice(0, 5)) await d!.call('Attach', req(p.id, p.path, `${P}tiny`));
  const err = await t.throwsAsync(d!.call('Attach', req(ps[5].id, ps[5].path, `${P}tiny`)));
  t.is((err as any).code, status.RESOURCE_EXHAUSTED);
  t.regex(err!.message, new RegExp(`${P}tiny`));
  t.false(hostLinks().some((l) => l.ifalias?.includes(`sandbox=${ps[5].id};`)), 'the refused attach made no device');
  let s = await d!.call('NodeStatus', {});
  t.true(s.ready);
  t.false(s.schedulable);
  t.regex(s.message, /exhausted/);
  await d!.call('Detach', { sandbox_id: ps[0].id });
  s = await d!.call('NodeStatus', {});
  t.true(s.schedulable);
  for (const p of ps.slice(1, 5)) await d!.call('Detach', { sandbox_id: p.id });
});

const malformed: [string, (ns: string) => object, RegExp][] = [
  ['sandbox_id empty', (ns) => ({ ...req('', ns) }), /sandbox_id/],
  ['sandbox_id with a slash', (ns) => ({ ...req('a/b', ns) }), /sandbox_id/],
  ['netns_path relative', () => ({ ...req(`${P}-m`, 'run/netns/x') }), /netns_path/],
  ['netns_path missing', () => ({ ...req(`${P}-m`, `/run/netns/${P}-does-not-exist`) }), /netns_path/],
  ['interface name too long', (ns) => ({ ...req(`${P}-m`, ns), interfaces: [{ name: 'a-very-long-ifname0' }] }), /interfaces\[0\]\.name/],
  ['interface name with slash', (ns) => ({ ...req(`${P}-m`, ns), interfaces: [{ name: 'et/h0' }] }), /interfaces\[0\]\.name/],
  ['duplicate interface names', (ns) => ({ ...req(`${P}-m`, ns), interfaces: [{ name: 'eth0' }, { name: 'eth0' }] }), /interfaces\[1\]\.name/],
  ['bad MAC', (ns) => ({ ...req(`${P}-m`, ns), interfaces: [{ name: 'eth0', mac: 'zz:zz' }] }), /interfaces\[0\]\.mac/],
  ['multicast MAC', (ns) => ({ ...req(`${P}-m`, ns), interfaces: [{ name: 'eth0', mac: '01:00:5e:00:00:01' }] }), /interfaces\[0\]\.mac/],
  ['MTU too small', (ns) => ({ ...req(`${P}-m`, ns), interfaces: [{ name: 'eth0', mtu: 10 }] }), /interfaces\[0\]\.mtu/],
  ['static IP not a CIDR', (ns) => ({ ...req(`${P}-m`, ns), interfaces: [{ name: 'eth0', ips: ['10.231.3.300/24'] }] }), /interfaces\[0\]\.ips\[0\]/],
  ['static IP outside the network', (ns) => ({ ...req(`${P}-m`, ns), interfaces: [{ name: 'eth0', ips: ['192.0.2.7/24'] }] }), /interfaces\[0\]\.ips\[0\]/],
  ['unknown network', (ns) => ({ ...req(`${P}-m`, ns), interfaces: [{ name: 'eth0', network: 'nope' }] }), /interfaces\[0\]\.network/],
  ['port out of range', (ns) => ({ ...req(`${P}-m`, ns), port_mappings: [{ protocol: 'TCP', container_port: 70000, host_port: 80 }] }), /port_mappings\[0\]\.container_port/],
];

test.serial('malformed requests are INVALID_ARGUMENT naming the field, and change nothing', async (t) => {
  const [p] = pods(1, 'm');
  // Other test files run concurrently: look only at this daemon's objects.
  const tagged = () => hostLinks().filter((l) => l.ifalias?.startsWith(`knit-${P}:sandbox=`));
  const mine = () => tagged().map((l) => l.ifname).sort();
  // Devices retired by the previous test's detaches wait in the reap group (ip -d link shows
  // its number) for the reaper: let it finish first.
  await eventually(() => !tagged().some((l) => l.group !== 'default'), 'retired devices reaped');
  const linksBefore = mine();
  const poolsBefore = (await d!.call('NodeStatus', {})).networks;
  for (const [what, make, field] of malformed) {
    const err = await t.throwsAsync(d!.call('Attach', make(p.path)), undefined, what);
    t.is((err as any)?.code, status.INVALID_ARGUMENT, `${what}: ${err?.message}`);
    t.regex(err?.message ?? '', field, what);
  }
  t.deepEqual(mine(), linksBefore, 'no device made');
  t.deepEqual((await d!.call('NodeStatus', {})).networks, poolsBefore, 'no address held');
  t.is((await d!.call('List', {})).sandboxes.length, 0);
});
