// The daemon side's pure parts: the config's networkPolicy block, what the informers keep of a
// Pod, a conntrack line read, the table read back from nft -j (the forms nft prints), and the
// table kept as it is while the cluster is unknown, with new pods isolated; what a literal
// list's reload says changed.
import test from 'ava';
import { validateConfig } from '../../src/config/load.js';
import { podKept, podOf } from '../../src/daemon/kube-policy.js';
import { parseConntrack } from '../../src/daemon/policy.js';
import { LiteralPolicies } from '../../src/policy/literal.js';
import type { SourceChange } from '../../src/policy/types.js';
import { emptyKernel, heldWithChanges, isolationChain, parseKernel, transaction, BASE_CHAIN } from '../../src/policy/ruleset.js';

test('config: networkPolicy defaults to the default network, names only knit networks of its own addresses, and checks its literal lists', (t) => {
  const base = { networks: [{ name: 'pods', ipv4: { subnet: '10.1.0.0/24' } }, { name: 'chain', mode: 'cni', cni: { conflist: '{"cniVersion":"1.0.0","name":"c","plugins":[{"type":"bridge"}]}' } }] };
  t.deepEqual(validateConfig({ ...base, networkPolicy: {} }).networkPolicy, { networks: ['pods'] });
  t.throws(() => validateConfig({ ...base, networkPolicy: { networks: ['nope'] } }), { message: /networkPolicy\.networks\[0\].*"nope" is not one of the networks/ });
  t.throws(() => validateConfig({ ...base, networkPolicy: { networks: ['chain'] } }), { message: /networkPolicy\.networks\[0\].*mode "cni"/ });
  t.throws(() => validateConfig({ ...base, networkPolicy: { literal: { pods: [{ namespace: 'x', name: 'a', ips: ['10.0.0.300'] }] } } }), { message: /networkPolicy\.literal\.pods\[0\]\.ips\[0\]/ });
  t.throws(() => validateConfig({ ...base, networkPolicy: { literal: { policies: [{ metadata: { name: 'p' }, spec: {} }] } } }), { message: /networkPolicy\.literal\.policies\[0\]\.metadata\.namespace/ });
  const lit = validateConfig({ ...base, networkPolicy: { literal: { namespaces: { x: {} }, pods: [{ namespace: 'x', name: 'a', ports: [{ name: 'http', port: 80 }] }] } } }).networkPolicy!.literal!;
  t.deepEqual(lit.pods[0], { namespace: 'x', name: 'a', labels: {}, ips: [], hostNetwork: false, ports: [{ name: 'http', port: 80, protocol: 'TCP' }] });
});

test('what the informer keeps of a Pod: labels, addresses, node, hostNetwork, phase and only named ports; a finished pod has no address', (t) => {
  const pod = {
    metadata: { name: 'a', namespace: 'x', uid: 'u', resourceVersion: '7', labels: { app: 'a' }, annotations: { big: 'x'.repeat(1000) }, managedFields: [{}] },
    spec: { nodeName: 'n1', containers: [{ name: 'c', image: 'i', env: [{ name: 'E', value: 'v' }], ports: [{ name: 'http', containerPort: 80 }, { containerPort: 81 }] }], initContainers: [{ name: 'side', ports: [{ name: 'metrics', containerPort: 9090, protocol: 'TCP' }] }] },
    status: { phase: 'Running', podIPs: [{ ip: '10.0.0.5' }, { ip: 'fd00::5' }], conditions: [{ type: 'Ready' }] },
  };
  const kept = podKept(pod as never);
  t.deepEqual(kept, {
    metadata: { name: 'a', namespace: 'x', uid: 'u', resourceVersion: '7', labels: { app: 'a' } },
    spec: { nodeName: 'n1', containers: [{ ports: [{ name: 'http', containerPort: 80 }] }, { ports: [{ name: 'metrics', containerPort: 9090, protocol: 'TCP' }] }] },
    status: { phase: 'Running', podIPs: [{ ip: '10.0.0.5' }, { ip: 'fd00::5' }] },
  });
  t.deepEqual(podOf(kept), { namespace: 'x', name: 'a', labels: { app: 'a' }, ips: ['10.0.0.5', 'fd00::5'], node: 'n1', ports: [{ name: 'http', port: 80, protocol: 'TCP' }, { name: 'metrics', port: 9090, protocol: 'TCP' }] });
  t.deepEqual(podOf(podKept({ ...pod, status: { ...pod.status, phase: 'Succeeded' } } as never)).ips, []);
  t.true(podOf(podKept({ ...pod, spec: { ...pod.spec, hostNetwork: true } } as never)).hostNetwork);
});

