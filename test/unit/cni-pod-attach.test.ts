// What the ADD of a pod's primary interface answers when knit attached the pod's networks with
// it (the primary's part and its DRA devices, as Multus answers the cluster network's result),
// and the pod's network-status built from the same result: one entry per network in the plan's
// order, each from the part its own CNI ADD would have answered, DRA devices last with their PCI
// address as device-info.
import test from 'ava';
import type { AttachRequest, AttachResult } from '../../src/base/types.js';
import { podNetworkStatus } from '../../src/cni-frontend/pod-attach.js';
import { primaryAnswer } from '../../src/cni-frontend/result-parts.js';
import type { PodPlan } from '../../src/cni-frontend/pod-networks.js';

const NS = '/run/netns/p';
const result: AttachResult = {
  sandboxId: 's', netnsPath: NS, runtime: 'runc',
  interfaces: [
    { name: 'kn1', kind: 'veth', mac: '0a:00:00:00:00:01' }, // eth0's host end
    { name: 'eth0', kind: 'veth', mac: '0a:58:0a:00:00:05', mtu: 1500, sandbox: NS },
    { name: 'blue', kind: 'cni', mac: '0a:00:00:00:01:01' }, // the bridge plugin's bridge
    { name: 'veth9', kind: 'cni', mac: '0a:00:00:00:01:02' },
    { name: 'net1', kind: 'cni', mac: '0a:00:00:00:01:03', sandbox: NS },
    { name: 'net2', kind: 'vf', mac: '02:00:00:00:00:09', sandbox: NS, pciId: '0000:3b:02.0' },
  ],
  ips: [
    { address: '10.0.0.5/24', gateway: '10.0.0.1', family: 4, interface: 1 },
    { address: '10.1.0.7/24', family: 4, interface: 4 },
    { address: '192.0.2.10/24', family: 4, interface: 5 },
  ],
  routes: [{ dst: '0.0.0.0/0', gw: '10.0.0.1' }],
};
const req: AttachRequest = {
  sandboxId: 's', netnsPath: NS, runtime: 'runc', portMappings: [], annotations: {},
  labels: { 'dra.knit.dev/interfaces': 'net2' },
  interfaces: [
    { name: 'eth0' },
    { name: 'net1', attachment: { name: 'default/blue', chain: { conflist: '{}', args: [], capabilityArgs: {}, pluginDirs: [], cacheDir: '', timeoutMs: 1 } } },
    { name: 'net2', device: { pool: 'node-a', name: 'pci-0000-3b-02-0' } },
  ],
};
const plan: PodPlan = { interfaces: [{ wire: { name: 'net1' }, attachment: req.interfaces[1]!.attachment!, source: 'annotations[…][0]', later: false }] };

test('the ADD answers the primary\'s part and the DRA device, not the annotation\'s networks', (t) => {
  const a = primaryAnswer(result, req);
  t.deepEqual(a.interfaces.map((i) => i.name), ['kn1', 'eth0', 'net2']);
  t.deepEqual(a.ips.map((ip) => [ip.address, a.interfaces[ip.interface]!.name]), [['10.0.0.5/24', 'eth0'], ['192.0.2.10/24', 'net2']]);
  t.deepEqual(a.routes, [{ dst: '0.0.0.0/0', gw: '10.0.0.1' }], 'eth0\'s default route, through its gateway');
});

test('network-status: the primary (default), each network of the plan, then the DRA device with its PCI address', (t) => {
  const status = JSON.parse(podNetworkStatus(result, req, 'pods', plan));
  t.deepEqual(status, [
    { name: 'pods', interface: 'eth0', ips: ['10.0.0.5'], mac: '0a:58:0a:00:00:05', mtu: 1500, default: true, dns: {}, gateway: ['10.0.0.1'] },
    { name: 'default/blue', interface: 'net1', ips: ['10.1.0.7'], mac: '0a:00:00:00:01:03', dns: {} },
    { name: 'node-a/pci-0000-3b-02-0', interface: 'net2', ips: ['192.0.2.10'], mac: '02:00:00:00:00:09', dns: {}, 'device-info': { type: 'pci', version: '1.1.0', pci: { 'pci-address': '0000:3b:02.0' } } },
  ]);
  // A route through a gateway goes with the interface on the gateway's subnet.
  const own = { ...result, routes: [...result.routes, { dst: '10.9.0.0/16', gw: '10.1.0.1' }, { dst: '0.0.0.0/0', gw: '10.1.0.1' }] };
  const withOwn = JSON.parse(podNetworkStatus(own, req, 'pods', plan));
  t.deepEqual(withOwn.map((s: any) => s.gateway), [['10.0.0.1'], ['10.1.0.1'], undefined]);
});
