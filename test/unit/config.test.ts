// Config loading: the embedded default, a full file resolved, and every kind of bad value
// reported as "file:line: key.path: what is wrong".
import test from 'ava';
import { mkdtemp, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ConfigError, defaultConfig, loadConfig, parseConfigText, validateConfig } from '../../src/config/load.js';
import { diffNetworks } from '../../src/config/diff.js';
import { Ipam } from '../../src/ipam/ipam.js';

async function tempDir(t: { teardown(fn: () => Promise<void>): void }): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'knit-config-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

// Line numbers matter: the cases below point at them.
const GOOD = `{
  "logLevel": "info",
  "allowedUids": [0, 1000],
  "metricsAddress": "127.0.0.1:9465",
  "defaultNetwork": "pods",
  "networks": [
    {
      "name": "pods",
      "mode": "bridge",
      "bridge": "knit-pods",
      "mtu": 1450,
      "ipv4": {
        "subnet": "10.118.0.0/20",
        "gateway": "10.118.0.1",
        "rangeStart": "10.118.0.10",
        "reserved": ["10.118.0.5"]
      },
      "ipv6": { "subnet": "FD6B:6E69:7400:0::/64" },
      "routes": [{ "dst": "192.168.0.0/16", "gw": "10.118.0.1" }],
      "dns": { "nameservers": ["10.96.0.10"], "search": ["svc.cluster.local"] }
    },
    {
      "name": "storage",
      "mode": "routed",
      "bridge": "ignored-here",
      "ipv4": { "subnet": "10.119.0.0/24" }
    }
  ]
}
`;

test('no path: the embedded default, which works on its own', async (t) => {
  const loaded = await loadConfig(undefined);
  t.is(loaded.source, 'embedded default');
  t.is(loaded.path, undefined);
  const c = loaded.config;
  t.like(c, {
    socket: '/run/knit/knit.sock', runDir: '/run/knit', stateDir: '/var/lib/knit', netnsDir: '/run/netns',
    logLevel: 'info', handoffSocket: '/run/knit/handoff.sock', defaultNetwork: 'knit0',
  });
  t.deepEqual(c.allowedUids, [0]);
  t.deepEqual(c.requiredExtensions, []);
  t.false('metricsAddress' in c, 'metrics are off by default');
  t.deepEqual(c.networks, [{
    name: 'knit0', mode: 'bridge', bridge: 'knit0', bridgeNetfilter: true, mtu: 1500, hairpin: true,
    ipv4: { subnet: '10.118.0.0/20', gateway: '10.118.0.1', reserved: [] }, routes: [],
  }]);
  t.deepEqual(defaultConfig(), c);
  t.deepEqual(validateConfig({}), c, 'an empty object gives the same');
  // The default network really is allocatable.
  t.is(new Ipam(c.networks).allocate('knit0', 4, 'x').address, '10.118.0.2');
});

test('a path that does not exist: the embedded default, and it says so', async (t) => {
  const dir = await tempDir(t);
  const file = path.join(dir, 'absent.json');
  const loaded = await loadConfig(file);
  t.is(loaded.source, 'embedded default');
  t.is(loaded.path, file);
  t.deepEqual(loaded.config, defaultConfig());
});

test('a full file is validated, defaulted and normalized', async (t) => {
  const dir = await tempDir(t);
  const file = path.join(dir, 'config.json');
  await writeFile(file, GOOD);
  const { config, source } = await loadConfig(file);
  t.is(source, 'file');
  t.is(config.defaultNetwork, 'pods');
  t.is(config.metricsAddress, '127.0.0.1:9465');
  t.deepEqual(config.allowedUids, [0, 1000]);
  const [pods, storage] = config.networks;
  t.deepEqual(pods, {
    name: 'pods', mode: 'bridge', bridge: 'knit-pods', bridgeNetfilter: true, mtu: 1450, hairpin: true,
    ipv4: { subnet: '10.118.0.0/20', gateway: '10.118.0.1', rangeStart: '10.118.0.10', reserved: ['10.118.0.5'] },
    ipv6: { subnet: 'fd6b:6e69:7400::/64', gateway: 'fd6b:6e69:7400::1', reserved: [] },
    routes: [{ dst: '192.168.0.0/16', gw: '10.118.0.1' }],
    dns: { nameservers: ['10.96.0.10'], search: ['svc.cluster.local'], options: [] },
  });
  t.deepEqual(storage, {
    name: 'storage', mode: 'routed', mtu: 1500, hairpin: true,
    ipv4: { subnet: '10.119.0.0/24', gateway: '10.119.0.1', reserved: [] }, routes: [],
  }, 'routed mode drops the bridge');
  // The config feeds IPAM directly.
  const ipam = new Ipam(config.networks);
  t.is(ipam.allocate('pods', 4, 'a').address, '10.118.0.10');
  t.is(ipam.allocate('pods', 6, 'a').address, 'fd6b:6e69:7400::2');
});

