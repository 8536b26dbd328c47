// Issue 34, item 1: KubeVirt's binding NAD on a pod whose eth0 knit itself made, the
// combination deploy/ ships (knit-cni as the node's CNI, deploy/kubevirt's binding NAD). knit-cni
// is exec'd exactly as the kubelet and Multus exec it: the first ADD (eth0) with the node
// conflist's config and CNI_ARGS K8S_POD_*, the second (CNI_IFNAME=net1) with the NAD's config
// and the cni-arg logicNetworkName=default Multus passes as args.cni. knit's eth0 is a runc
// sandbox's veth; the binding interface must still get KubeVirt's tap on it, as it does when
// another plugin made eth0: tap0 107:107, the tcfilter redirect both ways, the guest's lease
// with eth0's MAC, address and routes, the libvirt <interface> in the answer. Observed with
// `ip -j -d`, `tc -j`, sysfs (the tap's owner and group as numbers), a guest's end of tap0
// (a python helper opens it as QEMU does) that takes its lease by DHCP and ARPs its gateway,
// and a runc pod's ping. DEL of net1 takes only the tap and the ingress qdisc; DEL of eth0 the
// rest; kill -9 before each step of the second ADD is repaired at the next start.
// As the sandbox's own eth0 is knit's, its network's router is known: the guest's router
// solicitation gets an RA from the bridge that names it the default router.
// Prefix kvbe; the daemon in a netns of its own; subnets 10.220.1.0/24, fd6b:6e69:74e3::/64.
import test, { type ExecutionContext } from 'ava';
import { execFileSync, spawn } from 'node:child_process';
import path from 'node:path';
import { startDaemon, cleanupDaemon, podFactory, pingFrom, eventually, type Daemon } from '../helpers/daemon.js';
import { crashAndRestart } from '../helpers/crash.js';
import { uniquePrefix, removeNetns } from '../helpers/names.js';
import { knitShimConf } from '../helpers/cni.js';
import { ip, tc, tunOwner, type Json } from '../helpers/observe.js';
import { openTapPeer, type TapPeer } from '../fixtures/tap-peer.js';
import { DISCOVER, dhcpAnswers, dhcpFrame, routerSolicitation } from '../helpers/dhcp-client.js';
import { parseFrame } from '../../src/dhcp/frame.js';
import { vmHandoff } from '../helpers/vm-launcher.js';
import { arpReplyFrom, arpRequest, arpRequestFor, framesAfter } from '../helpers/arp-frames.js';

const P = uniquePrefix('kvbe');
const HOST = `${P}h`;
const GATEWAY = '10.220.1.1';
const opts = { prefix: P, subnet: '10.220.1.0/24', subnet6: 'fd6b:6e69:74e3::/64', netns: HOST };
const SHIM = path.resolve('build', 'native', 'knit-cni');
let d: Daemon | undefined;
const { pod, netnsNames, ids } = podFactory(P);

/** The node's conflist entry, as `knit install-cni` writes it. */
const nodeConf = () => knitShimConf(P, d!.dir);
/** deploy/kubevirt/binding-nad.yaml's config with the cni-arg Multus adds; its socket is this
 * test daemon's (a node's knit listens on knit-cni's default, /run/knit/cni.sock). */
const nadConf = () => ({
  cniVersion: '1.0.0', name: 'knit-tap-binding', type: 'knit', args: { cni: { logicNetworkName: 'default' } },
  socket: path.join(d!.dir, 'cni.sock'), deleteQueue: path.join(d!.dir, 'cni-delete-queue'),
});
const k8sArgs = (id: string) => `IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=virt-launcher-${id};K8S_POD_INFRA_CONTAINER_ID=${id};K8S_POD_UID=uid-${id}`;

