// The CNI executor's pure parts: conflists, the configuration each plugin receives (libcni's
// buildOneConfig), results turned into knit's answer, and the "cni" network in knit's config.
import test from 'ava';
import { parseConflist, compareVersions } from '../../src/cni-exec/conflist.js';
import { pluginConfig, declaredCapabilities } from '../../src/cni-exec/chain.js';
import { cacheFile } from '../../src/cni-exec/cache.js';
import { chainPart } from '../../src/cni-exec/result.js';
import type { Handoff } from '../../src/base/handoff.js';
import { validateConfig } from '../../src/config/load.js';

const LIST = JSON.stringify({
  cniVersion: '1.0.0', name: 'pods',
  plugins: [{ type: 'bridge', bridge: 'cni0' }, { type: 'portmap', capabilities: { portMappings: true, bandwidth: false } }],
});

test('a conflist keeps its text; bad ones say which key is wrong', (t) => {
  const list = parseConflist(LIST, 'x');
  t.is(list.bytes, LIST);
  t.deepEqual(list.plugins.map((p) => p.type), ['bridge', 'portmap']);
  t.throws(() => parseConflist('{', 'cm'), { message: /^cm: not JSON/ });
  t.throws(() => parseConflist('{"name":"a","cniVersion":"1.0.0","plugins":[]}', 'cm'), { message: /plugins" must be a non-empty array/ });
  t.throws(() => parseConflist('{"name":"a","cniVersion":"1.0.0","plugins":[{"type":"../x"}]}', 'cm'), { message: /plugins\[0\]\.type must name a plugin binary/ });
  t.throws(() => parseConflist('{"name":"a","cniVersion":"one","plugins":[{"type":"x"}]}', 'cm'), { message: /cniVersion/ });
  t.true(compareVersions('1.1.0', '1.0.0') > 0);
  t.true(compareVersions('0.4.0', '0.4.0') === 0);
});

test('a conflist text parsed again answers the same list, frozen (attach and detach share it)', (t) => {
  const list = parseConflist(LIST, 'x');
  t.is(parseConflist(LIST, 'network pods'), list);
  t.true(Object.isFrozen(list) && Object.isFrozen(list.plugins[1]) && Object.isFrozen(list.plugins[1]!.capabilities));
  t.not(parseConflist(LIST.replace('cni0', 'cni1'), 'x'), list);
  // What a chain builds from it is the caller's own.
  const conf = pluginConfig(list, list.plugins[0]!, undefined, {});
  conf.prevResult = {};
  t.false('prevResult' in list.plugins[0]!);
});

test('each plugin gets name, cniVersion, prevResult, and runtimeConfig only for the capabilities it declares', (t) => {
  const list = parseConflist(LIST, 'x');
  const caps = { portMappings: [{ hostPort: 80, containerPort: 8080, protocol: 'tcp' }], bandwidth: { ingressRate: 1 } };
  const bridge = pluginConfig(list, list.plugins[0], undefined, caps);
  t.deepEqual(bridge, { type: 'bridge', bridge: 'cni0', name: 'pods', cniVersion: '1.0.0' });
  const prev = { cniVersion: '1.0.0', ips: [] };
  const portmap = pluginConfig(list, list.plugins[1], prev, caps);
  t.deepEqual(portmap.prevResult, prev);
  t.deepEqual(portmap.runtimeConfig, { portMappings: caps.portMappings }, 'bandwidth is declared false: not passed');
  t.deepEqual([...declaredCapabilities(list)], ['portMappings']);
});

test('the cache file is libcni\'s: <dir>/results/<network>-<containerID>-<ifname>', (t) => {
  t.is(cacheFile('/var/lib/cni', { network: 'pods', containerId: 'abc', ifName: 'eth0' }), '/var/lib/cni/results/pods-abc-eth0');
});

test('a chain result becomes its interface\'s part; addresses index the part\'s own interfaces', (t) => {
  const placeholder = { ifname: 'eth0', interfaces: [{ name: 'eth0', kind: 'cni', sandbox: '/run/netns/s' }], ips: [], routes: [] };
  const part = chainPart(placeholder, {
    cniVersion: '1.0.0',
    interfaces: [{ name: 'cni0', mac: 'aa:bb:cc:dd:ee:01' }, { name: 'veth1' }, { name: 'eth0', mac: 'aa:bb:cc:dd:ee:02', sandbox: '/run/netns/s' }],
    ips: [{ address: '10.172.9.5/24', gateway: '10.172.9.1', interface: 2 }],
    routes: [{ dst: '0.0.0.0/0', gw: '10.172.9.1' }],
    dns: { nameservers: ['10.172.9.53'] },
  });
  t.deepEqual(part.interfaces.map((i) => i.name), ['cni0', 'veth1', 'eth0']);
  t.deepEqual(part.ips, [{ address: '10.172.9.5/24', gateway: '10.172.9.1', family: 4, interface: 2 }]);
  t.deepEqual(part.routes, [{ dst: '0.0.0.0/0', gw: '10.172.9.1' }]);
  t.deepEqual(part.dns?.nameservers, ['10.172.9.53']);
  t.is(part.ifname, 'eth0');
});

test('a VM guest on a chain\'s veth resolves as the pod does: the chain\'s DNS joins its own, unless knit\'s config gives the network one', (t) => {
  const guest = { name: 'eth0', mac: 'cni:mac', mtu: 1500, ips: [], routes: [], neighbors: [], dns: { nameservers: ['10.96.0.10'], search: [], options: [] }, delivery: 'dhcp' as const };
  const handoff = { runtime: 'kubevirt', model: 'tap', device: 'tap', name: 'tap0', netns: '/run/netns/s', queues: 1, podIpsOn: 'pod+guest', mac: 'cni:mac', mtu: 1500, guest } as unknown as Handoff;
  const placeholder = { ifname: 'eth0', interfaces: [{ name: 'eth0', kind: 'cni', sandbox: '/run/netns/s' }, { name: 'tap0', kind: 'tap', sandbox: '/run/netns/s', handoff }], ips: [], routes: [] };
  const raw = {
    cniVersion: '1.0.0', interfaces: [{ name: 'eth0', mac: 'aa:bb:cc:dd:ee:02', sandbox: '/run/netns/s' }],
    ips: [{ address: '10.172.9.5/24', gateway: '10.172.9.1', interface: 0 }], dns: { nameservers: ['10.172.9.53'], search: ['chain.example'] },
  };
  const guestOf = (p: ReturnType<typeof chainPart>) => (p.interfaces.find((i) => i.handoff)!.handoff as { guest: { dns?: unknown } }).guest.dns;
  t.deepEqual(guestOf(chainPart(placeholder, raw)), { nameservers: ['10.96.0.10', '10.172.9.53'], search: ['chain.example'], options: [] });
  t.deepEqual(guestOf(chainPart({ ...placeholder, dns: { nameservers: ['10.172.9.99'], search: [], options: [] } }, raw)), guest.dns, 'the network\'s own DNS (already in the guest\'s) stands');
});

test('config: a "cni" network takes an inline conflist (object or text) or a file, never both, and no pools', (t) => {
  const inline = validateConfig({ networks: [{ name: 'pods', mode: 'cni', cni: { conflist: JSON.parse(LIST) } }] });
  t.is(inline.networks[0].mode, 'cni');
  t.deepEqual(JSON.parse(inline.networks[0].cni!.conflist!), JSON.parse(LIST));
  t.deepEqual(inline.networks[0].cni!.pluginDirs, ['/usr/lib/cni'], 'the plugins knit ships, not /opt/cni/bin');
  t.is(inline.networks[0].cni!.cacheDir, '/var/lib/cni');
  const file = validateConfig({ networks: [{ name: 'pods', mode: 'cni', cni: { conflistFile: '/etc/knit/cni/pods.conflist', timeoutMs: 5000 } }] });
  t.is(file.networks[0].cni!.conflistFile, '/etc/knit/cni/pods.conflist');
  t.throws(() => validateConfig({ networks: [{ name: 'pods', mode: 'cni', cni: { conflist: LIST, conflistFile: '/x' } }] }), { message: /exactly one of conflist and conflistFile/ });
  t.throws(() => validateConfig({ networks: [{ name: 'pods', mode: 'cni' }] }), { message: /needs a "cni" section/ });
  t.throws(() => validateConfig({ networks: [{ name: 'pods', mode: 'cni', cni: { conflist: LIST }, ipv4: { subnet: '10.172.9.0/24' } }] }), { message: /ipv4: is not used by a "cni" network/ });
  t.throws(() => validateConfig({ networks: [{ name: 'pods', mode: 'cni', cni: { conflist: '{"name":"x"}' } }] }), { message: /cni\.conflist: conflist: "cniVersion"/ });
  t.throws(() => validateConfig({ networks: [{ name: 'pods', ipv4: { subnet: '10.172.9.0/24' }, cni: { conflist: LIST } }] }), { message: /cni: is only for mode "cni"/ });
});
