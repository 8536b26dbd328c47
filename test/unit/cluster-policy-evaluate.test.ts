// The tiered oracle (src/policy/cluster-policy-evaluate.ts) and ClusterNetworkPolicy's
// normalization, table by table: the API's user stories (network-policy-api v0.3.0
// site-src/user-story-examples, on the model's namespaces), the order of tiers, priorities and
// rules, each peer and protocol kind, and what knit does with what it cannot read.
import test from 'ava';
import { evaluateTiered } from '../../src/policy/cluster-policy-evaluate.js';
import { normalizeClusterPolicy, type ClusterNetworkPolicy } from '../../src/policy/cluster-policy.js';
import type { NetworkPolicy, PolicyView, Protocol } from '../../src/policy/types.js';
import { ALL_IDS, NODE_ADDRS, ip4, ip6, modelView, np } from '../helpers/policy-model.js';
import { MODEL_NODES, cnp, fromNs, fromPod, nsSel, podSel, rule } from '../helpers/cluster-policy-model.js';

const ns = (id: string) => id.split('/')[0]!;
const podOf = (id: string) => id.split('/')[1]!;

/** The pairs (from, to) whose verdict differs from `allowed(from, to)`, with the oracle's why. */
function mismatches(cnps: ClusterNetworkPolicy[], nps: NetworkPolicy[], allowed: (from: string, to: string) => boolean, port = 80, protocol: Protocol | number = 'TCP', family: 4 | 6 = 4, over: Partial<PolicyView> = {}): string[] {
  const ip = family === 4 ? ip4 : ip6;
  const view = modelView(nps, over);
  const bad: string[] = [];
  for (const from of ALL_IDS) for (const to of ALL_IDS) {
    if (from === to) continue;
    const v = evaluateTiered(view, cnps, MODEL_NODES, { src: ip(from), dst: ip(to), protocol, ...(typeof protocol === 'string' && { port }) });
    if (v.allowed !== allowed(from, to)) bad.push(`${from} -> ${to}: ${v.allowed ? 'allowed' : 'denied'} (${v.egress.why}; ${v.ingress.why})`);
  }
  return bad;
}

const denyIngressX = np('x', 'deny', { podSelector: {}, policyTypes: ['Ingress'] });
const allowAllIngressX = np('x', 'allow', { podSelector: {}, ingress: [{}] });

test('no ClusterNetworkPolicy: the verdict is NetworkPolicy\'s', (t) => {
  t.deepEqual(mismatches([], [], () => true), []);
  t.deepEqual(mismatches([], [denyIngressX], (_f, to) => ns(to) !== 'x'), []);
});

test('story 1, Admin Deny: x takes nothing from any namespace, and a NetworkPolicy cannot lift it', (t) => {
  const deny = cnp('cluster-wide-deny-example', 'Admin', 10, { subject: { namespaces: nsSel('x') }, ingress: [rule('Deny', [{ namespaces: {} }], { name: 'select-all-deny-all' })] });
  t.deepEqual(mismatches([deny], [], (_f, to) => ns(to) !== 'x'), []);
  t.deepEqual(mismatches([deny], [allowAllIngressX], (_f, to) => ns(to) !== 'x'), []);
  t.deepEqual(mismatches([deny], [], (_f, to) => ns(to) !== 'x', 0, 1), [], 'ICMP too: the rule has no protocols');
  const v = evaluateTiered(modelView([]), [deny], MODEL_NODES, { src: ip4('y/a'), dst: ip4('x/b'), protocol: 'TCP', port: 80 });
  t.is(v.ingress.decidedBy, 'Admin');
  t.deepEqual(v.ingress.decision, { tier: 'Admin', policy: 'cnp:cluster-wide-deny-example', rule: 0, ruleName: 'select-all-deny-all', action: 'Deny' });
  t.regex(v.ingress.why, /denied by cnp:cluster-wide-deny-example ingress\[0\] \(select-all-deny-all\), Admin tier/);
  t.is(v.egress.decidedBy, 'default', 'y/a\'s egress: nothing decides, allowed');
});