/** knit-cni exec'd as a runtime execs a plugin: config on stdin, CNI_* in the environment. */
function shim(command: string, vm: { id: string; path: string }, ifname: string, config: object): Promise<{ code: number | null; out: Json; raw: string }> {
  const child = spawn(SHIM, [], {
    env: { PATH: process.env.PATH, CNI_COMMAND: command, CNI_CONTAINERID: vm.id, CNI_NETNS: vm.path, CNI_IFNAME: ifname, CNI_ARGS: k8sArgs(vm.id), CNI_PATH: '/usr/lib/cni' },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let raw = '';
  child.stdout!.setEncoding('utf8').on('data', (s: string) => (raw += s));
  child.stdin!.end(JSON.stringify(config));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, out: raw.trim() ? JSON.parse(raw) : undefined, raw })));
}

/** eth0 as the pod (and its users) see it: MAC, addresses, routes. */
const eth0State = (ns: string) => JSON.stringify({
  mac: ip(ns, 'link', 'show', 'dev', 'eth0')[0].address,
  addrs: ip(ns, 'addr', 'show', 'dev', 'eth0')[0].addr_info.map((a: Json) => `${a.local}/${a.prefixlen}`),
  routes: ip(ns, 'route', 'show').map((r: Json) => `${r.dst} via ${r.gateway ?? '-'} dev ${r.dev}`),
});
const links = (ns: string) => ip(ns, 'link', 'show').map((l: Json) => l.ifname as string).sort();
/** Where each ingress filter of dev redirects to (`tc -j filter show dev DEV ingress`). */
const redirects = (ns: string, dev: string) => tc(ns, 'filter', 'show', 'dev', dev, 'ingress')
  .flatMap((f: Json) => f.options?.actions ?? []).filter((a: Json) => a.kind === 'mirred').map((a: Json) => `${a.mirred_action} ${a.to_dev}`);
const ingressQdiscs = (ns: string, dev: string) => tc(ns, 'qdisc', 'show', 'dev', dev).filter((q: Json) => q.kind === 'ingress' || q.kind === 'clsact');

/** The router advertisement among frames (RFC 4861 4.2): its source MAC and router lifetime. */
function routerAdvertisement(frames: Buffer[]): { srcMac: string; lifetime: number } | undefined {
  for (const f of frames) {
    try {
      const p = parseFrame(f, 65535);
      if (p.protocol === 58 && p.payload[0] === 134) return { srcMac: p.srcMac, lifetime: p.payload.readUInt16BE(6) };
    } catch {
      /* not IPv4/IPv6 UDP or ICMPv6 */
    }
  }
  return undefined;
}

test.before(async () => {
  removeNetns(HOST);
  execFileSync('ip', ['netns', 'add', HOST]);
  execFileSync('ip', ['-n', HOST, 'link', 'set', 'lo', 'up']);
  d = await startDaemon(opts);
});

test.after.always(async () => {
  await cleanupDaemon(d, opts, ids);
  for (const n of netnsNames) removeNetns(n);
  removeNetns(HOST);
});