test('a conntrack line: the original direction\'s tuple, and the reply\'s source (the destination after a DNAT)', (t) => {
  t.deepEqual(parseConntrack('tcp      6 431999 ESTABLISHED src=10.0.0.3 dst=10.0.0.2 sport=43210 dport=8080 src=10.0.0.2 dst=10.0.0.3 sport=8080 dport=43210 [ASSURED] mark=0 use=1'),
    { protoName: 'tcp', proto: 6, src: '10.0.0.3', dst: '10.0.0.2', sport: 43210, dport: 8080, replySrc: '10.0.0.2', replySport: 8080 });
  // Through a Service: the ClusterIP in the original tuple, the backend pod in the reply.
  t.deepEqual(parseConntrack('tcp      6 299 ESTABLISHED src=10.0.0.3 dst=10.96.7.7 sport=41872 dport=80 src=10.0.0.2 dst=10.0.0.3 sport=8080 dport=41872 [ASSURED] mark=0 use=1'),
    { protoName: 'tcp', proto: 6, src: '10.0.0.3', dst: '10.96.7.7', sport: 41872, dport: 80, replySrc: '10.0.0.2', replySport: 8080 });
  t.deepEqual(parseConntrack('icmp     1 29 src=10.0.0.3 dst=10.0.0.2 type=8 code=0 id=7 src=10.0.0.2 dst=10.0.0.3 type=0 code=0 id=7 mark=0 use=1'),
    { protoName: 'icmp', proto: 1, src: '10.0.0.3', dst: '10.0.0.2', replySrc: '10.0.0.2' });
  t.is(parseConntrack('conntrack v1.4.7 (conntrack-tools): 2 flow entries have been shown.'), undefined);
});

test('the table read back from nft -j -p: every element form nft prints, in the compiler\'s canonical text', (t) => {
  const json = JSON.stringify({ nftables: [
    { metainfo: {} },
    { table: { family: 'inet', name: 'knit-policy' } },
    { counter: { name: 'ai_0123456789ab', packets: 3 } },
    { set: { name: 'i4a_0123456789ab', type: 'ipv4_addr', flags: ['interval'], elem: ['10.0.0.5', { prefix: { addr: '10.0.1.0', len: 24 } }, { range: ['10.0.2.1', '10.0.2.9'] }] } },
    { set: { name: 'i4c_0123456789ab', type: ['ipv4_addr', 'inet_proto', 'inet_service'], flags: ['interval'], elem: [{ concat: ['10.0.0.5', 6, { range: [80, 81] }] }, { concat: [{ prefix: { addr: '0.0.0.0', len: 4 } }, 17, 53] }] } },
    { set: { name: 'self6', type: ['ipv6_addr', 'ipv6_addr'], elem: [{ concat: ['fd00::5', 'fd00::5'] }] } },
    { map: { name: 'in4', type: 'ipv4_addr', map: 'verdict', elem: [['10.0.0.5', { jump: { target: 'gi4_0123456789ab' } }]] } },
    { chain: { name: 'gi4_0123456789ab' } },
    { chain: { name: BASE_CHAIN, hook: 'forward' } },
  ] });
  const k = parseKernel(json);
  t.true(k.base);
  t.deepEqual([...k.sets.get('i4a_0123456789ab')!.elements], ['10.0.0.5', '10.0.1.0/24', '10.0.2.1-10.0.2.9']);
  t.deepEqual([...k.sets.get('i4c_0123456789ab')!.elements], ['10.0.0.5 . 6 . 80-81', '0.0.0.0/4 . 17 . 53']);
  t.deepEqual([...k.sets.get('self6')!.elements], ['fd00::5 . fd00::5']);
  t.deepEqual([...k.maps.in4], [['10.0.0.5', 'gi4_0123456789ab']]);
  t.deepEqual([...k.chains], ['gi4_0123456789ab']);
  t.deepEqual([...k.counters], ['ai_0123456789ab']);
});

