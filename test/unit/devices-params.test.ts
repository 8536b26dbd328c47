// DRA opaque device parameters and device references: one case per field, errors naming it.
import test from 'ava';
import { KnitError } from '../../src/base/errors.js';
import { hasPfSettings, parseDeviceParameters } from '../../src/devices/params.js';
import { parseDeviceRef } from '../../src/devices/reference.js';

function rejects(t: import('ava').ExecutionContext, input: unknown, field: string, message: RegExp) {
  const err = t.throws(() => parseDeviceParameters(input), { instanceOf: KnitError }, JSON.stringify(input));
  t.is(err?.code, 'INVALID_ARGUMENT');
  t.is(err?.details.field, field, JSON.stringify(input));
  t.regex(err?.message ?? '', message);
  t.true(err?.message.startsWith(`${field}: `), err?.message);
}

test('empty parameters mean netdev mode with nothing set', (t) => {
  for (const empty of [undefined, null, {}]) {
    t.deepEqual(parseDeviceParameters(empty), { mode: 'netdev', addresses: [], routes: [] });
  }
});

test('a full parameter set is accepted and normalized', (t) => {
  const p = parseDeviceParameters({
    mode: 'netdev',
    interfaceName: 'net1',
    addresses: ['10.1.0.5/24', 'fd00::5/64'],
    routes: [{ dst: '10.2.0.0/16', gw: '10.1.0.1', mtu: 1400 }, { dst: 'default', gw: 'fd00::1' }],
    mtu: 9000,
    mac: '0C-42-A1-00-01-FF',
    vlan: 100,
    qos: 3,
    vlanProto: '802.1q',
    spoofchk: 'off',
    trust: true,
    minTxRate: 100,
    maxTxRate: 1000,
    linkState: 'enable',
  });
  t.deepEqual(p, {
    mode: 'netdev',
    interfaceName: 'net1',
    addresses: ['10.1.0.5/24', 'fd00::5/64'],
    routes: [{ dst: '10.2.0.0/16', gw: '10.1.0.1', mtu: 1400 }, { dst: 'default', gw: 'fd00::1' }],
    mtu: 9000,
    mac: '0c:42:a1:00:01:ff',
    vlan: 100,
    qos: 3,
    vlanProto: '802.1Q',
    spoofchk: false,
    trust: true,
    minTxRate: 100,
    maxTxRate: 1000,
    linkState: 'enable',
  });
  t.true(hasPfSettings(p));
  t.false(hasPfSettings(parseDeviceParameters({ interfaceName: 'net1', mtu: 1500 })));
  t.deepEqual(parseDeviceParameters({ mode: 'vfio', addresses: ['10.1.0.5/24'] }).mode, 'vfio');
});