test('story 2, Admin Accept: monitoring reaches every pod and every pod reaches DNS, whatever NetworkPolicy says', (t) => {
  const allow = cnp('cluster-wide-allow-example', 'Admin', 30, {
    ingress: [rule('Accept', [fromNs('z')])],
    egress: [{ action: 'Accept', to: [fromPod('y', 'c')] }],
  });
  const denyAll = (n: string) => np(n, 'deny-all', { podSelector: {}, policyTypes: ['Ingress', 'Egress'] });
  const nps = [denyAll('x'), denyAll('y')];
  // From z: accepted at x and y's ingress (z's egress is not isolated). To y/c: accepted as x's
  // and y's egress, and y/c's ingress... is y's deny-all (Accept of egress is not ingress).
  t.deepEqual(mismatches([allow], nps, (f, to) => {
    const egressOk = ns(f) === 'z' || to === 'y/c';
    const ingressOk = ns(to) === 'z' || ns(f) === 'z';
    return egressOk && ingressOk;
  }), []);
});

test('story 3, Pass: delegated to NetworkPolicy, past a lower-precedence Admin Deny; then Baseline; then allowed', (t) => {
  const pass = cnp('pub-svc-delegate-example', 'Admin', 20, {
    egress: [{ action: 'Pass', to: [fromPod('y', 'b')], protocols: [{ tcp: { destinationPort: { number: 80 } } }, { destinationNamedPort: 'serve-81-udp' }, { udp: { destinationPort: { number: 53 } } }] }],
  });
  const denyLater = cnp('deny-egress-to-y', 'Admin', 40, { egress: [{ action: 'Deny', to: [fromNs('y')] }] });
  t.deepEqual(mismatches([pass, denyLater], [], (_f, to) => ns(to) !== 'y', 80, 'UDP'), [], 'UDP 80 is not passed: denied');
  t.deepEqual(mismatches([pass, denyLater], [], (_f, to) => ns(to) !== 'y' || to === 'y/b'), [], 'TCP 80 to y/b passed on, nothing after: allowed');
  t.deepEqual(mismatches([pass, denyLater], [], (_f, to) => ns(to) !== 'y' || to === 'y/b', 81, 'UDP'), [], 'the named port, with its own protocol');
  t.deepEqual(mismatches([pass, denyLater], [], (_f, to) => ns(to) !== 'y', 81, 'TCP'), [], 'serve-81-udp is not TCP 81');
  // NetworkPolicy decides what was passed, for the pods it selects.
  const xEgress = np('x', 'egress-to-z', { podSelector: {}, policyTypes: ['Egress'], egress: [{ to: [{ namespaceSelector: nsSel('z') }] }] });
  t.deepEqual(mismatches([pass, denyLater], [xEgress], (f, to) => (ns(f) === 'x' ? ns(to) === 'z' : ns(to) !== 'y' || to === 'y/b')), []);
  // Then Baseline, for the pods NetworkPolicy does not select.
  const baseline = cnp('baseline-deny-b', 'Baseline', 1, { egress: [{ action: 'Deny', to: [fromPod(undefined, 'b')] }] });
  t.deepEqual(mismatches([pass, denyLater, baseline], [xEgress], (f, to) => (ns(f) === 'x' ? ns(to) === 'z' : ns(to) !== 'y' && podOf(to) !== 'b')), []);
  const v = evaluateTiered(modelView([]), [pass, denyLater, baseline], MODEL_NODES, { src: ip4('z/a'), dst: ip4('y/b'), protocol: 'TCP', port: 80 });
  t.is(v.egress.decidedBy, 'Baseline');
  t.deepEqual(v.egress.passed.map((p) => p.policy), ['cnp:pub-svc-delegate-example']);
});