test.serial('the binding NAD on knit\'s own eth0: tap0 107:107 with the redirect, the guest\'s lease from eth0, libvirt\'s <interface>; a repeat answers the same; DEL net1 leaves eth0 working, DEL eth0 the rest', async (t) => {
  const vm = pod(1);
  const other = pod(2);
  const otherIp = (await d!.call('Attach', { sandbox_id: other.id, netns_path: other.path, runtime: 'RUNC', interfaces: [{ name: 'eth0' }] })).result.ips[0].address.split('/')[0];

  const first = await shim('ADD', vm, 'eth0', nodeConf());
  t.is(first.code, 0, first.raw);
  const podIp = first.out.ips[0].address.split('/')[0];
  const before = eth0State(vm.ns);
  const eth0 = ip(vm.ns, 'link', 'show', 'dev', 'eth0')[0];

  const second = await shim('ADD', vm, 'net1', nadConf());
  t.is(second.code, 0, second.raw);
  t.deepEqual(second.out.interfaces, [{ name: 'tap0', sandbox: vm.path }], 'the answer names the tap it made');
  t.deepEqual(second.out.ips, [], 'the addresses stay eth0\'s');

  // The tap as virt-launcher expects it, and the redirect between it and eth0.
  const [tap] = ip(vm.ns, 'link', 'show', 'dev', 'tap0');
  t.like(tap.linkinfo, { info_kind: 'tun', info_data: { type: 'tap', persist: true } });
  t.is(tap.mtu, eth0.mtu);
  t.deepEqual(tunOwner(vm.ns, 'tap0'), { user: 107, group: 107 }, '/sys/class/net/tap0/owner and group');
  t.deepEqual(redirects(vm.ns, 'eth0'), ['redirect tap0'], 'tc: eth0 ingress → tap0');
  t.deepEqual(redirects(vm.ns, 'tap0'), ['redirect eth0'], 'tc: tap0 ingress → eth0');
  t.is(eth0State(vm.ns), before, 'eth0 keeps its MAC, address and routes');

  // knit's answer for the sandbox: the tap's hand-off with libvirt's <interface>.
  const q = await d!.call('Query', { sandbox_id: vm.id });
  const { handoff: h } = vmHandoff({ sandbox_id: vm.id, interfaces: q.sandbox.result.interfaces.filter((i: Json) => i.name === 'tap0') });
  t.like(h, { runtime: 'kubevirt', model: 'tap', name: 'tap0', owner: 107, group: 107, mac: eth0.address, mtu: eth0.mtu, podInterface: 'eth0' });
  t.regex(String((h.libvirt as Json).interface), new RegExp(`<mac address='${eth0.address}'/>[\\s\\S]*<target dev='tap0' managed='no'/>`));
  t.true(q.live.ok, q.live.differences.join('; '));

  // The guest's end of tap0: its DHCP answer is eth0's address and gateway; its ARP for the
  // gateway leaves by eth0 and the bridge answers; a pod's ping to eth0's address reaches it.
  const peer = await openTapPeer(vm.ns, 'tap0');
  t.teardown(() => peer.stop());
  const [offer] = dhcpAnswers(await framesAfter(peer, dhcpFrame(DISCOVER, eth0.address), (f) => dhcpAnswers(f).length));
  t.is(offer?.yiaddr, podIp, 'DHCP offers eth0\'s address');
  t.is([...(offer?.options.get(3) ?? [])].join('.'), GATEWAY, 'and its gateway');
  t.is(offer?.options.get(26)?.readUInt16BE(0), eth0.mtu);
  t.truthy(arpReplyFrom(await framesAfter(peer, arpRequest(eth0.address, podIp, GATEWAY), (f) => arpReplyFrom(f, GATEWAY)), GATEWAY), 'the gateway answers the guest\'s ARP');
  const ra = routerAdvertisement(await framesAfter(peer, routerSolicitation(eth0.address), routerAdvertisement));
  const bridgeMac = ip(HOST, 'link', 'show', 'dev', d!.bridge)[0].address;
  t.like(ra, { srcMac: bridgeMac }, 'the RA comes from the network\'s bridge');
  t.true((ra?.lifetime ?? 0) > 0, 'and names it the default router');
  const pinging = spawn('ip', ['netns', 'exec', other.ns, 'ping', '-c', '3', '-i', '0.5', podIp], { stdio: 'ignore' });
  const seen = await framesAfter(peer, undefined, (f) => arpRequestFor(f, otherIp, podIp));
  t.truthy(arpRequestFor(seen, otherIp, podIp), 'another pod\'s ping to eth0\'s address reaches the guest (its ARP request)');
  await new Promise((r) => pinging.once('exit', r));
  await peer.stop();

  // A retry of the same ADD (a lost answer) answers the same and makes nothing more.
  const linksAfterAdd = links(vm.ns);
  const again = await shim('ADD', vm, 'net1', nadConf());
  t.is(again.code, 0, again.raw);
  t.deepEqual(again.out, second.out);
  t.deepEqual(links(vm.ns), linksAfterAdd);

  // DEL net1: the tap and the ingress qdisc go, eth0 is as it was and carries the pod again.
  const delNet1 = await shim('DEL', vm, 'net1', nadConf());
  t.is(delNet1.code, 0, delNet1.raw);
  await eventually(() => !links(vm.ns).includes('tap0'), 'tap0 removed');
  t.deepEqual(ingressQdiscs(vm.ns, 'eth0'), [], 'no ingress qdisc on eth0');
  t.is(eth0State(vm.ns), before);
  t.true(pingFrom(other.ns, podIp), 'the pod answers on eth0 again');
  t.true(pingFrom(vm.ns, GATEWAY), 'and reaches its gateway');
  t.true((await d!.call('Check', { sandbox_id: vm.id })).ok);

  // DEL eth0: the rest.
  const delEth0 = await shim('DEL', vm, 'eth0', nodeConf());
  t.is(delEth0.code, 0, delEth0.raw);
  await eventually(() => links(vm.ns).join() === 'lo', 'the pod netns holds only lo');
  t.is((await d!.call('List', {})).sandboxes.filter((s: Json) => s.request.sandbox_id === vm.id).length, 0, 'no record');
  t.false(pingFrom(other.ns, podIp), 'nothing answers on the pod\'s address');
});

