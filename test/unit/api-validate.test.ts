// Request validation: every malformed field is refused with INVALID_ARGUMENT naming that field
// (proto field path), and good requests become the domain objects core expects.
import test from 'ava';
import { KnitError } from '../../src/base/errors.js';
import {
  validateAttach,
  validateDetach,
  validateExtension,
  validateGarbageCollect,
  validateSandboxId,
} from '../../src/api/validate.js';
import { toKnitAttach } from '../../src/api/kni.js';

const good = { sandbox_id: 'sb-1', netns_path: '/run/netns/kv1a-pod' };
const withIface = (iface: object) => ({ ...good, interfaces: [{ name: 'eth0', ...iface }] });

interface Case {
  what: string;
  req: object;
  field: string;
  says: RegExp;
}

const attachCases: Case[] = [
  { what: 'missing sandbox_id', req: { netns_path: good.netns_path }, field: 'sandbox_id', says: /is required/ },
  { what: 'empty sandbox_id', req: { ...good, sandbox_id: '' }, field: 'sandbox_id', says: /is required/ },
  { what: 'sandbox_id with /', req: { ...good, sandbox_id: 'a/b' }, field: 'sandbox_id', says: /contains '\/'/ },
  { what: 'sandbox_id with NUL', req: { ...good, sandbox_id: 'a\0b' }, field: 'sandbox_id', says: /NUL/ },
  { what: 'sandbox_id too long', req: { ...good, sandbox_id: 'x'.repeat(254) }, field: 'sandbox_id', says: /254 characters.*253/ },
  { what: 'sandbox_id ..', req: { ...good, sandbox_id: '..' }, field: 'sandbox_id', says: /not a usable/ },
  { what: 'pod_name with /', req: { ...good, pod_name: 'a/b' }, field: 'pod_name', says: /contains '\/'/ },
  { what: 'pod_namespace with newline', req: { ...good, pod_namespace: 'a\nb' }, field: 'pod_namespace', says: /control character/ },
  { what: 'pod_uid too long', req: { ...good, pod_uid: 'u'.repeat(300) }, field: 'pod_uid', says: /limit is 253/ },
  { what: 'missing netns_path', req: { sandbox_id: 'sb-1' }, field: 'netns_path', says: /is required/ },
  { what: 'relative netns_path', req: { ...good, netns_path: 'run/netns/x' }, field: 'netns_path', says: /not an absolute path/ },
  { what: 'netns_path with ..', req: { ...good, netns_path: '/run/netns/../../proc/1/ns/net' }, field: 'netns_path', says: /contains '\.\.'/ },
  { what: 'netns_path not normalized', req: { ...good, netns_path: '/run//netns/x' }, field: 'netns_path', says: /not normalized/ },
  { what: 'netns_path trailing slash', req: { ...good, netns_path: '/run/netns/x/' }, field: 'netns_path', says: /not normalized/ },
  { what: 'host netns', req: { ...good, netns_path: '/proc/1/ns/net' }, field: 'netns_path', says: /host's network namespace/ },
  { what: 'host netns via task', req: { ...good, netns_path: '/proc/1/task/1/ns/net' }, field: 'netns_path', says: /host's/ },
  { what: 'daemon netns (self)', req: { ...good, netns_path: '/proc/self/ns/net' }, field: 'netns_path', says: /daemon's own/ },
  { what: 'daemon netns (pid)', req: { ...good, netns_path: `/proc/${process.pid}/ns/net` }, field: 'netns_path', says: /daemon's own/ },
  { what: 'unknown runtime', req: { ...good, runtime: 'FIRECRACKER' }, field: 'runtime', says: /not one of runc, kata, kubevirt/ },
  { what: 'unknown runtime number', req: { ...good, runtime: 9 }, field: 'runtime', says: /"9" is not one of/ },
  { what: 'ifname too long', req: withIface({ name: 'sixteen-bytes-xx' }), field: 'interfaces[0].name', says: /16 bytes long; Linux allows 15/ },
  { what: 'ifname with /', req: withIface({ name: 'a/b' }), field: 'interfaces[0].name', says: /'\/'/ },
  { what: 'ifname with :', req: withIface({ name: 'eth0:1' }), field: 'interfaces[0].name', says: /':'/ },
  { what: 'ifname with space', req: withIface({ name: 'eth 0' }), field: 'interfaces[0].name', says: /whitespace/ },
  { what: 'ifname .', req: withIface({ name: '.' }), field: 'interfaces[0].name', says: /not a valid interface name/ },
  { what: 'ifname ..', req: withIface({ name: '..' }), field: 'interfaces[0].name', says: /not a valid interface name/ },
  {
    what: 'duplicate ifname',
    req: { ...good, interfaces: [{ name: 'net1' }, { name: 'net1' }] },
    field: 'interfaces[1].name',
    says: /"net1" is already used by interfaces\[0\]/,
  },
  {
    what: 'default name collides',
    req: { ...good, interfaces: [{ name: 'eth1' }, {}] },
    field: 'interfaces[1].name',
    says: /"eth1" is already used by interfaces\[0\]/,
  },
  { what: 'network with /', req: withIface({ network: 'a/b' }), field: 'interfaces[0].network', says: /contains '\/'/ },
  { what: 'mac not a mac', req: withIface({ mac: 'zz' }), field: 'interfaces[0].mac', says: /^"zz" is not a MAC address$/ },
  { what: 'mac mixed separators', req: withIface({ mac: '02:00-00:00:00:01' }), field: 'interfaces[0].mac', says: /not a MAC/ },
  { what: 'multicast mac', req: withIface({ mac: '01:00:5e:00:00:01' }), field: 'interfaces[0].mac', says: /multicast/ },
  { what: 'zero mac', req: withIface({ mac: '00:00:00:00:00:00' }), field: 'interfaces[0].mac', says: /all-zero/ },
  { what: 'mtu too small', req: withIface({ mtu: 67 }), field: 'interfaces[0].mtu', says: /67 is out of range 68\.\.65535/ },
  { what: 'mtu too large', req: withIface({ mtu: 65536 }), field: 'interfaces[0].mtu', says: /out of range/ },
  { what: 'ip without prefix', req: withIface({ ips: ['10.0.0.1'] }), field: 'interfaces[0].ips[0]', says: /not a CIDR/ },
  { what: 'ip bad address', req: withIface({ ips: ['10.0.0.1/24', '10.0.0.300/24'] }), field: 'interfaces[0].ips[1]', says: /"10\.0\.0\.300" is not an IP/ },
  { what: 'ip prefix too long', req: withIface({ ips: ['10.0.0.1/33'] }), field: 'interfaces[0].ips[0]', says: /prefix must be 0\.\.32/ },
  { what: 'ipv6 prefix too long', req: withIface({ ips: ['fd00::1/129'] }), field: 'interfaces[0].ips[0]', says: /0\.\.128/ },
  { what: 'device bdf', req: withIface({ device: { bdf: '3b:02.1' } }), field: 'interfaces[0].device.bdf', says: /not a PCI address/ },
  { what: 'device netdev', req: withIface({ device: { netdev: 'a very long netdev' } }), field: 'interfaces[0].device.netdev', says: /Linux allows 15/ },
  { what: 'binding empty key', req: withIface({ binding: { '': 'x' } }), field: 'interfaces[0].binding[""]', says: /keys must not be empty/ },
  {
    what: 'port protocol',
    req: { ...good, port_mappings: [{ protocol: 'ICMP', container_port: 80 }] },
    field: 'port_mappings[0].protocol',
    says: /"ICMP" is not one of tcp, udp, sctp/,
  },
  {
    what: 'container_port zero',
    req: { ...good, port_mappings: [{ protocol: 'TCP', container_port: 0 }] },
    field: 'port_mappings[0].container_port',
    says: /0 is out of range 1\.\.65535/,
  },
  {
    what: 'host_port too large',
    req: { ...good, port_mappings: [{ container_port: 80, host_port: 70000 }] },
    field: 'port_mappings[0].host_port',
    says: /70000 is out of range 0\.\.65535/,
  },
  {
    what: 'host_ip',
    req: { ...good, port_mappings: [{ container_port: 80, host_port: 8080, host_ip: 'localhost' }] },
    field: 'port_mappings[0].host_ip',
    says: /"localhost" is not an IP address/,
  },
  { what: 'dns nameserver', req: { ...good, dns: { nameservers: ['dns.google'] } }, field: 'dns.nameservers[0]', says: /not an IP/ },
  { what: 'dns search', req: { ...good, dns: { search: ['a b'] } }, field: 'dns.search[0]', says: /not a DNS name/ },
  { what: 'dns option', req: { ...good, dns: { options: [''] } }, field: 'dns.options[0]', says: /must not be empty/ },
  { what: 'dns domain', req: { ...good, dns: { domain: 'a\tb' } }, field: 'dns.domain', says: /not a DNS name/ },
  { what: 'label key', req: { ...good, labels: { '': 'v' } }, field: 'labels[""]', says: /keys must not be empty/ },
  { what: 'annotation value type', req: { ...good, annotations: { a: 1 } }, field: 'annotations["a"]', says: /expected string/ },
];

for (const c of attachCases) {
  test(`attach: ${c.what} -> INVALID_ARGUMENT on ${c.field}`, (t) => {
    const err = t.throws(() => validateAttach(c.req as never), { instanceOf: KnitError });
    t.is(err?.code, 'INVALID_ARGUMENT');
    t.is(err?.details.field, c.field);
    t.true(err?.message.startsWith(`${c.field}: `), err?.message);
    t.regex(err!.message.slice(c.field.length + 2), c.says);
  });
}

test('attach: a minimal request gets eth0 on the default network and runc', (t) => {
  t.deepEqual(validateAttach(good as never), {
    sandboxId: 'sb-1',
    netnsPath: '/run/netns/kv1a-pod',
    runtime: 'runc',
    interfaces: [{ name: 'eth0' }],
    portMappings: [],
    labels: {},
    annotations: {},
  });
});

test('attach: a full request maps every field onto the domain', (t) => {
  const req = validateAttach({
    ...good,
    pod_name: 'web',
    pod_namespace: 'prod',
    pod_uid: 'f00',
    runtime: 'KATA',
    interfaces: [
      {
        name: '',
        network: 'blue',
        mac: '02-AA-BB-CC-DD-EE',
        mtu: 9000,
        ips: ['10.1.0.5/24', 'fd00::5/64'],
        device: { bdf: '0000:3B:02.1', netdev: '', pool: 'pf0', device: 'vf1', parameters: { fields: { vlan: { kind: 'numberValue', numberValue: 5 } } } },
        binding: { mode: 'tcfilter' },
      },
      { name: '' },
    ],
    port_mappings: [{ protocol: 'UDP', container_port: 53, host_port: 5353, host_ip: '127.0.0.1' }, { container_port: 80 }],
    dns: { nameservers: ['10.96.0.10'], search: ['svc.cluster.local'], options: ['ndots:5'], domain: 'cluster.local' },
    labels: { app: 'web' },
    annotations: { a: 'b' },
  } as never);
  t.deepEqual(req, {
    sandboxId: 'sb-1',
    podName: 'web',
    podNamespace: 'prod',
    podUid: 'f00',
    netnsPath: '/run/netns/kv1a-pod',
    runtime: 'kata',
    interfaces: [
      {
        name: 'eth0',
        network: 'blue',
        mac: '02:aa:bb:cc:dd:ee',
        mtu: 9000,
        ips: ['10.1.0.5/24', 'fd00::5/64'],
        device: { bdf: '0000:3b:02.1', pool: 'pf0', name: 'vf1', parameters: { vlan: 5 } },
        binding: { mode: 'tcfilter' },
      },
      { name: 'eth1' },
    ],
    portMappings: [
      { protocol: 'udp', containerPort: 53, hostPort: 5353, hostIp: '127.0.0.1' },
      { protocol: 'tcp', containerPort: 80, hostPort: 0 },
    ],
    dns: { nameservers: ['10.96.0.10'], search: ['svc.cluster.local'], options: ['ndots:5'], domain: 'cluster.local' },
    labels: { app: 'web' },
    annotations: { a: 'b' },
  });
});

test('plan: field paths carry the attach. prefix', (t) => {
  const err = t.throws(() => validateAttach({ ...good, interfaces: [{ mtu: 1 }] } as never, { prefix: 'attach.' }), { instanceOf: KnitError });
  t.is(err?.details.field, 'attach.interfaces[0].mtu');
  const missing = t.throws(() => validateAttach(null, { prefix: 'attach.' }), { instanceOf: KnitError });
  t.is(missing?.details.field, 'attach');
});

const otherCases: { what: string; run: () => unknown; field: string; says: RegExp }[] = [
  { what: 'detach: empty sandbox_id', run: () => validateDetach({ sandbox_id: '' }), field: 'sandbox_id', says: /is required/ },
  { what: 'detach: host netns', run: () => validateDetach({ sandbox_id: 'a', netns_path: '/proc/1/ns/net' }), field: 'netns_path', says: /host's/ },
  { what: 'query: sandbox id with /', run: () => validateSandboxId('x/y'), field: 'sandbox_id', says: /contains '\/'/ },
  {
    what: 'gc: valid attachment without id',
    run: () => validateGarbageCollect({ valid_attachments: [{ sandbox_id: 'a' }, { sandbox_id: '' }] }),
    field: 'valid_attachments[1].sandbox_id',
    says: /is required/,
  },
  {
    what: 'gc: bad interface name',
    run: () => validateGarbageCollect({ valid_attachments: [{ sandbox_id: 'a', interface_name: 'x:y' }] }),
    field: 'valid_attachments[0].interface_name',
    says: /':'/,
  },
  {
    what: 'extension: name',
    run: () => validateExtension({ name: 'bad name', endpoint: '/run/x.sock', phase: 'POST_ATTACH' }),
    field: 'extension.name',
    says: /not a valid extension name/,
  },
  {
    what: 'extension: endpoint',
    run: () => validateExtension({ name: 'ok', endpoint: 'x.sock', phase: 'POST_ATTACH' }),
    field: 'extension.endpoint',
    says: /not an absolute path/,
  },
  {
    what: 'extension: phase',
    run: () => validateExtension({ name: 'ok', endpoint: '/run/x.sock', phase: 'EXTENSION_PHASE_UNSPECIFIED' }),
    field: 'extension.phase',
    says: /POST_ATTACH or PRE_DETACH/,
  },
  { what: 'extension: missing', run: () => validateExtension(null), field: 'extension', says: /is required/ },
];

for (const c of otherCases) {
  test(`${c.what} -> INVALID_ARGUMENT on ${c.field}`, (t) => {
    const err = t.throws(c.run, { instanceOf: KnitError });
    t.is(err?.code, 'INVALID_ARGUMENT');
    t.is(err?.details.field, c.field);
    t.regex(err!.message, c.says);
  });
}

test('gc and extension requests map onto the domain', (t) => {
  t.deepEqual(validateGarbageCollect({ valid_attachments: [{ sandbox_id: 'a', interface_name: 'eth0' }, { sandbox_id: 'b' }] }), {
    keepRecorded: false,
    valid: [{ sandboxId: 'a', interface: 'eth0' }, { sandboxId: 'b' }],
  });
  t.deepEqual(validateExtension({ name: 'policy', endpoint: '/run/policy.sock', phase: 'PRE_DETACH', required: true, order: 3 }), {
    name: 'policy',
    endpoint: '/run/policy.sock',
    phase: 'pre-detach',
    required: true,
    order: 3,
  });
});

// KNI requests are validated by the same rules, but errors name the KNI fields.
const kniBase = {
  name: 'web',
  id: 'sb-2',
  namespace: 'prod',
  isolation: { path: '/run/netns/kv1a-kni', type: 'netns', extradata: {} },
  dns_config: null,
  port_mappings: [],
  labels: {},
  annotations: {},
  extradata: {},
};

const kniCases: { what: string; req: object; field: string; says: RegExp }[] = [
  { what: 'id empty', req: { ...kniBase, id: '' }, field: 'id', says: /is required/ },
  { what: 'name with /', req: { ...kniBase, name: 'a/b' }, field: 'name', says: /'\/'/ },
  { what: 'isolation.path relative', req: { ...kniBase, isolation: { path: 'x', type: '', extradata: {} } }, field: 'isolation.path', says: /absolute/ },
  {
    what: 'extradata netns host',
    req: { ...kniBase, isolation: null, extradata: { netns: '/proc/1/ns/net' } },
    field: 'extradata["netns"]',
    says: /host's/,
  },
  { what: 'no netns at all', req: { ...kniBase, isolation: null }, field: 'isolation.path', says: /is required \(or extradata\["netns"\]\)/ },
  {
    what: 'dns server',
    req: { ...kniBase, dns_config: { servers: ['x'], searches: [], options: [] } },
    field: 'dns_config.servers[0]',
    says: /not an IP/,
  },
  {
    what: 'negative host port',
    req: { ...kniBase, port_mappings: [{ protocol: 'TCP', container_port: 80, host_port: -1, host_ip: '' }] },
    field: 'port_mappings[0].host_port',
    says: /-1 is out of range/,
  },
  { what: 'runtime', req: { ...kniBase, extradata: { runtime: 'lxc' } }, field: 'extradata["runtime"]', says: /"lxc" is not one of/ },
];

for (const c of kniCases) {
  test(`kni attach: ${c.what} -> INVALID_ARGUMENT on ${c.field}`, (t) => {
    const err = t.throws(() => toKnitAttach(c.req as never), { instanceOf: KnitError });
    t.is(err?.code, 'INVALID_ARGUMENT');
    t.is(err?.details.field, c.field);
    t.regex(err!.message, c.says);
  });
}

test('kni attach: netns from extradata when isolation is absent, eth0 on the default network', (t) => {
  const req = toKnitAttach({ ...kniBase, isolation: null, extradata: { netns: '/run/netns/kv1a-x', runtime: 'kata' } } as never);
  t.is(req.netnsPath, '/run/netns/kv1a-x');
  t.is(req.runtime, 'kata');
  t.deepEqual(req.interfaces, [{ name: 'eth0' }]);
  t.is(req.podName, 'web');
  t.is(req.podNamespace, 'prod');
  t.is(req.sandboxId, 'sb-2');
});
