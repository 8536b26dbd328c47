// Devices through a real daemon's Attach/Detach, netdev mode: the VF's netdev is renamed and
// moved into the pod netns in one request, configured there, and given back exactly. No SR-IOV
// hardware here: veth ends stand in for the VFs' netdevs (real renames and netns moves, traffic
// through them to a fabric netns) and the PCI side is a simulated sysfs (device-standin.ts).
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { execFileSync } from 'node:child_process';
import { status } from '@grpc/grpc-js';
import { fromStruct, toStruct } from '../../src/api/struct.js';
import {
  startDaemon, cleanupDaemon, makeNetns, removeNetns, ipJson, pingFrom, removeLinkQuietly, type Daemon, type DaemonOptions,
} from '../helpers/daemon.js';
import { hostLink, linkIn, makeStandIn, renameInSysfs, simulateReturnedVf, vfState, type StandIn } from './device-standin.js';

interface Env { d: Daemon; s: StandIn; pod: string; podPath: string; o: DaemonOptions }

/** A daemon whose sysfs is the stand-in's, a pod netns, and a fabric peer at 192.0.2.1. */
async function setUp(t: ExecutionContext, prefix: string, subnet: string, vfs = 1): Promise<Env> {
  const s = await makeStandIn(t, prefix, vfs);
  execFileSync('ip', ['-n', s.fabric, 'addr', 'add', '192.0.2.1/24', 'dev', s.vfs[0].peer]);
  const pod = `${prefix}-pod`;
  const podPath = makeNetns(pod);
  const o: DaemonOptions = { prefix, subnet, config: { sysfsRoot: s.node.root } };
  const env = { s, pod, podPath, o } as Env;
  t.teardown(async () => {
    await cleanupDaemon(env.d, o);
    removeNetns(pod);
  });
  env.d = await startDaemon(o);
  return env;
}

const deviceReq = (id: string, podPath: string, device: Record<string, unknown>, iface: Record<string, unknown> = {}) => ({
  sandbox_id: id,
  netns_path: podPath,
  runtime: 'RUNC',
  interfaces: [{
    name: 'net1',
    ...iface,
    device: { ...device, parameters: device.parameters ? toStruct(device.parameters as Record<string, unknown>) : null },
  }],
});

const PARAMS = { addresses: ['192.0.2.10/24', '2001:db8:5a::10/64'], routes: [{ dst: '198.51.100.0/24', gw: '192.0.2.1' }] };

