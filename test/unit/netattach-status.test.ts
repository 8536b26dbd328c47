// network-status as Multus writes it: the example of Multus's quickstart (docs/quickstart.md,
// "Network Status Annotations") reproduced byte for byte from the CNI results behind it, and
// the rules of network-attachment-definition-client's CreateNetworkStatuses (v1.7) one by one.
import test from 'ava';
import { formatNetworkStatus, networkStatuses } from '../../src/netattach/status.js';

/** A block quoted from a doc, without the indentation it has there. */
const dedent = (text: string) => {
  const lines = text.replace(/^\n/, '').replace(/\n\s*$/, '').split('\n');
  const indent = Math.min(...lines.filter((l) => l.trim()).map((l) => l.match(/^ */)![0].length));
  return lines.map((l) => l.slice(indent)).join('\n');
};

test('the quickstart\'s example, byte for byte: the cluster network (default) and macvlan-conf on net1', (t) => {
  // docs/quickstart.md, as `kubectl describe pod samplepod` shows the annotation.
  const quoted = dedent(`
                      [{
                          "name": "cbr0",
                          "ips": [
                              "10.244.1.73"
                          ],
                          "default": true,
                          "dns": {}
                      },{
                          "name": "macvlan-conf",
                          "interface": "net1",
                          "ips": [
                              "192.168.1.205"
                          ],
                          "mac": "86:1d:96:ff:55:0d",
                          "dns": {}
                      }]`);
  // flannel's result names its host-side bridge only; macvlan's names the pod interface.
  const cluster = { cniVersion: '0.3.1', interfaces: [{ name: 'cni0', mac: '0a:58:0a:f4:01:01' }], ips: [{ version: '4', address: '10.244.1.73/24', gateway: '10.244.1.1', interface: 0 }], dns: {} };
  const macvlan = { cniVersion: '0.3.0', interfaces: [{ name: 'net1', mac: '86:1d:96:ff:55:0d', sandbox: '/proc/4123/ns/net' }], ips: [{ version: '4', address: '192.168.1.205/24', interface: 0 }], dns: {} };
  const text = formatNetworkStatus([...networkStatuses(cluster, 'cbr0', true), ...networkStatuses(macvlan, 'macvlan-conf', false)]);
  t.is(text, quoted);
});

test('a result with several interfaces gives one entry per pod interface, each with its addresses; the default network marks the one with a gateway address', (t) => {
  // The bridge plugin's result: the bridge, the host veth end, the pod's end.
  const bridge = {
    interfaces: [{ name: 'cni0', mac: '0a:00:00:00:00:01' }, { name: 'veth1', mac: '0a:00:00:00:00:02' }, { name: 'eth0', mac: '0a:00:00:00:00:03', mtu: 1450, sandbox: '/var/run/netns/p' }],
    ips: [{ address: '10.1.0.5/24', gateway: '10.1.0.1', interface: 2 }, { address: 'FD00:0:0::0005/64', interface: 2 }],
    routes: [{ dst: '0.0.0.0/0', gw: '10.1.0.1' }, { dst: '10.2.0.0/16', gw: '10.1.0.1' }],
    dns: { nameservers: ['10.96.0.10'], search: ['svc.cluster.local'] },
  };
  t.deepEqual(networkStatuses(bridge, 'kube-system/pods', true), [{
    name: 'kube-system/pods', interface: 'eth0', ips: ['10.1.0.5', 'fd00::5'], mac: '0a:00:00:00:00:03', mtu: 1450, default: true,
    dns: { nameservers: ['10.96.0.10'], search: ['svc.cluster.local'] }, gateway: ['10.1.0.1'],
  }]);
  // Two pod interfaces: addresses go by index; one naming no interface goes to the last; the
  // first with a gateway address is the default one.
  const two = {
    interfaces: [{ name: 'a0', sandbox: '/ns' }, { name: 'host' }, { name: 'b0', sandbox: '/ns' }],
    ips: [{ address: '10.0.0.2/24', interface: 0 }, { address: '10.0.1.2/24', gateway: '10.0.1.1', interface: 2 }, { address: '10.0.9.9/24' }],
  };
  const [a, b] = networkStatuses(two, 'ns/two', true);
  t.deepEqual([a!.interface, a!.ips, a!.default], ['a0', ['10.0.0.2'], undefined]);
  t.deepEqual([b!.interface, b!.ips, b!.default], ['b0', ['10.0.1.2', '10.0.9.9'], true]);
  // Without a gateway address the first pod interface is the default one; a secondary network marks none.
  t.true(networkStatuses({ ...two, ips: [] }, 'n', true)[0]!.default);
  t.false(networkStatuses(two, 'n', false).some((s) => s.default));
});

test('a default route without a gateway lists no gateway (Multus writes Go\'s "<nil>" there); a result with no interface at all gives no entry', (t) => {
  const r = { interfaces: [{ name: 'net1', sandbox: '/ns' }], ips: [{ address: '192.168.1.205/24' }], routes: [{ dst: '0.0.0.0/0' }, { dst: '::/0', gw: 'fd00::1' }] };
  t.deepEqual(networkStatuses(r, 'n', false)[0]!.gateway, ['fd00::1']);
  t.deepEqual(networkStatuses({ interfaces: [], ips: [{ address: '10.0.0.1/24' }] }, 'n', true), []);
});

test('device-info goes to every entry of its network, in the NPWG device-info spec\'s shape; Go\'s HTML-safe escaping is kept', (t) => {
  const vf = { interfaces: [{ name: 'net2', mac: '02:00:00:00:00:09', sandbox: '/ns' }], ips: [] };
  const text = formatNetworkStatus(networkStatuses(vf, 'sriov<&>', false, { type: 'pci', version: '1.1.0', pci: { 'pci-address': '0000:3b:02.0' } }));
  t.is(text, [
    '[{',
    '    "name": "sriov\\u003c\\u0026\\u003e",',
    '    "interface": "net2",',
    '    "mac": "02:00:00:00:00:09",',
    '    "dns": {},',
    '    "device-info": {',
    '        "type": "pci",',
    '        "version": "1.1.0",',
    '        "pci": {',
    '            "pci-address": "0000:3b:02.0"',
    '        }',
    '    }',
    '}]',
  ].join('\n'));
  t.deepEqual(JSON.parse(text)[0].name, 'sriov<&>');
});

test('no network: the annotation is an empty list', (t) => {
  t.is(formatNetworkStatus([]), '[]');
});