/** [what to change in GOOD, replacement, expected "line: path: message"] */
const BAD: [string, string, string][] = [
  ['"info"', '"loud"', '2: logLevel: "loud" is not one of "fatal", "error", "warn", "info", "debug", "trace", "silent"'],
  ['[0, 1000]', '[0, -1]', '3: allowedUids[1]: -1 is below the minimum 0'],
  ['"127.0.0.1:9465"', '"127.0.0.1"', '4: metricsAddress: "127.0.0.1" is not a valid listen address (host:port or [v6]:port)'],
  ['"defaultNetwork": "pods"', '"defaultNetwork": "nope"', '5: defaultNetwork: "nope" is not one of the networks (pods, storage)'],
  ['"name": "pods"', '"name": "Pods_1"', '8: networks[0].name: "Pods_1" is not a valid network name'],
  ['"mode": "bridge"', '"mode": "bridged"', '9: networks[0].mode: "bridged" is not one of "bridge", "routed"'],
  ['"knit-pods"', '"a-very-long-bridge"', '10: networks[0].bridge: "a-very-long-bridge" is not a valid interface name (18 bytes; must be 1-15)'],
  ['"knit-pods"', '"br/0"', '10: networks[0].bridge: "br/0" is not a valid interface name'],
  ['1450', '40', '11: networks[0].mtu: 40 is below the minimum 68'],
  ['1450', '65536', '11: networks[0].mtu: 65536 is above the maximum 65535'],
  ['1450', '"1450"', '11: networks[0].mtu: expected number, got "1450"'],
  ['1450', '1450.5', '11: networks[0].mtu: expected an integer, got 1450.5'],
  ['"10.118.0.0/20"', '"10.118.0.0/33"', '13: networks[0].ipv4.subnet: "10.118.0.0/33" is not a valid CIDR'],
  ['"10.118.0.0/20"', '"10.118.0.7/20"', '13: networks[0].ipv4.subnet: "10.118.0.7/20" has host bits set (did you mean "10.118.0.0/20"?)'],
  ['"10.118.0.0/20"', '"10.118.0.0/31"', '13: networks[0].ipv4.subnet: "10.118.0.0/31" is too small'],
  ['"gateway": "10.118.0.1"', '"gateway": "10.119.0.1"', '14: networks[0].ipv4.gateway: "10.119.0.1" is not inside the subnet 10.118.0.0/20'],
  ['"gateway": "10.118.0.1"', '"gateway": "10.118.15.255"', '14: networks[0].ipv4.gateway: "10.118.15.255" is the broadcast address of 10.118.0.0/20'],
  ['"gateway": "10.118.0.1"', '"gateway": "gw"', '14: networks[0].ipv4.gateway: "gw" is not a valid IP address'],
  ['"10.118.0.10"', '"10.118.0.0"', '15: networks[0].ipv4.rangeStart: "10.118.0.0" is the network address of 10.118.0.0/20'],
  ['"10.118.0.5"', '"10.200.0.5"', '16: networks[0].ipv4.reserved[0]: "10.200.0.5" is not inside the subnet 10.118.0.0/20'],
  ['"FD6B:6E69:7400:0::/64"', '"10.0.0.0/8"', '18: networks[0].ipv6.subnet: "10.0.0.0/8" is an IPv4 subnet, but this is the ipv6 pool'],
  ['"gw": "10.118.0.1"', '"gw": "fd00::1"', '19: networks[0].routes[0].gw: "fd00::1" is IPv6 but dst "192.168.0.0/16" is IPv4'],
  ['"10.96.0.10"', '"dns.example"', '20: networks[0].dns.nameservers[0]: "dns.example" is not a valid IP address'],
  ['"name": "storage"', '"name": "pods"', '23: networks[1].name: duplicate network name "pods" (also networks[0])'],
  ['"mode": "routed",', '"mode": "routed", "mtuu": 9000,', '24: networks[1].mtuu: unknown key'],
  ['"mode": "routed",', '"mode": "routed", "bridgeNetfilter": true,', '24: networks[1].bridgeNetfilter: is only for a "bridge" network (knit makes no bridge for a "routed" one)'],
  ['"mtu": 1450,', '"mtu": 1450, "bridgeNetfilter": "yes",', '11: networks[0].bridgeNetfilter: expected boolean, got "yes"'],
  ['"name": "storage",\n', '', '22: networks[1].name: is required'],
  ['"10.119.0.0/24"', '"10.118.4.0/24"', '26: networks[1].ipv4.subnet: 10.118.4.0/24 overlaps 10.118.0.0/20 of networks[0] ("pods")'],
  ['"ipv4": { "subnet": "10.119.0.0/24" }', '"ipv4": { "subnet": "10.119.0.0/24", "gatway": "10.119.0.1" }', '26: networks[1].ipv4.gatway: unknown key'],
  ['"logLevel": "info",', '"logLevel": "info", "socket": "run/knit.sock",', '2: socket: "run/knit.sock" is not an absolute path'],
  // Syntax errors report where the parser noticed.
  ['"mtu": 1450,', '"mtu": 1450', '11: syntax error at column 14: Implicit keys need to be on a single line'],
  ['"mode": "routed",', '"mode": "routed",,', '24: syntax error at column 24: Unexpected , in flow map'],
];