/** The sandbox with eth0 alone, as the first ADD left it: devices, no tap, no qdisc, eth0 working. */
async function assertEth0Alone(t: ExecutionContext, vm: { ns: string; id: string }, before: { links: string[]; eth0: string }, when: string) {
  await eventually(() => links(vm.ns).join() === before.links.join(), `pod devices back to ${before.links.join(',')} (${when})`).catch(() => undefined);
  t.deepEqual(links(vm.ns), before.links, `pod devices (${when})`);
  t.deepEqual(ingressQdiscs(vm.ns, 'eth0'), [], `no ingress qdisc on eth0 (${when})`);
  t.is(eth0State(vm.ns), before.eth0, `eth0 as it was (${when})`);
  const q = await d!.call('Query', { sandbox_id: vm.id });
  t.deepEqual(q.sandbox.request.interfaces.map((i: Json) => i.name), ['eth0'], `record (${when})`);
  t.true(q.live.ok, `${when}: ${q.live.differences.join('; ')}`);
  t.true(pingFrom(vm.ns, GATEWAY), `eth0 reaches its gateway (${when})`);
}

test.serial('kill -9 before each step of the binding\'s ADD: the next start takes it back, and the ADD Multus retries then succeeds', async (t) => {
  const vm = pod(3);
  t.is((await shim('ADD', vm, 'eth0', nodeConf())).code, 0);
  const before = { links: links(vm.ns), eth0: eth0State(vm.ns) };
  const { steps } = await d!.call('Plan', { add_interface: { sandbox_id: vm.id, interface: { name: 'net1', binding: { binding: 'tap', logicNetwork: 'default' } } } });
  t.true(steps.length >= 4, `the binding's add has ${steps.length} steps: ${steps.map((s: Json) => s.description).join('; ')}`);
  await d!.stop();
  for (let n = 0; n < steps.length; n++) {
    const armed = await d!.restart({ KNIT_FAILPOINT: `addif:${n}` });
    d = armed;
    d = await crashAndRestart(armed, () => shim('ADD', vm, 'net1', nadConf()));
    await assertEth0Alone(t, vm, before, `crash before step ${n}`);
    await d.stop();
  }
  d = await d!.restart();
  const retried = await shim('ADD', vm, 'net1', nadConf());
  t.is(retried.code, 0, retried.raw);
  t.deepEqual(redirects(vm.ns, 'eth0'), ['redirect tap0']);
  t.is((await shim('DEL', vm, 'net1', nadConf())).code, 0);
  t.is((await shim('DEL', vm, 'eth0', nodeConf())).code, 0);
  await eventually(() => links(vm.ns).join() === 'lo', 'the pod netns holds only lo');
});