test('with the cluster unknown: the table stays, a new pod is isolated both ways, a gone pod leaves the maps', (t) => {
  const have = parseKernel(JSON.stringify({ nftables: [
    { set: { name: 'self4', type: ['ipv4_addr', 'ipv4_addr'], elem: [{ concat: ['10.0.0.5', '10.0.0.5'] }, { concat: ['10.0.0.6', '10.0.0.6'] }] } },
    { set: { name: 'self6', type: ['ipv6_addr', 'ipv6_addr'] } },
    { set: { name: 'i4a_0123456789ab', type: 'ipv4_addr', flags: ['interval'], elem: ['10.0.9.9'] } },
    { map: { name: 'in4', type: 'ipv4_addr', map: 'verdict', elem: [['10.0.0.5', { jump: { target: 'gi4_0123456789ab' } }], ['10.0.0.6', { jump: { target: 'gi4_0123456789ab' } }]] } },
    { chain: { name: 'gi4_0123456789ab' } }, { chain: { name: BASE_CHAIN } },
  ] }));
  const rs = heldWithChanges(have, (ip) => ip !== '10.0.0.6', ['10.0.0.7']);
  const tx = transaction('knit-policy', have, rs).trim().split('\n');
  const [gin] = isolationChain('ingress', 4);
  const [gout] = isolationChain('egress', 4);
  t.deepEqual(tx, [
    'delete element inet knit-policy self4 { 10.0.0.6 . 10.0.0.6 }',
    'add element inet knit-policy self4 { 10.0.0.7 . 10.0.0.7 }',
    `add chain inet knit-policy ${gin}`,
    `add rule inet knit-policy ${gin} fib saddr type local accept`,
    `add rule inet knit-policy ${gin} drop`,
    `add chain inet knit-policy ${gout}`,
    `add rule inet knit-policy ${gout} drop`,
    'delete element inet knit-policy in4 { 10.0.0.6 }',
    `add element inet knit-policy in4 { 10.0.0.7 : jump ${gin} }`,
    `add element inet knit-policy out4 { 10.0.0.7 : jump ${gout} }`,
  ]);
  t.regex(transaction('knit-policy', emptyKernel(), heldWithChanges(emptyKernel(), () => true, ['10.0.0.7'])), /^table inet knit-policy\ndelete table inet knit-policy\n/, 'no table yet: made whole with the new pod isolated');
});

test('a literal reload that changes only ClusterNetworkPolicies or nodes is a tiers change (NetworkPolicy\'s compiler stays); any other is the whole view', (t) => {
  const base = { namespaces: { x: { labels: {} } }, pods: [{ namespace: 'x', name: 'a', labels: { app: 'a' }, ips: ['10.0.0.1'], hostNetwork: false, ports: [] }], policies: [], clusterNetworkPolicies: [], nodes: {} };
  const src = new LiteralPolicies(base as never, true);
  const said: SourceChange['kind'][] = [];
  src.onChange((c) => said.push(c.kind));
  const cnp = { metadata: { name: 'c' }, spec: { tier: 'Admin', priority: 1, subject: { namespaces: {} }, ingress: [{ action: 'Deny', from: [{ namespaces: {} }] }] } };
  src.replace({ ...base, clusterNetworkPolicies: [cnp] } as never);
  src.replace({ ...base, clusterNetworkPolicies: [cnp], nodes: { n1: { labels: {}, ips: ['192.168.0.1'] } } } as never);
  src.replace({ ...base, pods: [{ ...base.pods[0]!, labels: { app: 'b' } }], clusterNetworkPolicies: [cnp] } as never);
  t.deepEqual(said, ['tiers', 'tiers', 'all']);
  t.is(src.view().clusterNetworkPolicies!.length, 1);
});