for (const [from, to, want] of BAD) {
  test(`bad config reports file, line, key path: ${want.slice(0, 70)}`, async (t) => {
    t.true(GOOD.includes(from), `case must change something: ${from}`);
    const dir = await tempDir(t);
    const file = path.join(dir, 'config.json');
    await writeFile(file, GOOD.replace(from, to));
    const err = await t.throwsAsync(loadConfig(file), { instanceOf: ConfigError });
    t.true(err!.message.startsWith(`${file}:${want}`), `got:\n${err!.message}\nwanted prefix:\n${file}:${want}`);
    t.is(err!.code, 'INVALID_ARGUMENT');
    t.is(err!.details.cniCode, 7);
  });
}

test('all problems of a file are reported at once, in file order', (t) => {
  const text = GOOD.replace('1450', '40').replace('"info"', '"loud"').replace('"10.119.0.0/24"', '"x"');
  const err = t.throws(() => parseConfigText(text, 'c.json'), { instanceOf: ConfigError }) as ConfigError;
  t.deepEqual(err.issues.map((i) => `${i.line} ${i.path}`), ['2 logLevel', '11 networks[0].mtu', '26 networks[1].ipv4.subnet']);
  t.is(err.message.split('\n').length, 3);
});

test('a YAML config (as a ConfigMap carries it) loads, and its errors say file:line: key path', async (t) => {
  const dir = await tempDir(t);
  const file = path.join(dir, 'knit.yaml');
  const yaml = 'logLevel: info\nnetworks:\n  - name: pods\n    bridge: knit-pods\n    ipv4:\n      subnet: 10.118.0.0/20\n';
  await writeFile(file, yaml);
  const { config } = await loadConfig(file);
  t.is(config.networks[0].name, 'pods');
  await writeFile(file, yaml.replace('10.118.0.0/20', '10.118.0.0/99'));
  const err = await t.throwsAsync(loadConfig(file), { instanceOf: ConfigError });
  t.true(err!.message.startsWith(`${file}:6: networks[0].ipv4.subnet: `), err!.message);
});

test('other structural rules: at least one network, one pool, a bridge name that fits', (t) => {
  t.throws(() => validateConfig({ networks: [] }), { message: /networks: needs at least 1 entry/ });
  t.throws(() => validateConfig({ networks: [{ name: 'l2' }] }), { message: /networks\[0\]: network "l2" needs an ipv4 or an ipv6 pool/ });
  t.throws(() => validateConfig({ networks: [{ name: 'a-sixteen-chars0', ipv4: { subnet: '10.1.0.0/24' } }] }), {
    message: /networks\[0\]\.bridge: is needed: the network name "a-sixteen-chars0" is too long/,
  });
  t.throws(() => validateConfig({ networks: [{ name: 'a', ipv4: { subnet: '10.1.0.0/24' } }, { name: 'b', bridge: 'a', ipv4: { subnet: '10.2.0.0/24' } }] }), {
    message: /networks\[1\]\.bridge: bridge "a" is already used by networks\[0\]/,
  });
  t.throws(() => validateConfig({ socket: '/run/x.sock', handoffSocket: '/run/x.sock' }), { message: /handoffSocket: must differ from socket/ });
  // The long name is fine when routed (no bridge) or given an explicit bridge.
  t.notThrows(() => validateConfig({ networks: [{ name: 'a-sixteen-chars0', mode: 'routed', ipv4: { subnet: '10.1.0.0/24' } }] }));
  t.is(validateConfig({ networks: [{ name: 'x', ipv6: { subnet: 'fd00::/64' } }] }).defaultNetwork, 'x', 'default network: the first one');
});

test('unreadable path is an error naming the file (a directory here)', async (t) => {
  const dir = await tempDir(t);
  const sub = path.join(dir, 'config.json');
  await mkdir(sub);
  await t.throwsAsync(loadConfig(sub), { instanceOf: ConfigError, message: new RegExp(`^${sub}: cannot read: .*EISDIR`) });
});

test('diffNetworks: added, removed, changed (with keys) and unchanged', (t) => {
  const before = parseConfigText(GOOD).networks;
  const after = parseConfigText(
    GOOD.replace('1450', '1400').replace('"name": "storage"', '"name": "storage2"').replace('"10.119.0.0/24"', '"10.120.0.0/24"'),
  ).networks;
  t.deepEqual(diffNetworks(before, after), {
    added: ['storage2'], removed: ['storage'], changed: [{ name: 'pods', keys: ['mtu'] }], unchanged: [],
  });
  const reordered = [...before].reverse().map((n) => Object.fromEntries(Object.entries(n).reverse()) as typeof n);
  t.deepEqual(diffNetworks(before, reordered), { added: [], removed: [], changed: [], unchanged: ['storage', 'pods'] });
  const v6 = parseConfigText(GOOD.replace('"FD6B:6E69:7400:0::/64"', '"fd6b:6e69:7401::/64"')).networks;
  t.deepEqual(diffNetworks(before, v6).changed, [{ name: 'pods', keys: ['ipv6'] }]);
});