test('story 5, Baseline Deny: nothing reaches a pod unless a NetworkPolicy selecting it allows it', (t) => {
  const guard = cnp('default', 'Baseline', 10, { ingress: [rule('Deny', [{ namespaces: {} }])] });
  t.deepEqual(mismatches([guard], [], () => false), []);
  // x's NetworkPolicy allows from z: x's pods are decided by it; y's and z's stay denied.
  const xFromZ = np('x', 'from-z', { podSelector: {}, ingress: [{ from: [{ namespaceSelector: nsSel('z') }] }] });
  t.deepEqual(mismatches([guard], [xFromZ], (f, to) => ns(to) === 'x' && ns(f) === 'z'), []);
  // An Admin Pass for traffic inside a namespace does not lift it: Baseline still denies.
  const passSame = cnp('pass-x', 'Admin', 1, { subject: { namespaces: nsSel('x') }, ingress: [rule('Pass', [fromNs('x')])] });
  t.deepEqual(mismatches([guard, passSame], [], () => false), []);
});

test('tiers and priorities: lower priority first, the same priority by name, rules in order, Baseline Pass allows', (t) => {
  const denyY = (name: string, p: number) => cnp(name, 'Admin', p, { ingress: [rule('Deny', [fromNs('y')])] });
  const acceptY = (name: string, p: number) => cnp(name, 'Admin', p, { ingress: [rule('Accept', [fromNs('y')])] });
  const intoX = (id: string) => ns(id) === 'x';
  const denyAllX = np('x', 'deny', { podSelector: {}, policyTypes: ['Ingress'] });
  t.deepEqual(mismatches([denyY('d', 5), acceptY('a', 10)], [], (f) => ns(f) !== 'y'), [], 'Deny at 5 before Accept at 10');
  t.deepEqual(mismatches([denyY('d', 10), acceptY('a', 5)], [denyAllX], (f, to) => ns(f) === 'y' || !intoX(to)), [], 'Accept at 5 before Deny at 10, over NetworkPolicy');
  t.deepEqual(mismatches([denyY('b-deny', 5), acceptY('a-accept', 5)], [], () => true), [], 'the same priority: by name (a choice the API leaves to implementations)');
  const ordered = cnp('ordered', 'Admin', 1, { ingress: [rule('Accept', [fromPod('y', 'a')]), rule('Deny', [fromNs('y')])] });
  t.deepEqual(mismatches([ordered], [], (f) => ns(f) !== 'y' || f === 'y/a'), [], 'the first rule that matches');
  const basePass = cnp('bp', 'Baseline', 1, { ingress: [rule('Pass', [fromNs('y')]), rule('Deny', [{ namespaces: {} }])] });
  t.deepEqual(mismatches([basePass], [], (f) => ns(f) === 'y'), [], 'Baseline Pass: allowed by default');
  const adminFirst = cnp('z-admin', 'Admin', 999, { ingress: [rule('Deny', [fromNs('z')])] });
  const baselineAccept = cnp('a-baseline', 'Baseline', 0, { ingress: [rule('Accept', [{ namespaces: {} }])] });
  t.deepEqual(mismatches([adminFirst, baselineAccept], [], (f) => ns(f) !== 'z'), [], 'every Admin priority before any Baseline one');
});

test('each direction on its own: an egress Accept does not open the destination\'s ingress', (t) => {
  const acceptOut = cnp('out', 'Admin', 1, { subject: { namespaces: nsSel('x') }, egress: [{ action: 'Accept', to: [{ namespaces: {} }] }] });
  const denyIn = cnp('in', 'Admin', 2, { subject: { namespaces: nsSel('y') }, ingress: [rule('Deny', [fromNs('x')])] });
  t.deepEqual(mismatches([acceptOut, denyIn], [], (f, to) => !(ns(f) === 'x' && ns(to) === 'y')), []);
});

test('protocols: numbers, ranges, UDP, SCTP; none means every protocol, ICMP included; with some, ICMP is not matched', (t) => {
  const tcp80 = cnp('p', 'Admin', 1, { subject: { namespaces: nsSel('x') }, ingress: [rule('Deny', [{ namespaces: {} }], { protocols: [{ tcp: { destinationPort: { number: 80 } } }, { udp: { destinationPort: { range: { start: 81, end: 90 } } } }, { sctp: {} }] })] });
  const intoX = (_f: string, to: string) => ns(to) !== 'x';
  t.deepEqual(mismatches([tcp80], [], intoX, 80, 'TCP'), []);
  t.deepEqual(mismatches([tcp80], [], () => true, 81, 'TCP'), []);
  t.deepEqual(mismatches([tcp80], [], () => true, 80, 'UDP'), []);
  t.deepEqual(mismatches([tcp80], [], intoX, 81, 'UDP'), []);
  t.deepEqual(mismatches([tcp80], [], intoX, 4242, 'SCTP'), [], 'sctp: {} is every SCTP port');
  t.deepEqual(mismatches([tcp80], [], () => true, 0, 1), [], 'ICMP: not one of the protocols');
});

