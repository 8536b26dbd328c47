// Several networks per pod where one is a CNI network (a conflist of Debian's ptp + host-local,
// run by knit's CNI executor) and the other knit's own bridge, both ways round; and a CNI
// interface hot-plugged into a running pod and removed again. The daemon runs in its own "host"
// netns, so what the plugins make on the host goes with it.
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startDaemon, cleanupDaemon, ipJson, pingFrom, podFactory, eventually, type Daemon } from '../helpers/daemon.js';
import { conflist, hostLocal, leases } from '../helpers/cni.js';

const P = 'mcni';
const HOST = `${P}-h`;
const dir = mkdtempSync(path.join(os.tmpdir(), `knit-${P}`));
const cacheDir = path.join(dir, 'cache');
const dataDir = path.join(dir, 'ipam');
const pods = podFactory(P);
const KNIT_NET = `${P}net`;
/** A CNI network that gives a default route, and one that gives none (only its gateway). */
const CDEF = `${P}def`;
const CSEC = `${P}sec`;
const cni = (name: string, subnet: string, gateway: string, withDefault: boolean) => ({
  name, mode: 'cni',
  cni: { conflist: conflist(name, [{ type: 'ptp', ipam: { ...hostLocal(dataDir, subnet, gateway), routes: withDefault ? [{ dst: '0.0.0.0/0' }] : [] } }]), cacheDir },
});
const opts = {
  prefix: P, subnet: '10.174.52.0/24', netns: HOST,
  extraNetworks: [cni(CDEF, '10.174.51.0/24', '10.174.51.1', true), cni(CSEC, '10.174.50.0/24', '10.174.50.1', false)],
};
let d: Daemon | undefined;

test.before(async () => {
  execFileSync('ip', ['netns', 'add', HOST]);
  execFileSync('ip', ['-n', HOST, 'link', 'set', 'lo', 'up']);
  d = await startDaemon(opts);
});

test.after.always(async () => {
  await cleanupDaemon(d, opts, pods.ids);
  pods.removeAll();
  execFileSync('ip', ['netns', 'del', HOST], { stdio: 'ignore' });
  rmSync(dir, { recursive: true, force: true });
});

const routeDev = (ns: string, dst: string) => ipJson(['route', 'get', dst], ns)[0].dev;
const defaults = (ns: string) => ipJson(['route', 'show', 'default'], ns).map((r: any) => r.dev);
const sandboxAddress = (r: any, name: string) => {
  const i = r.interfaces.findIndex((x: any) => x.sandbox && x.name === name);
  return r.ips.filter((ip: any) => ip.interface === i).map((ip: any) => ip.address);
};

test.serial("knit bridge first, CNI ptp second: the default route is the bridge's, the chain's network is reached through net1", async (t) => {
  const p = pods.pod(1);
  const { result } = await d!.call('Attach', { sandbox_id: p.id, netns_path: p.path, interfaces: [{ name: 'eth0' }, { name: 'net1', network: CSEC }] });
  t.regex(sandboxAddress(result, 'eth0')[0], /^10\.174\.52\./);
  t.regex(sandboxAddress(result, 'net1')[0], /^10\.174\.50\./, JSON.stringify(result.ips));
  t.deepEqual(defaults(p.ns), ['eth0']);
  t.is(routeDev(p.ns, '10.174.50.1'), 'net1');
  t.true(pingFrom(p.ns, '10.174.50.1'), 'the ptp gateway answers through net1');
  t.true(pingFrom(p.ns, '10.174.52.1'), "knit's bridge gateway answers through eth0");
  await d!.call('Detach', { sandbox_id: p.id });
  await eventually(() => ipJson(['link', 'show'], p.ns).length === 1, 'pod emptied');
  t.deepEqual(leases(dataDir, CSEC), []);
});

test.serial('CNI ptp first (its chain gives the default route), knit bridge second: no second default route', async (t) => {
  const p = pods.pod(2);
  const { result } = await d!.call('Attach', { sandbox_id: p.id, netns_path: p.path, interfaces: [{ name: 'eth0', network: CDEF }, { name: 'net1', network: KNIT_NET }] });
  t.regex(sandboxAddress(result, 'eth0')[0], /^10\.174\.51\./, JSON.stringify(result.ips));
  t.regex(sandboxAddress(result, 'net1')[0], /^10\.174\.52\./);
  t.deepEqual(defaults(p.ns), ['eth0']);
  t.is(routeDev(p.ns, '10.174.52.1'), 'net1');
  t.true(pingFrom(p.ns, '10.174.52.1'), "knit's bridge gateway answers through net1");
  t.true(pingFrom(p.ns, '10.174.51.1'), 'the ptp gateway answers through eth0');
  await d!.call('Detach', { sandbox_id: p.id });
  await eventually(() => ipJson(['link', 'show'], p.ns).length === 1, 'pod emptied');
  t.deepEqual(leases(dataDir, CDEF), []);
});

test.serial('a CNI interface hot-plugged into a running pod and removed: the chain ADDs and DELs it, eth0 is untouched', async (t) => {
  const p = pods.pod(3);
  await d!.call('Attach', { sandbox_id: p.id, netns_path: p.path, interfaces: [{ name: 'eth0' }] });
  const { result } = await d!.call('AddInterface', { sandbox_id: p.id, interface: { name: 'net1', network: CSEC } });
  const net1Ip = sandboxAddress(result, 'net1')[0];
  t.regex(net1Ip, /^10\.174\.50\./, JSON.stringify(result));
  t.deepEqual(leases(dataDir, CSEC).length, 1);
  t.is(routeDev(p.ns, '10.174.50.1'), 'net1');
  t.true(pingFrom(p.ns, '10.174.50.1'));
  const q = await d!.call('Query', { sandbox_id: p.id });
  t.true(q.live.ok, q.live.differences.join('; '));
  await d!.call('RemoveInterface', { sandbox_id: p.id, name: 'net1' });
  await eventually(() => !ipJson(['link', 'show'], p.ns).some((l: any) => l.ifname === 'net1'), 'net1 gone');
  t.deepEqual(leases(dataDir, CSEC), [], 'the chain DEL gave the lease back');
  t.true(pingFrom(p.ns, '10.174.52.1'), 'eth0 still works');
  await d!.call('Detach', { sandbox_id: p.id });
  await eventually(() => ipJson(['link', 'show'], p.ns).length === 1, 'pod emptied');
});