test('each field is checked and the error names it', (t) => {
  rejects(t, [], 'parameters', /must be an object/);
  rejects(t, 'vfio', 'parameters', /must be an object/);
  rejects(t, { mode: 'dpdk' }, 'parameters.mode', /"dpdk" is not one of netdev, vfio/);
  rejects(t, { interfaceName: 'a-very-long-name0' }, 'parameters.interfaceName', /17 bytes long; Linux allows 15/);
  rejects(t, { interfaceName: 'eth/0' }, 'parameters.interfaceName', /contains '\/'/);
  rejects(t, { interfaceName: '' }, 'parameters.interfaceName', /must not be empty/);
  rejects(t, { interfaceName: 7 }, 'parameters.interfaceName', /7 is not a string/);
  rejects(t, { addresses: ['10.1.0.5'] }, 'parameters.addresses[0]', /not a CIDR \(address\/prefix\)/);
  rejects(t, { addresses: ['10.1.0.5/24', '10.1.0.300/24'] }, 'parameters.addresses[1]', /"10.1.0.300" is not an IP address/);
  rejects(t, { addresses: ['fd00::1/129'] }, 'parameters.addresses[0]', /prefix must be 0..128/);
  rejects(t, { addresses: ['10.1.0.5/24', '10.1.0.5/24'] }, 'parameters.addresses[1]', /already addresses\[0\]/);
  rejects(t, { addresses: '10.1.0.5/24' }, 'parameters.addresses', /expected array/);
  rejects(t, { routes: [{ dst: '10.2.0.0/16', gw: 'gateway' }] }, 'parameters.routes[0].gw', /"gateway" is not an IP address/);
  rejects(t, { routes: [{ gw: '10.1.0.1' }] }, 'parameters.routes[0].dst', /not a string/);
  rejects(t, { routes: [{ dst: 'default' }] }, 'parameters.routes[0].dst', /"default" needs a gw/);
  rejects(t, { routes: [{ dst: '10.2.0.0/16', gw: 'fd00::1' }] }, 'parameters.routes[0].gw', /IPv6 but dst "10.2.0.0\/16" is IPv4/);
  rejects(t, { routes: [{ dst: '10.2.0.0/16', mtu: 20 }] }, 'parameters.routes[0].mtu', /20 is out of range 68..65535/);
  rejects(t, { routes: [{ dst: '10.2.0.0/16', via: '10.1.0.1' }] }, 'parameters.routes[0].via', /not a known parameter \(known: dst, gw, mtu\)/);
  rejects(t, { mtu: 67 }, 'parameters.mtu', /67 is out of range 68..65535/);
  rejects(t, { mtu: 1500.5 }, 'parameters.mtu', /1500.5 is not an integer/);
  rejects(t, { mtu: '1500' }, 'parameters.mtu', /"1500" is not an integer/);
  rejects(t, { mac: 'zz:42:a1:00:01:ff' }, 'parameters.mac', /not a MAC address/);
  rejects(t, { mac: '01:00:5e:00:00:01' }, 'parameters.mac', /multicast/);
  rejects(t, { mac: '00:00:00:00:00:00' }, 'parameters.mac', /all-zero/);
  rejects(t, { vlan: 4095 }, 'parameters.vlan', /4095 is out of range 0..4094/);
  rejects(t, { vlan: -1 }, 'parameters.vlan', /out of range/);
  rejects(t, { vlan: 10, qos: 8 }, 'parameters.qos', /8 is out of range 0..7/);
  rejects(t, { qos: 3 }, 'parameters.qos', /needs a vlan/);
  rejects(t, { vlan: 10, vlanProto: '802.1x' }, 'parameters.vlanProto', /not one of 802.1Q, 802.1ad/);
  rejects(t, { vlanProto: '802.1ad' }, 'parameters.vlanProto', /802.1ad needs a vlan/);
  rejects(t, { spoofchk: 'yes' }, 'parameters.spoofchk', /not a boolean/);
  rejects(t, { trust: 1 }, 'parameters.trust', /not a boolean/);
  rejects(t, { minTxRate: -5 }, 'parameters.minTxRate', /out of range 0..4294967295 Mbps/);
  rejects(t, { maxTxRate: 2 ** 32 }, 'parameters.maxTxRate', /out of range/);
  rejects(t, { minTxRate: 2000, maxTxRate: 1000 }, 'parameters.minTxRate', /2000 Mbps is above maxTxRate \(1000 Mbps\)/);
  rejects(t, { linkState: 'up' }, 'parameters.linkState', /"up" is not one of auto, enable, disable/);
  rejects(t, { mode: 'vfio', interfaceName: 'net1' }, 'parameters.interfaceName', /not used in vfio mode/);
  rejects(t, { interfacename: 'net1' }, 'parameters.interfacename', /not a known parameter \(known: mode, interfaceName,/);
});

test('limits that are allowed: max rate 0 means no limit, vlan 0 with 802.1Q, qos 0 without vlan', (t) => {
  t.notThrows(() => parseDeviceParameters({ minTxRate: 100, maxTxRate: 0 }));
  t.notThrows(() => parseDeviceParameters({ vlan: 0, vlanProto: '802.1Q', qos: 0 }));
  t.notThrows(() => parseDeviceParameters({ routes: [{ dst: '0.0.0.0/0', gw: '10.0.0.1' }, { dst: '::/0' }] }));
});

test('the field prefix is the caller\'s', (t) => {
  const err = t.throws(() => parseDeviceParameters({ vlan: 5000 }, 'interfaces[1].device.parameters'), { instanceOf: KnitError });
  t.is(err?.message, 'interfaces[1].device.parameters.vlan: 5000 is out of range 0..4094');
});

test('device references: exactly one of bdf, netdev, or pool+device', (t) => {
  t.like(parseDeviceRef({ bdf: '0000:3B:01.1' }), { by: 'bdf', bdf: '0000:3b:01.1' });
  t.like(parseDeviceRef({ bdf: '3b:01.1' }), { by: 'bdf', bdf: '0000:3b:01.1' });
  t.like(parseDeviceRef({ netdev: 'ens1f0v1' }), { by: 'netdev', netdev: 'ens1f0v1' });
  t.like(parseDeviceRef({ pool: 'node-a', device: 'pci-0000-3b-01-1' }), { by: 'claim', pool: 'node-a', device: 'pci-0000-3b-01-1' });
  t.like(parseDeviceRef({ pool: 'node-a', name: 'pci-0000-3b-01-1', driver: 'knit.dev' }), { by: 'claim', device: 'pci-0000-3b-01-1', driver: 'knit.dev' });
  const withParams = parseDeviceRef({ netdev: 'ens1f0v1', parameters: { vlan: 7 } });
  t.is(withParams.parameters.vlan, 7);

  const bad = (input: unknown, field: string, message: RegExp) => {
    const err = t.throws(() => parseDeviceRef(input as never), { instanceOf: KnitError });
    t.is(err?.code, 'INVALID_ARGUMENT');
    t.is(err?.details.field, field);
    t.regex(err?.message ?? '', message);
  };
  bad(undefined, 'device', /is required/);
  bad({}, 'device', /names no device/);
  bad({ bdf: '0000:3b:01.1', netdev: 'ens1f0v1' }, 'device', /more than one way/);
  bad({ netdev: 'x', pool: 'node-a', device: 'd' }, 'device', /more than one way/);
  bad({ bdf: '3b:01' }, 'device.bdf', /not a PCI address/);
  bad({ netdev: '../../../etc' }, 'device.netdev', /not an interface name/);
  bad({ netdev: '..' }, 'device.netdev', /not an interface name/);
  bad({ pool: 'node-a' }, 'device.device', /is required with a DRA pool/);
  bad({ device: 'pci-0000-3b-01-1' }, 'device.pool', /is required with a DRA device name/);
  bad({ bdf: '0000:3b:01.1', parameters: { mtu: 1 } }, 'device.parameters.mtu', /out of range/);
});