test('named ports: ingress resolves on the subject, egress on the peer, each with the container port\'s protocol', (t) => {
  const pods = modelView([]).pods.map((p) => (p.name === 'c' ? { ...p, ports: [{ name: 'web', port: 81, protocol: 'UDP' as const }] } : { ...p, ports: [{ name: 'web', port: 80, protocol: 'TCP' as const }] }));
  const denyWebIn = cnp('p', 'Admin', 1, { subject: { namespaces: nsSel('x') }, ingress: [rule('Deny', [{ namespaces: {} }], { protocols: [{ destinationNamedPort: 'web' }] })] });
  t.deepEqual(mismatches([denyWebIn], [], (_f, to) => !(ns(to) === 'x' && podOf(to) !== 'c'), 80, 'TCP', 4, { pods }), []);
  t.deepEqual(mismatches([denyWebIn], [], (_f, to) => to !== 'x/c', 81, 'UDP', 4, { pods }), [], 'x/c names UDP 81 web');
  const denyWebOut = cnp('q', 'Admin', 1, { subject: { namespaces: nsSel('x') }, egress: [{ action: 'Deny', to: [{ namespaces: {} }], protocols: [{ destinationNamedPort: 'web' }] }] });
  t.deepEqual(mismatches([denyWebOut], [], (f, to) => !(ns(f) === 'x' && podOf(to) !== 'c'), 80, 'TCP', 4, { pods }), []);
  t.deepEqual(mismatches([denyWebOut], [], (f, to) => !(ns(f) === 'x' && podOf(to) === 'c'), 81, 'UDP', 4, { pods }), []);
});

test('networks: a CIDR matches pods too (0.0.0.0/0 is every IPv4 pod) and ICMP; each family its own', (t) => {
  const deny = cnp('n', 'Admin', 1, { subject: { namespaces: nsSel('x') }, egress: [{ action: 'Pass', to: [fromNs('x')] }, { action: 'Deny', to: [{ networks: ['0.0.0.0/0'] }] }] });
  t.deepEqual(mismatches([deny], [], (f, to) => ns(f) !== 'x' || ns(to) === 'x'), []);
  t.deepEqual(mismatches([deny], [], (f, to) => ns(f) !== 'x' || ns(to) === 'x', 0, 1), [], 'ICMP');
  t.deepEqual(mismatches([deny], [], () => true, 80, 'TCP', 6), [], 'IPv6 untouched');
  const narrow = cnp('m', 'Admin', 1, { egress: [{ action: 'Deny', to: [{ networks: [`${ip4('y/b')}/32`, 'fd00::3:0/112'] }] }] });
  t.deepEqual(mismatches([narrow], [], (_f, to) => to !== 'y/b'), []);
  t.deepEqual(mismatches([narrow], [], (_f, to) => ns(to) !== 'z', 80, 'TCP', 6), []);
  const out = evaluateTiered(modelView([]), [narrow], MODEL_NODES, { src: ip4('x/a'), dst: '10.0.2.2', protocol: 'TCP', port: 80 });
  t.false(out.allowed, 'an address no pod holds');
});