test('attach moves the VF netdev into the pod renamed, with MAC, MTU, addresses and routes; detach puts it back exactly (simulated VF: a veth end stands in for its netdev)', async (t) => {
  const { d, s, pod, podPath } = await setUp(t, 'kdv1', '10.237.1.0/24');
  const vf = s.vfs[0];
  const before = vfState(vf.name);
  t.like(before, { name: vf.name, mac: vf.mac, mtu: 1400, up: true });

  const { result } = await d.call('Attach', deviceReq('kdv1-sb', podPath, { bdf: vf.bdf, parameters: PARAMS }, { mac: '02:5a:00:00:00:10', mtu: 1300 }));
  // Independent observer: gone from the host, in the pod under its new name.
  t.is(hostLink(vf.name), undefined, 'the VF netdev left the host');
  const inPod = linkIn(pod, 'net1');
  t.like(inPod, { address: '02:5a:00:00:00:10', mtu: 1300, ifindex: vf.ifindex });
  t.true(inPod.flags.includes('UP'));
  const addrs = ipJson(['addr', 'show', 'dev', 'net1'], pod)[0].addr_info.filter((a: any) => a.scope === 'global').map((a: any) => `${a.local}/${a.prefixlen}`);
  t.deepEqual(addrs.sort(), ['192.0.2.10/24', '2001:db8:5a::10/64']);
  t.like(ipJson(['route', 'show', '198.51.100.0/24'], pod)[0], { gateway: '192.0.2.1', dev: 'net1' });
  t.true(pingFrom(pod, '192.0.2.1'), 'traffic crosses the moved netdev to the fabric');

  // What knit answers: the interface with its PCI address and KEP-4817 networkData.
  const [ifc] = result.interfaces;
  t.like(ifc, { name: 'net1', kind: 'vf', pci_id: vf.bdf, mac: '02:5a:00:00:00:10', mtu: 1300, sandbox: podPath });
  t.like(fromStruct(ifc.handoff), {
    model: 'netdev', hostInterfaceName: vf.name,
    networkData: { interfaceName: 'net1', ips: ['192.0.2.10/24', '2001:db8:5a::10/64'], hardwareAddress: '02:5a:00:00:00:10' },
  });
  t.deepEqual(result.ips.map((i: any) => i.address), ['192.0.2.10/24', '2001:db8:5a::10/64']);
  const check = await d.call('Check', { sandbox_id: 'kdv1-sb' });
  t.true(check.ok, JSON.stringify(check.differences));
  // A device interface takes no pool address.
  t.is(Number((await d.call('NodeStatus', {})).networks[0].pools[0].used), 0);

  await d.call('Detach', { sandbox_id: 'kdv1-sb' });
  t.deepEqual(vfState(vf.name), before, 'name, MAC, MTU, up state and ifindex as before');
  t.is(linkIn(pod, 'net1'), undefined);
  t.deepEqual(ipJson(['addr', 'show', 'dev', vf.name])[0].addr_info.filter((a: any) => a.scope === 'global'), [], 'no address came back with it');
  t.like(linkIn(s.fabric, vf.peer), { operstate: 'UP' }, 'its fabric side was never touched');
  t.is((await d.call('List', {})).sandboxes.length, 0);
});

test('a VF named by its host netdev and by a DRA claim result; a second sandbox asking for a held VF is refused naming the holder (simulated VF)', async (t) => {
  const { d, s, pod, podPath } = await setUp(t, 'kdv2', '10.237.2.0/24', 2);
  const pod2 = 'kdv2-pod2';
  const pod2Path = makeNetns(pod2);
  t.teardown(() => removeNetns(pod2));
  const [vf0, vf1] = s.vfs;
  await d.call('Attach', deviceReq('kdv2-a', podPath, { netdev: vf0.name }));
  const err = await t.throwsAsync(d.call('Attach', deviceReq('kdv2-b', pod2Path, { pool: 'node-1', device: 'pci-0000-5a-02-0', parameters: { interfaceName: 'rdma0' } })));
  t.is((err as any).code, status.FAILED_PRECONDITION);
  t.regex((err as any).details, /^interfaces\[0\]\.device: PCI device 0000:5a:02\.0 is held by sandbox kdv2-a; detach that sandbox first$/);
  t.truthy(linkIn(pod, 'net1'), 'the holder kept it');

  // The other VF by claim result, named by the parameters.
  const { result } = await d.call('Attach', deviceReq('kdv2-b', pod2Path, { pool: 'node-1', device: 'pci-0000-5a-02-1', parameters: { interfaceName: 'rdma0' } }));
  t.like(result.interfaces[0], { name: 'rdma0', pci_id: vf1.bdf });
  t.like(fromStruct(result.interfaces[0].handoff), { draDevice: { pool: 'node-1', device: 'pci-0000-5a-02-1' } });
  t.like(linkIn(pod2, 'rdma0'), { address: vf1.mac });

  await d.call('Detach', { sandbox_id: 'kdv2-a' });
  await d.call('Detach', { sandbox_id: 'kdv2-b' });
  t.like(vfState(vf0.name), { mac: vf0.mac, mtu: 1400, up: true, ifindex: vf0.ifindex });
  t.like(vfState(vf1.name), { mac: vf1.mac, mtu: 1400, up: true, ifindex: vf1.ifindex });
});

