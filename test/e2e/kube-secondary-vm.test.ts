// KubeVirt with knit alone: no Multus, no virt-handler. A launcher-shaped pod carries the
// networks annotation virt-controller writes for a VMI with the pod network and a secondary
// network "blue", both bound with the knit-tap binding plugin (deploy/kubevirt: the KubeVirt CR's
// binding with networkAttachmentDefinition default/knit-tap-binding, and that NAD), quoted below
// from KubeVirt's source. The real kubelet starts it; knit makes eth0, blue's pod interface under
// KubeVirt's hashed name (Debian's bridge plugin, a NAD), and for each binding entry the tap
// virt-launcher looks for: tap0 on eth0, tap16477688c0e on pod16477688c0e. network-status maps
// blue to its pod interface as KubeVirt reads it back. A QEMU guest (TCG) run in the pod's netns
// as virt-launcher runs it, one NIC per tap, takes both addresses by DHCP from knit and answers
// the node on each. Deleting the pod leaves nothing.
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { eventually, hostLinks, pingFrom } from '../helpers/daemon.js';
import { uniquePrefix } from '../helpers/names.js';
import { deploy, startSecondaryCluster, STATUS, type SecondaryCluster } from '../helpers/secondary-cluster.js';
import { fileScope } from '../fixtures/kube-cluster.js';
import { bootGuest } from '../fixtures/qemu.js';

const P = uniquePrefix('ksvm');
const BLUE_BRIDGE = `${P}b1`;
const BLUE_IF = 'pod16477688c0e'; // KubeVirt's pod interface for network "blue": "pod" + sha256("blue")[:11]
const BLUE_TAP = 'tap16477688c0e';
const scope = fileScope(test);
let c: SecondaryCluster;

/**
 * kubevirt pkg/network/multus/annotation.go, GenerateCNIAnnotationFromNameScheme, for networks
 * [{name: default, pod: {}}, {name: blue, multus: {networkName: blue}}] with interfaces bound to
 * the knit-tap plugin: for each network, its own entry if it is a secondary Multus network
 * (NewAnnotationData: name, namespace, interface = the hashed pod interface name, mac), then the
 * binding plugin's (newBindingPluginAnnotationData: the plugin's NAD with cni-args
 * {"logicNetworkName": <network>}); marshalled from []NetworkSelectionElement, whose CNIArgs has
 * no omitempty.
 */
const KUBEVIRT_ANNOTATION = JSON.stringify([
  { name: 'knit-tap-binding', namespace: 'default', 'cni-args': { logicNetworkName: 'default' } },
  { name: 'blue', namespace: 'default', interface: BLUE_IF, 'cni-args': null },
  { name: 'knit-tap-binding', namespace: 'default', 'cni-args': { logicNetworkName: 'blue' } },
]);

test.before(async () => {
  c = await startSecondaryCluster(scope, { prefix: P, clusterCidr: '10.191.0.0/16', subnet: '10.191.0.0/24', hostLinks: [BLUE_BRIDGE] });
  // The binding plugin's NAD as deploy/kubevirt ships it, and the secondary network.
  await c.cp.kubectl('apply', '-f', deploy('kubevirt/binding-nad.yaml'));
  // blue's bridge is made here with the node's address on it, as an operator's would be: with
  // isGateway the plugin would set the host-wide net.ipv4.ip_forward, in the machine's own netns.
  execFileSync('ip', ['link', 'add', BLUE_BRIDGE, 'type', 'bridge']);
  execFileSync('ip', ['addr', 'add', '10.192.1.1/24', 'dev', BLUE_BRIDGE]);
  execFileSync('ip', ['link', 'set', BLUE_BRIDGE, 'up']);
  await c.apply(c.nad('blue', { cniVersion: '1.0.0', name: 'blue', type: 'bridge', bridge: BLUE_BRIDGE, ipam: { type: 'host-local', dataDir: c.dataDir, ranges: [[{ subnet: '10.192.1.0/24' }]] } }));
});