test('nodes: egress to the addresses of the nodes the selector picks; hostNetwork pods are their node, never a subject', (t) => {
  const denyZoneOne = cnp('nd', 'Admin', 1, { egress: [{ action: 'Deny', to: [{ nodes: { matchLabels: { zone: 'one' } } }], protocols: [{ tcp: { destinationPort: { number: 10250 } } }] }] });
  const flow = (src: string, dst: string) => evaluateTiered(modelView([]), [denyZoneOne], MODEL_NODES, { src, dst, protocol: 'TCP', port: 10250 });
  t.false(flow(ip4('x/b'), NODE_ADDRS.n1![0]!).allowed, 'x/b (on n2) to n1');
  t.false(flow(ip4('x/a'), NODE_ADDRS.n1![0]!).allowed, 'x/a (on n1) to its own node: ClusterNetworkPolicy judges that too');
  t.true(flow(ip4('x/a'), NODE_ADDRS.n2![0]!).allowed, 'n2 is zone two');
  t.false(flow(ip6('x/a'), NODE_ADDRS.n1![1]!).allowed, 'every address of the node');
  // A hostNetwork pod is not a subject: it sends as its node.
  const hostPod = { namespace: 'x', name: 'h', labels: { pod: 'h' }, ips: [NODE_ADDRS.n2![0]!], node: 'n2', hostNetwork: true };
  const denyAllOut = cnp('all', 'Admin', 1, { egress: [{ action: 'Deny', to: [{ networks: ['0.0.0.0/0'] }] }] });
  const v = evaluateTiered(modelView([], { pods: [...modelView([]).pods, hostPod] }), [denyAllOut], MODEL_NODES, { src: NODE_ADDRS.n2![0]!, dst: ip4('y/a'), protocol: 'TCP', port: 80 });
  t.true(v.allowed, v.egress.why);
  // The own node reaching a pod: never judged by ClusterNetworkPolicy (no ingress peer names it).
  const denyAllIn = cnp('in', 'Admin', 1, { ingress: [{ action: 'Deny', from: [{ namespaces: {} }] }] });
  t.true(evaluateTiered(modelView([]), [denyAllIn], MODEL_NODES, { src: NODE_ADDRS.n1![0]!, dst: ip4('x/a'), protocol: 'TCP', port: 80 }).allowed);
});

test('own node: NetworkPolicy allows it to the pods it selects, after Admin and before Baseline', (t) => {
  const baselineDeny = cnp('b', 'Baseline', 1, { egress: [{ action: 'Deny', to: [{ networks: ['0.0.0.0/0'] }] }] });
  const npEgress = np('x', 'egress', { podSelector: {}, policyTypes: ['Egress'] });
  const node1 = NODE_ADDRS.n1![0]!;
  const to = (id: string, cnps: ClusterNetworkPolicy[]) => evaluateTiered(modelView([npEgress]), cnps, MODEL_NODES, { src: ip4(id), dst: node1, protocol: 'TCP', port: 53 }).allowed;
  t.true(to('x/a', [baselineDeny]), 'x/a: NetworkPolicy selects it, its own node is allowed');
  t.false(to('y/a', [baselineDeny]), 'y/a: nothing selects it in NetworkPolicy, Baseline denies');
  t.false(to('x/a', [cnp('a', 'Admin', 1, { egress: [{ action: 'Deny', to: [{ nodes: {} }] }] })]), 'Admin before NetworkPolicy');
});

test('a pod to itself is never judged', (t) => {
  const denyAll = cnp('all', 'Admin', 1, { ingress: [rule('Deny', [{ namespaces: {} }])], egress: [{ action: 'Deny', to: [{ networks: ['0.0.0.0/0'] }] }] });
  t.true(evaluateTiered(modelView([]), [denyAll], MODEL_NODES, { src: ip4('x/a'), dst: ip4('x/a'), protocol: 'TCP', port: 80 }).allowed);
});

