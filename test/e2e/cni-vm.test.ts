// VM runtimes on a CNI network: the chain (Debian's bridge + host-local) makes the pod veth,
// then knit builds Kata's tcfilter hand-off or KubeVirt's masquerade on it, and a real QEMU
// guest (TCG) boots on the tap. The daemon and the chain's bridge live in the test's own
// "host" netns; the guests are reached from there.
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Cleanup } from '../fixtures/cleanup.js';
import { GUEST_HTTP_PORT } from '../fixtures/qemu.js';
import { startDaemon, cleanupDaemon, makeNetns, removeNetns, eventually, pingFrom, type Daemon } from '../helpers/daemon.js';
import { ip, tc, type Json } from '../helpers/observe.js';
import { launchVm, vmHandoff } from '../helpers/vm-launcher.js';
import { uniquePrefix } from '../helpers/names.js';
import { cacheEntries, conflist, hostLocal, leases, nftRuleset } from '../helpers/cni.js';

const P = uniquePrefix('bvm');
const HOST = `${P}h`;
const NET = `${P}cni`;
const BRIDGE = `${P}cb`;
const dir = mkdtempSync(path.join(os.tmpdir(), `knit-${P}`));
const cacheDir = path.join(dir, 'cache');
const dataDir = path.join(dir, 'ipam');
const opts = {
  prefix: P,
  subnet: '10.172.10.0/24',
  netns: HOST,
  extraNetworks: [{
    name: NET, mode: 'cni',
    cni: { cacheDir, conflist: conflist(NET, [{ type: 'bridge', bridge: BRIDGE, isGateway: true, ipam: hostLocal(dataDir, '10.172.11.0/24', '10.172.11.1') }]) },
  }],
};
let d: Daemon | undefined;

