// KubeVirt's tap network binding on knit, with an unmodified libvirt (issue 25). knit-cni makes
// the taps exactly as virt-launcher expects them: tap0 for the pod interface eth0 (knit is the
// network's CNI; the pod's annotations ask for KubeVirt and two queues) and, for a secondary
// network "blue" whose pod interface pod16477688c0e Debian's bridge plugin made, tap16477688c0e
// (knit called after it as the binding's CNI, cni-arg logicNetworkName), both 107:107 and
// persistent. libvirtd runs as virt-launcher runs it: inside the pod netns, private dirs,
// namespaces = [ ], cgroup_controllers = [ ], domain type qemu (TCG); the domain's interfaces
// are the ones KubeVirt's converter writes for a tap binding, MAC and MTU read from the pod
// interfaces. The guest takes both addresses by DHCP from knit, answers ping and HTTP from the
// node and from a runc pod, libvirt changes nothing on the taps, and after virsh destroy and
// undefine and CNI DEL nothing of knit's, the plugin's or libvirt's is left. The daemon and the
// networks' bridges live in the test's own "node" netns. The guest kernel's IPv6 router
// solicitation gets knit's RA (the guest has no DHCPv6 client; the kernel test covers DHCPv6).
// That node is node 1 of a two-node cluster (docs/cluster.md): knit's network spans it with
// crossNode routes and a literal node map, the nodes joined by a fabric bridge in its own netns;
// node 2 runs its own knit with its own block and a runc pod, which reaches the guest by ping and
// HTTP across the fabric (IPv4: the guest takes no IPv6 address, knit's RA sends it to DHCPv6).
// Prefix lkv; node 1's block 10.234.25.0/24 and fd00:234:25::/64, node 2's 10.234.27.0/24 and
// fd00:234:27::/64, blue 10.234.26.0/24, the fabric 192.168.241.0/24 and fd6b:241::/64.
import test from 'ava';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { makeNetns, removeNetns, eventually, pingFrom, runcAttachReq, type Daemon } from '../helpers/daemon.js';
import { buildSegment, clusterDaemons, sh, type FabricSegment, type Teardowns } from '../helpers/cluster-fabric.js';
import { ip, tc, tunOwner, type Json } from '../helpers/observe.js';
import { uniquePrefix, makeNetns as makeTestNetns } from '../helpers/names.js';
import { DEBIAN_PLUGINS, hostLocal, knitShimConf, leases, nftRuleset } from '../helpers/cni.js';
import { cmdline, ensureGuestImage, GUEST_HTTP_PORT } from '../fixtures/qemu.js';
import { domainXml, startLibvirtd, type Libvirtd } from '../fixtures/libvirt.js';
import { Cleanup } from '../fixtures/cleanup.js';

const P = uniquePrefix('lkv');
const NODE = `${P}n1`; // node 1 of the fabric (buildSegment names its nodes n1, n2)
const VM = `${P}vm`;
const POD = `${P}rc`;
const BLUE = 'blue';
const BLUE_IF = 'pod16477688c0e'; // KubeVirt's pod interface for network "blue" (sha256[:11])
const BLUE_TAP = 'tap16477688c0e';
const BRIDGE2 = `${P}b2`;
const SHIM = path.resolve('build', 'native', 'knit-cni');
const dir = mkdtempSync(path.join(os.tmpdir(), `knit-${P}`));
// clusterDaemons names node 1's knit (instance, bridge, dirs) after the prefix and the node.
const opts = { prefix: `${P.slice(0, -1)}n1` };
const SEG = 241;
const BLOCKS = [{ pod4: '10.234.25.0/24', pod6: 'fd00:234:25::/64' }, { pod4: '10.234.27.0/24', pod6: 'fd00:234:27::/64' }];
/** knit's network on every node, each with its own bridge and its block of the node map. */
const clusterNet = (bridge: string) => ({ name: `${opts.prefix}net`, mode: 'bridge', bridge, ipv4: { subnet: 'node' }, ipv6: { subnet: 'node' }, crossNode: 'routes' });
let d: Daemon | undefined;
let d2: Daemon | undefined;
let fabric: FabricSegment | undefined;
// ava ends a hook's own teardowns when the hook ends: the fabric and the daemons live for the file.
const teardowns: (() => unknown)[] = [];
const file: Teardowns = { teardown: (fn) => void teardowns.push(fn) };