test('normalization: every field the API has, and each problem named by its field', (t) => {
  const p = normalizeClusterPolicy(cnp('full', 'Baseline', 7, {
    subject: { pods: { namespaceSelector: nsSel('x'), podSelector: podSel('a') } },
    ingress: [{ name: 'r0', action: 'Accept', from: [fromNs('y'), fromPod('z', 'b')], protocols: [{ tcp: { destinationPort: { range: { start: 80, end: 81 } } } }] }],
    egress: [{ action: 'Deny', to: [{ nodes: {} }, { networks: ['10.0.0.0/8', 'fd00::/8'] }] }],
  }));
  t.deepEqual(p.problems, []);
  t.is(p.key, 'cnp:full');
  t.is(p.tier, 'Baseline');
  t.is(p.priority, 7);
  t.deepEqual(p.ingress[0]!.protocols, [{ protocol: 'TCP', from: 80, to: 81 }]);
  t.is(p.ingress[0]!.name, 'r0');
  t.deepEqual((p.egress[0]!.peers as { kind: string }[]).map((x) => x.kind), ['nodes', 'block', 'block']);

  const problems = (spec: Partial<ClusterNetworkPolicy['spec']>) => normalizeClusterPolicy({ metadata: { name: 'bad' }, spec: { tier: 'Admin', priority: 1, subject: { namespaces: {} }, ...spec } });
  t.regex(problems({ tier: 'Middle' }).problems.join(), /spec\.tier: "Middle" is not Admin or Baseline/);
  t.regex(problems({ priority: 1001 }).problems.join(), /spec\.priority: "1001"/);
  t.regex(problems({ subject: {} }).problems.join(), /spec\.subject: needs exactly one of namespaces and pods/);
  t.regex(problems({ ingress: [{ action: 'Allow', from: [{ namespaces: {} }] }] }).problems.join(), /spec\.ingress\[0\]\.action: "Allow" is not Accept, Deny or Pass/);
  t.regex(problems({ ingress: [{ action: 'Deny', from: [{ nodes: {} }] }] }).problems.join(), /spec\.ingress\[0\]\.from\[0\]\.nodes: not an ingress peer/);
  t.regex(problems({ egress: [{ action: 'Deny', to: [{ networks: ['10.0.0.1'] }] }] }).problems.join(), /spec\.egress\[0\]\.to\[0\]\.networks\[0\]: "10\.0\.0\.1" is not a CIDR/);
  t.regex(problems({ egress: [{ action: 'Deny', to: [{}] }] }).problems.join(), /spec\.egress\[0\]\.to\[0\]: a peer needs exactly one of/);
  t.regex(problems({ egress: [{ action: 'Deny', to: [{ namespaces: {} }], protocols: [{ tcp: { destinationPort: { range: { start: 90, end: 80 } } } }] }] }).problems.join(), /protocols\[0\]\.tcp\.destinationPort\.range: 90-80/);
  t.regex(problems({ egress: [{ action: 'Deny', to: [{ namespaces: { matchExpressions: [{ key: 'k', operator: 'Near' }] } }] }] }).problems.join(), /to\[0\]\.namespaces\.matchExpressions\[0\]\.operator/);
});

test('fail closed as the API defines it: an Accept rule knit cannot read matches nothing, a Deny or Pass rule denies all', (t) => {
  const dns = cnp('dns', 'Admin', 1, { egress: [{ action: 'Accept', to: [{ domainNames: ['example.com'] }] }] });
  const n = normalizeClusterPolicy(dns);
  t.regex(n.problems.join(), /spec\.egress\[0\]\.to\[0\]\.domainNames: knit cannot match domain names/);
  t.deepEqual(n.egress[0]!.peers, [], 'matches nothing');
  const denyX = np('x', 'deny', { podSelector: {}, policyTypes: ['Egress'] });
  t.deepEqual(mismatches([dns], [denyX], (f) => ns(f) !== 'x'), [], 'so the NetworkPolicy below still decides');
  const unreadable = cnp('bad-pass', 'Admin', 1, { subject: { namespaces: nsSel('x') }, ingress: [{ action: 'Pass', from: [{ namespaces: {}, pods: { podSelector: {} } } as never] }] });
  t.deepEqual(normalizeClusterPolicy(unreadable).ingress[0], { index: 0, action: 'Deny', peers: 'all', protocols: 'all' });
  t.deepEqual(mismatches([unreadable], [allowAllIngressX], (_f, to) => ns(to) !== 'x'), []);
  const badTier = cnp('bad-tier', 'Admin', 1, { subject: { namespaces: nsSel('y') }, ingress: [rule('Accept', [{ namespaces: {} }]), rule('Pass', [fromNs('x')])] });
  (badTier.spec as { tier: string }).tier = 'Platform';
  t.deepEqual(mismatches([badTier], [], (_f, to) => ns(to) !== 'y'), [], 'a policy knit cannot read: each of its rules fails closed');
});