test.serial('a launcher pod as virt-controller annotates it: eth0, blue\'s hashed pod interface and a tap for each binding entry; network-status maps blue to it; a QEMU guest takes both addresses by DHCP and answers on both; deleting the pod leaves nothing', async (t) => {
  t.timeout(900_000);
  const name = `virt-launcher-vmi-${P.slice(0, -1)}`;
  await c.apply(c.pod(name, KUBEVIRT_ANNOTATION, { metadata: { labels: { 'kubevirt.io': 'virt-launcher', 'vm.kubevirt.io/name': 'vmi' }, annotations: { 'kubevirt.io/domain': 'vmi' } } }));
  await c.ready(name);
  const rec = c.sandboxOf(name);
  const netns = rec.request.netns_path as string;
  const nsExec = (...argv: string[]) => execFileSync('nsenter', [`--net=${netns}`, ...argv], { encoding: 'utf8' });
  const links = JSON.parse(nsExec('ip', '-j', '-d', 'link', 'show')) as any[];
  const byName = new Map(links.map((l) => [l.ifname, l]));
  for (const n of ['eth0', BLUE_IF, 'tap0', BLUE_TAP]) t.true(byName.has(n), `${n} in the pod: ${[...byName.keys()].join(', ')}`);
  for (const tap of ['tap0', BLUE_TAP]) {
    t.is(byName.get(tap).linkinfo.info_kind, 'tun');
    // Owner and group as numbers, from a sysfs mounted in the pod's netns (as ip netns exec does).
    const ids = nsExec('unshare', '-m', 'sh', '-c', `mount -t sysfs none /sys && cat /sys/class/net/${tap}/owner /sys/class/net/${tap}/group`).trim().split('\n').map(Number);
    t.deepEqual(ids, [107, 107], `${tap} is the non-root launcher's`);
  }
  // The binding entries are named net1 and net3 (Multus's positions), their taps after the pod interfaces.
  t.deepEqual(c.recordOf(name).request.interfaces.map((i: any) => [i.name, i.attachment?.name ?? null, i.binding?.logicNetwork ?? null]), [
    ['eth0', null, null], [BLUE_IF, 'default/blue', null], ['net1', 'default/knit-tap-binding', 'default'], ['net3', 'default/knit-tap-binding', 'blue'],
  ]);

  // network-status as KubeVirt reads it back: blue is on pod16477688c0e.
  await eventually(async () => STATUS in (await c.annotationsOf(name)), 'network-status written', 60_000);
  const status = JSON.parse((await c.annotationsOf(name))[STATUS]!);
  t.deepEqual(status.filter((s: any) => s.name === 'default/blue').map((s: any) => s.interface), [BLUE_IF]);
  t.true(status[0].default);

  // The guest: QEMU in the pod's netns, one NIC per tap with its pod interface's MAC, as
  // virt-launcher's domain has them (<target dev='tap…' managed='no'/>).
  const eth0 = byName.get('eth0');
  const blue = byName.get(BLUE_IF);
  const podIp = rec.result.ips.find((i: any) => rec.result.interfaces[i.interface].name === 'eth0').address.split('/')[0];
  const blueIp = JSON.parse(nsExec('ip', '-j', 'addr', 'show', 'dev', BLUE_IF))[0].addr_info.find((a: any) => a.family === 'inet').local;
  const guest = await bootGuest({ name: P, netnsPath: netns, tap: { ifname: 'tap0' }, mac: eth0.address, moreTaps: [{ ifname: BLUE_TAP, mac: blue.address }], net: { dhcp: true } });
  t.teardown(() => guest.stop());
  await guest.waitFor(/KNIT-READY/, 300_000);
  t.regex(guest.serial(), new RegExp(`KNIT-DHCP eth0 mac=${eth0.address} ip=${podIp.replace(/\./g, '\\.')}/24 `));
  t.regex(guest.serial(), new RegExp(`KNIT-DHCP eth1 mac=${blue.address} ip=${blueIp.replace(/\./g, '\\.')}/24 `));
  // The guest holds both addresses: the node reaches it on each.
  t.true([1, 2, 3, 4, 5].some(() => pingFrom(undefined, podIp)), `the guest answers on the pod IP ${podIp}`);
  t.true([1, 2, 3, 4, 5].some(() => pingFrom(undefined, blueIp)), `the guest answers on blue ${blueIp}`);
  await guest.stop();

  await c.cp.kubectl('delete', 'pod', '-n', c.ns, name, '--wait=true', '--timeout=120s');
  await eventually(() => c.sandboxOf(name) === undefined, 'knit detached the launcher pod', 60_000);
  t.deepEqual(c.leases('blue'), []);
  t.deepEqual(hostLinks().filter((l) => l.ifalias?.includes(`sandbox=${rec.request.sandbox_id};`)).map((l) => l.ifname), []);
  t.deepEqual(JSON.parse(execFileSync('ip', ['-j', 'link', 'show', 'master', BLUE_BRIDGE], { encoding: 'utf8' }) || '[]'), []);
});