const inNode = (argv: string[]) => execFileSync('ip', ['netns', 'exec', NODE, ...argv], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const httpFrom = (netns: string, addr: string) =>
  execFileSync('ip', ['netns', 'exec', netns, 'python3', '-c', `import urllib.request; print(urllib.request.urlopen("http://${addr}:${GUEST_HTTP_PORT}/", timeout=10).read().decode().strip())`], { encoding: 'utf8' }).trim();
const pings = (netns: string, addr: string) => [1, 2, 3, 4, 5].some(() => pingFrom(netns, addr));

/** What a launcher must find unchanged on a tap it was handed (its open sets carrier, queues
 * and the vnet header per fd; none of those is the device's configuration). */
function tapConfig(dev: string) {
  const [l] = ip(VM, 'link', 'show', 'dev', dev);
  const info = l.linkinfo.info_data;
  return {
    name: l.ifname, mac: l.address, mtu: l.mtu, alias: l.ifalias, master: l.master, up: l.flags.includes('UP'),
    type: info.type, persist: info.persist, multiQueue: info.multi_queue, ...tunOwner(VM, dev),
    filters: JSON.stringify(tc(VM, 'filter', 'show', 'dev', dev, 'ingress')),
  };
}

/** A CNI plugin exec'd as Multus execs it, from the node's netns. */
function cni(plugin: string, command: string, env: { id: string; ifname: string; args?: string }, config: object) {
  const r = spawnSync('ip', ['netns', 'exec', NODE, plugin], {
    input: JSON.stringify(config), encoding: 'utf8',
    env: { PATH: process.env.PATH, CNI_COMMAND: command, CNI_CONTAINERID: env.id, CNI_NETNS: `/run/netns/${VM}`, CNI_IFNAME: env.ifname, CNI_ARGS: env.args ?? '', CNI_PATH: DEBIAN_PLUGINS },
  });
  if (r.status !== 0) throw new Error(`${path.basename(plugin)} ${command} ${env.ifname}: exit ${r.status}: ${r.stdout} ${r.stderr}`);
  return r.stdout.trim() ? JSON.parse(r.stdout) : undefined;
}

const blueConf = { cniVersion: '1.0.0', name: BLUE, type: 'bridge', bridge: BRIDGE2, isGateway: true, ipam: hostLocal(path.join(dir, 'ipam'), '10.234.26.0/24', '10.234.26.1') };

test.before(async () => {
  fabric = buildSegment(file, P, SEG, 2, BLOCKS);
  const daemons = clusterDaemons(file, fabric);
  d = await daemons.start(fabric.nodes[0], clusterNet(`${opts.prefix}br`));
  d2 = await daemons.start(fabric.nodes[1], clusterNet(`${P.slice(0, -1)}n2br`));
});

test.after.always(async () => {
  // Last made, first ended: the daemons (by PID, their dirs), then the node and fabric netns.
  for (const fn of teardowns.reverse()) await fn();
  removeNetns(VM);
  removeNetns(POD);
  removeNetns(NODE);
  rmSync(dir, { recursive: true, force: true });
});

test.serial('libvirt runs the VMI on knit\'s taps: tap0 (2 queues) and a secondary network\'s hashed tap; the guest takes both addresses by DHCP and answers the node, a runc pod and a runc pod on a second node of the cluster; teardown leaves nothing', async (t) => {
  // libvirtd's capability probe and a TCG boot take minutes on a busy 2-core machine: past
  // ava's 120 s without a result, which ends the worker before any teardown or after hook runs.
  t.timeout(600_000);
  const cleanup = new Cleanup();
  t.teardown(() => cleanup.run());
  makeNetns(VM);
  const id = VM;
  const k8sArgs = `IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=virt-launcher-vmi-${P.slice(0, -1)};K8S_POD_INFRA_CONTAINER_ID=${id}`;
  const knitConf = (extra: object) => knitShimConf(opts.prefix, d!.dir, extra);

  // 1. The pod network: knit-cni is the network's CNI; the pod's annotations ask for KubeVirt's tap binding with two queues.
  const annotations = { 'knit.dev/runtime': 'kubevirt', 'knit.dev/binding': JSON.stringify({ binding: 'tap', queues: '2' }) };
  const primary = cni(SHIM, 'ADD', { id, ifname: 'eth0', args: k8sArgs }, knitConf({ runtimeConfig: { 'io.kubernetes.cri.pod-annotations': annotations } }));
  const podIp = primary.ips.find((i: Json) => !i.address.includes(':')).address.split('/')[0];
  t.regex(podIp, /^10\.234\.25\.\d+$/);
  // 2. Network "blue": Debian's bridge plugin makes the pod interface under KubeVirt's hashed name.
  cleanup.defer('blue DEL', async () => { try { cni(path.join(DEBIAN_PLUGINS, 'bridge'), 'DEL', { id, ifname: BLUE_IF }, blueConf); } catch { /* done below */ } });
  const blue = cni(path.join(DEBIAN_PLUGINS, 'bridge'), 'ADD', { id, ifname: BLUE_IF, args: k8sArgs }, blueConf);
  const blueIp = blue.ips[0].address.split('/')[0];
  // 3. The binding's own NAD, after it: knit-cni with cni-arg logicNetworkName (Multus passes it as args.cni).
  const bound = cni(SHIM, 'ADD', { id, ifname: 'net1', args: k8sArgs }, knitConf({ name: 'knit-tap-binding', args: { cni: { logicNetworkName: BLUE } } }));
  t.is(bound.interfaces.find((i: Json) => i.sandbox)?.name, BLUE_TAP);

  // The taps as virt-launcher expects them: names, 107:107 (from sysfs, as numbers), persistent, queues.
  const eth0 = ip(VM, 'link', 'show', 'dev', 'eth0')[0];
  const blueIf = ip(VM, 'link', 'show', 'dev', BLUE_IF)[0];
  for (const tap of ['tap0', BLUE_TAP]) {
    t.like(tapConfig(tap), { type: 'tap', persist: true, user: 107, group: 107, up: true }, tap);
  }
  t.true(tapConfig('tap0').multiQueue);
  t.false(tapConfig(BLUE_TAP).multiQueue);
  t.is(tapConfig('tap0').mtu, eth0.mtu);
  t.is(tapConfig(BLUE_TAP).mtu, blueIf.mtu);
  const before = { tap0: tapConfig('tap0'), blue: tapConfig(BLUE_TAP) };

  // 4. libvirtd as virt-launcher runs it, the domain as KubeVirt's converter writes it.
  const image = await ensureGuestImage();
  let libvirt: Libvirtd | undefined = await startLibvirtd(VM, P.slice(0, -1));
  cleanup.defer('stop libvirtd', () => libvirt?.stop());
  const serial = path.join(libvirt.dir, 'serial.log');
  const xml = path.join(libvirt.dir, 'vmi.xml');
  writeFileSync(xml, domainXml({
    name: `${P}vmi`, vcpus: 2, kernel: image.kernel, initrd: image.initrd, serial,
    cmdline: cmdline({ net: { dhcp: true, ping: ['10.234.25.1', '10.234.26.1'] } }).join(' '),
    nics: [
      { tap: 'tap0', mac: eth0.address, mtu: eth0.mtu, queues: 2, network: 'default' },
      { tap: BLUE_TAP, mac: blueIf.address, mtu: blueIf.mtu, queues: 1, network: BLUE },
    ],
  }));
  libvirt.virsh('define', xml);
  libvirt.virsh('start', `${P}vmi`);
  t.regex(libvirt.virsh('domiflist', `${P}vmi`), new RegExp(`tap0\\s+ethernet\\s+-\\s+virtio\\s+${eth0.address}`));
  const log = () => (existsSync(serial) ? readFileSync(serial, 'utf8') : '');
  // Until the guest is ready, or its domain stops (a guest that panics is destroyed: on_reboot).
  const running = () => libvirt!.virsh('domstate', `${P}vmi`).trim() === 'running';
  await eventually(() => /KNIT-READY/.test(log()) || !running(), 'the guest booted and took its leases', 100_000).catch(() => undefined);
  t.regex(log(), /KNIT-READY/, log().slice(-2000));

  // The leases knit served, as the guest applied them.
  const lease = (mac: string) => new RegExp(`KNIT-DHCP (\\S+) mac=${mac} ip=(\\S+) router=(\\S*) mtu=(\\d+) routes=(\\S*) dns=(\\S*) search=(\\S*) hostname=(\\S*)`).exec(log());
  const l0 = lease(eth0.address);
  const l1 = lease(blueIf.address);
  t.truthy(l0, `no lease for eth0:\n${log().slice(-2000)}`);
  t.truthy(l1, `no lease for ${BLUE}:\n${log().slice(-2000)}`);
  t.is(l0?.[2], `${podIp}/24`);
  t.is(l0?.[3], '10.234.25.1');
  t.is(Number(l0?.[4]), eth0.mtu);
  t.is(l0?.[8], `virt-launcher-vmi-${P.slice(0, -1)}`, 'the hostname is the pod name');
  t.is(l1?.[2], `${blueIp}/24`);
  t.is(l1?.[3], '10.234.26.1');
  t.notRegex(log(), /KNIT-DHCP-FAIL/);
  // IPv6 on knit's network: the guest kernel's router solicitation got knit's RA, whose router is
  // the network bridge's own link-local address, and the pod's prefix on-link.
  const bridgeAddrs = inNode(['ip', '-j', '-6', 'addr', 'show', 'dev', `${opts.prefix}br`]);
  const bridgeLl = JSON.parse(bridgeAddrs)[0]?.addr_info?.find((a: Json) => a.scope === 'link')?.local;
  t.truthy(bridgeLl, `the network bridge has a link-local address: ${bridgeAddrs}`);
  t.regex(log(), new RegExp(`KNIT-RA6 ${bridgeLl} eth0`), 'the default route from knit\'s RA goes via the bridge');
  t.regex(log(), /KNIT-RA6-PREFIX fd00:234:25::\/64 eth0/);

  // Reachable from the node, on both networks, by ping and TCP.
  t.true(pings(NODE, podIp), `the node could not ping the guest at ${podIp}`);
  t.true(pings(NODE, blueIp), `the node could not ping the guest at ${blueIp}`);
  t.regex(httpFrom(NODE, podIp), /^knit-guest /);
  t.regex(httpFrom(NODE, blueIp), /^knit-guest /);
  // ... and from a runc pod on the same knit network.
  makeNetns(POD);
  await d!.call('Attach', { sandbox_id: POD, netns_path: `/run/netns/${POD}`, interfaces: [{ name: 'eth0' }] });
  t.true(pings(POD, podIp), 'the runc pod could not ping the guest');
  t.regex(httpFrom(POD, podIp), /^knit-guest /);
  // ... and from a runc pod on node 2 of the cluster, across the fabric. The kernel's view first:
  // each node routes the other's blocks via the other's fabric address, with knit's protocol.
  const [n1, n2] = fabric!.nodes;
  const gateway = (ns: string, family: '-4' | '-6', dst: string) => JSON.parse(sh(ns, 'ip', '-j', family, 'route', 'show', 'proto', '201')).find((r: Json) => r.dst === dst)?.gateway;
  const crossRoutes = () => ({ n1to2: gateway(n1.ns, '-4', n2.pod4), n2to1: gateway(n2.ns, '-4', n1.pod4), n1to2v6: gateway(n1.ns, '-6', n2.pod6), n2to1v6: gateway(n2.ns, '-6', n1.pod6) });
  const expected = { n1to2: n2.ip4, n2to1: n1.ip4, n1to2v6: n2.ip6, n2to1v6: n1.ip6 };
  await eventually(() => JSON.stringify(crossRoutes()) === JSON.stringify(expected), 'each node routes the other\'s blocks', 15_000).catch(() => undefined);
  t.deepEqual(crossRoutes(), expected, 'ip route show proto 201: each node\'s blocks via its fabric address');
  const peer = (await d!.call('NodeStatus', {})).networks.find((n: Json) => n.name === `${opts.prefix}net`)?.peers.find((p: Json) => p.node === n2.name);
  t.true(peer?.in_place, `knit on node 1 has node 2's routes in place: ${JSON.stringify(peer)}`);
  const pod2 = makeTestNetns(t, P, 'q2');
  const pod2Id = `${P}q2`;
  const pod2Ip = (await d2!.call('Attach', runcAttachReq(pod2Id, pod2.path))).result.ips.find((i: Json) => !i.address.includes(':')).address.split('/')[0];
  t.regex(pod2Ip, /^10\.234\.27\.\d+$/, 'the pod on node 2 has an address of node 2\'s block');
  // The guest's default route is the router of whichever lease it bound first, so its answers
  // may leave by blue; node 1 forwards them on (blue's bridge plugin, isGateway, turns on IPv4
  // forwarding). What the guest itself starts towards node 2 follows that route too, so this
  // test asks only for answers.
  t.true(pings(pod2.name, podIp), `the runc pod on node 2 (${pod2Ip}) could not ping the guest at ${podIp}`);
  t.regex(httpFrom(pod2.name, podIp), /^knit-guest /);
  const verdict = await eventually(() => /KNIT-PING-(OK|FAIL) 10\.234\.25\.1/.exec(log()), 'guest pinged its gateway', 30_000);
  t.is(verdict?.[1], 'OK', 'the guest reaches its gateway');

  // knit's own observer agrees with the kernel (the taps, the redirects on the pod interfaces).
  const checked = await d!.call('Check', { sandbox_id: id });
  t.true(checked.ok, JSON.stringify(checked.differences));

  // libvirt changed nothing on the taps it opened by name.
  t.deepEqual({ tap0: tapConfig('tap0'), blue: tapConfig(BLUE_TAP) }, before);
  t.regex(libvirt.virsh('dumpxml', `${P}vmi`), new RegExp(`<target dev='${BLUE_TAP}' managed='no'/>`));

  // Teardown as virt-launcher's end and the kubelet's CNI DEL do it.
  libvirt.virsh('destroy', `${P}vmi`);
  libvirt.virsh('undefine', `${P}vmi`);
  t.deepEqual({ tap0: tapConfig('tap0'), blue: tapConfig(BLUE_TAP) }, before, 'managed=\'no\': libvirt leaves the taps as they were');
  const qemuPids = libvirt.processes().filter((pid) => pid !== libvirt!.pid);
  t.deepEqual(qemuPids, [], 'no QEMU left after destroy');
  await libvirt.stop();
  t.deepEqual(libvirt.processes(), [], 'no libvirt process left');
  libvirt = undefined;
  await d!.call('Detach', { sandbox_id: POD });
  await d2!.call('Detach', { sandbox_id: pod2Id });
  cni(SHIM, 'DEL', { id, ifname: 'net1', args: k8sArgs }, knitConf({ name: 'knit-tap-binding', args: { cni: { logicNetworkName: BLUE } } }));
  cni(path.join(DEBIAN_PLUGINS, 'bridge'), 'DEL', { id, ifname: BLUE_IF }, blueConf);
  cni(SHIM, 'DEL', { id, ifname: 'eth0', args: k8sArgs }, knitConf({}));
  const leftovers = () => ({
    links: ip(VM, 'link', 'show').map((l: Json) => l.ifname).filter((n: string) => n !== 'lo'),
    qdiscs: tc(VM, 'qdisc', 'show').filter((q: Json) => q.dev !== 'lo' && q.kind !== 'noqueue').map((q: Json) => `${q.kind} on ${q.dev}`),
    nft: nftRuleset(VM).filter((x) => x.table).map((x) => `${x.table.family} ${x.table.name}`),
    // Each node keeps its fabric link and its networks' bridges; a pod on node 2, only its loopback.
    nodeLinks: ip(NODE, 'link', 'show').map((l: Json) => l.ifname).filter((n: string) => !['lo', 'eth0', `${opts.prefix}br`, BRIDGE2].includes(n)),
    leases: leases(path.join(dir, 'ipam'), BLUE),
    node2Links: ip(n2.ns, 'link', 'show').map((l: Json) => l.ifname).filter((n: string) => !['lo', 'eth0', `${P.slice(0, -1)}n2br`].includes(n)),
    pod2Links: ip(pod2.name, 'link', 'show').map((l: Json) => l.ifname).filter((n: string) => n !== 'lo'),
  });
  const nothing = { links: [], qdiscs: [], nft: [], nodeLinks: [], leases: [], node2Links: [], pod2Links: [] };
  await eventually(() => JSON.stringify(leftovers()) === JSON.stringify(nothing), 'everything gone', 15_000).catch(() => undefined);
  t.deepEqual(leftovers(), nothing);
  removeNetns(VM);
});