test('collision in the pod: its name is taken there, Attach is refused before any change (simulated VF)', async (t) => {
  const { d, s, pod, podPath } = await setUp(t, 'kdv3', '10.237.3.0/24');
  const vf = s.vfs[0];
  execFileSync('ip', ['-n', pod, 'link', 'add', 'net1', 'type', 'veth', 'peer', 'name', 'kdv3x']);
  const before = vfState(vf.name);
  const err = await t.throwsAsync(d.call('Attach', deviceReq('kdv3-sb', podPath, { bdf: vf.bdf })));
  t.is((err as any).code, status.ALREADY_EXISTS);
  t.regex((err as any).details, /^interfaces\[0\]\.name: netns .*kdv3-pod already has an interface named net1$/);
  t.deepEqual(vfState(vf.name), before);
  t.is((await d.call('List', {})).sandboxes.length, 0);
});

test('collision in the host: another device took the VF\'s name, so Detach stops and says so; once it is gone Detach completes (simulated VF)', async (t) => {
  const { d, s, pod, podPath } = await setUp(t, 'kdv4', '10.237.4.0/24');
  const vf = s.vfs[0];
  const before = vfState(vf.name);
  await d.call('Attach', deviceReq('kdv4-sb', podPath, { bdf: vf.bdf, parameters: PARAMS }));
  execFileSync('ip', ['link', 'add', vf.name, 'type', 'veth', 'peer', 'name', 'kdv4ix']);
  const intruder = hostLink(vf.name);
  const err = await t.throwsAsync(d.call('Detach', { sandbox_id: 'kdv4-sb' }));
  t.regex((err as any).details, /^detach of kdv4-sb is incomplete: .*kdv4vf0/);
  t.like(hostLink(vf.name), { ifindex: intruder.ifindex, address: intruder.address }, 'the intruder was not touched');
  t.is((await d.call('List', {})).sandboxes[0].state, 'DETACHING', 'the record stays until the VF is back');
  // The kernel moved it out of the pod (its pod name was free in the host) but could not
  // rename it: it waits in the host as net1, its addresses flushed by the move.
  t.is(linkIn(pod, 'net1'), undefined);
  t.like(hostLink('net1'), { ifindex: vf.ifindex });
  // (simulated sysfs) Real sysfs now lists net1 under the VF's PCI address.
  await renameInSysfs(s, vf.bdf, vf.name, 'net1');

  removeLinkQuietly(vf.name);
  await d.call('Detach', { sandbox_id: 'kdv4-sb' });
  t.deepEqual(vfState(vf.name), before);
  t.is(hostLink('net1'), undefined);
  t.is((await d.call('List', {})).sandboxes.length, 0);
});

test('the pod netns is deleted before Detach (simulated dev<ifindex>: a deleted netns destroys a veth, where a real VF comes back as dev<ifindex>; the test makes that device): Detach finds it by PCI address and renames it (simulated VF)', async (t) => {
  const { d, s, pod, podPath } = await setUp(t, 'kdv5', '10.237.5.0/24');
  const vf = s.vfs[0];
  const before = vfState(vf.name);
  await d.call('Attach', deviceReq('kdv5-sb', podPath, { bdf: vf.bdf, parameters: PARAMS }, { mac: '02:5a:00:00:00:55', mtu: 1280 }));
  removeNetns(pod);
  const returned = await simulateReturnedVf(t, s, vf, 'kdv5', '02:5a:00:00:00:55', 1280);
  t.like(vfState(returned), { mac: '02:5a:00:00:00:55', mtu: 1280 });

  await d.call('Detach', { sandbox_id: 'kdv5-sb' });
  t.is(hostLink(returned), undefined, `${returned} was renamed`);
  const after = vfState(vf.name);
  t.deepEqual({ ...after, ifindex: 0 }, { ...before, ifindex: 0 }, 'original name, MAC, MTU and up state');
  t.is((await d.call('List', {})).sandboxes.length, 0);
});