const inHost = (argv: string[]) => execFileSync('ip', ['netns', 'exec', HOST, ...argv], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
const hostPings = (addr: string) => [1, 2, 3, 4, 5].some(() => pingFrom(HOST, addr));
const httpFromHost = (addr: string) =>
  inHost(['python3', '-c', `import urllib.request; print(urllib.request.urlopen("http://${addr}:${GUEST_HTTP_PORT}/", timeout=10).read().decode().strip())`]).trim();
const leftovers = (ns: string) => ({
  links: ip(ns, 'link', 'show').map((l: Json) => l.ifname).filter((n: string) => n !== 'lo'),
  qdiscs: tc(ns, 'qdisc', 'show').filter((q: Json) => q.dev !== 'lo').map((q: Json) => `${q.kind} on ${q.dev}`),
  nft: nftRuleset(ns).filter((x) => x.table).map((x) => `${x.table.family} ${x.table.name}`),
});
const bridgePorts = () => JSON.parse(inHost(['ip', '-j', 'link', 'show', 'master', BRIDGE]) || '[]').map((l: Json) => l.ifname);

test.before(async () => {
  execFileSync('ip', ['netns', 'add', HOST]);
  execFileSync('ip', ['-n', HOST, 'link', 'set', 'lo', 'up']);
  d = await startDaemon(opts);
});

test.after.always(async () => {
  await cleanupDaemon(d, opts, []);
  removeNetns(HOST);
  rmSync(dir, { recursive: true, force: true });
});

/** A VM sandbox netns (removed in teardown) attached with one interface on the CNI network. */
async function attachVm(t: { teardown(fn: () => Promise<void>): void }, name: string, runtime: string, binding: Record<string, string>) {
  const cleanup = new Cleanup();
  t.teardown(() => cleanup.run());
  const vm = { ns: `${P}${name}`, id: `${P}${name}` };
  makeNetns(vm.ns);
  cleanup.defer(`remove netns ${vm.ns}`, () => removeNetns(vm.ns));
  const res = (await d!.call('Attach', { sandbox_id: vm.id, netns_path: `/run/netns/${vm.ns}`, runtime, interfaces: [{ name: 'eth0', network: NET, binding }] })).result;
  return { cleanup, vm, res, ...vmHandoff(res) };
}

/** After detach: nothing in the sandbox netns, no port on the chain's bridge, no lease. */
async function assertDetached(t: { deepEqual(a: unknown, b: unknown, m?: string): void }, ns: string) {
  await eventually(() => leftovers(ns).links.length === 0 || undefined, 'sandbox emptied').catch(() => undefined);
  t.deepEqual(leftovers(ns), { links: [], qdiscs: [], nft: [] });
  t.deepEqual(bridgePorts(), []);
  t.deepEqual(leases(dataDir, NET), []);
}

test.serial('kata tcfilter over the chain-made veth: the guest takes the veth MAC and the chain address; the host pings it; detach leaves nothing', async (t) => {
  const { cleanup, vm, sandboxId, handoff: h } = await attachVm(t, 'kata', 'KATA', { mode: 'tcfilter' });
  t.like(h, { runtime: 'kata', model: 'tcfilter', name: 'tap0_kata', podIpsOn: 'pod+guest' });
  // The chain chose the MAC and the address; the hand-off carries them.
  const [eth0] = ip(vm.ns, 'link', 'show', 'dev', 'eth0');
  t.is(h.mac, eth0.address, 'the guest takes the chain-made veth\'s MAC');
  t.regex(h.guest.ips[0].address, /^10\.172\.11\.\d+\/24$/);
  t.deepEqual(h.guest.routes.find((r) => r.dst === '0.0.0.0/0'), { dst: '0.0.0.0/0', gateway: '10.172.11.1' });
  const guestIp = h.guest.ips[0].address.split('/')[0];
  // tc: ingress on both, a redirect each way.
  const filters = (dev: string) => JSON.stringify(tc(vm.ns, 'filter', 'show', 'dev', dev, 'ingress'));
  t.regex(filters('eth0'), /tap0_kata/);
  t.regex(filters('tap0_kata'), /eth0/);

  const { guest } = await launchVm({ sandboxId, ifname: 'eth0', handoff: h, by: 'name', name: `${P}k`, ping: ['10.172.11.1'] });
  cleanup.defer('stop guest', () => guest.stop());
  await guest.waitFor(/KNIT-READY/);
  t.notRegex(guest.serial(), /KNIT-ERROR/);
  t.true(hostPings(guestIp), `the host netns could not ping the guest at ${guestIp}`);
  t.is(httpFromHost(guestIp), `knit-guest ${guestIp}`, 'the guest, not the pod netns, answers on the pod address');
  const [, verdict] = (await guest.waitFor(/KNIT-PING-(OK|FAIL) /)) as RegExpMatchArray;
  t.is(verdict, 'OK', `the guest could not ping the chain's gateway:\n${guest.serial().slice(-1500)}`);

  await guest.stop();
  await d!.call('Detach', { sandbox_id: sandboxId });
  await assertDetached(t, vm.ns);
  t.deepEqual(cacheEntries(cacheDir), []);
});

test.serial('kubevirt masquerade over the chain-made veth: HTTP to the chain address port reaches the guest 10.0.2.2; detach leaves nothing', async (t) => {
  const { cleanup, vm, res, sandboxId, handoff: h } = await attachVm(t, 'kv', 'KUBEVIRT', { binding: 'masquerade', ports: `tcp:${GUEST_HTTP_PORT}` });
  const podIp = res.ips[0].address.split('/')[0];
  t.regex(podIp, /^10\.172\.11\./);
  t.like(h, { model: 'masquerade', name: 'tap0', bridge: 'k6t-eth0', podIpsOn: 'pod' });
  t.deepEqual(h.guest.ips, [{ address: '10.0.2.2/24', family: 4, gateway: '10.0.2.1' }]);
  t.is(h.mac, ip(vm.ns, 'link', 'show', 'dev', 'eth0')[0].address);
  t.regex(String((h.libvirt as { interface: string }).interface), new RegExp(`<mac address='${h.mac}'/>`));
  t.deepEqual(leftovers(vm.ns).nft, ['ip nat']);

  const { guest } = await launchVm({ sandboxId, ifname: 'eth0', handoff: h, by: 'name', name: `${P}v`, ping: ['10.172.11.1'] });
  cleanup.defer('stop guest', () => guest.stop());
  await guest.waitFor(/KNIT-READY/);
  t.is(httpFromHost(podIp), 'knit-guest 10.0.2.2', 'DNAT from the chain address to the guest');
  const [, verdict] = (await guest.waitFor(/KNIT-PING-(OK|FAIL) /)) as RegExpMatchArray;
  t.is(verdict, 'OK', `the guest could not ping the chain's gateway through the masquerade:\n${guest.serial().slice(-1500)}`);

  await guest.stop();
  await d!.call('Detach', { sandbox_id: sandboxId });
  await assertDetached(t, vm.ns);
});

test.serial('kata macvtap on a CNI network is refused with UNIMPLEMENTED and changes nothing', async (t) => {
  const ns = `${P}mvt`;
  makeNetns(ns);
  t.teardown(() => removeNetns(ns));
  const err: any = await t.throwsAsync(d!.call('Attach', {
    sandbox_id: ns, netns_path: `/run/netns/${ns}`, runtime: 'KATA', interfaces: [{ name: 'eth0', network: NET, binding: { mode: 'macvtap' } }],
  }));
  t.is(err.code, 12);
  t.regex(err.message, /interfaces\[0\]\.binding\.mode: kata macvtap on CNI network/);
  t.deepEqual(leftovers(ns).links, []);
  t.deepEqual(leases(dataDir, NET), []);
});
