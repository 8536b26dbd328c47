// The semantic oracle (src/policy/evaluate.ts), table by table against the cases of the
// upstream NetworkPolicy e2e suite (k8s test/e2e/network/netpol/network_policy.go) and the
// points of the API that are easy to get wrong (docs/network-policy.md, "Semantics").
import test from 'ava';
import { evaluate, type Flow } from '../../src/policy/evaluate.js';
import { normalizePolicy } from '../../src/policy/normalize.js';
import type { NetworkPolicy, PolicyView, Protocol } from '../../src/policy/types.js';
import { ALL_IDS, NODE_ADDRS, ip4, ip6, modelPods, modelView, np } from '../helpers/policy-model.js';

/** The reachability matrix as the e2e suite prints it: for each pair (from, to), whether the
 * flow passes; self pairs left out (the suite ignores loopback). Answers the pairs that
 * differ from `allowed(from, to)`. */
function mismatches(view: PolicyView, allowed: (from: string, to: string) => boolean, port = 80, protocol: Protocol = 'TCP', family: 4 | 6 = 4): string[] {
  const ip = family === 4 ? ip4 : ip6;
  const bad: string[] = [];
  for (const from of ALL_IDS) for (const to of ALL_IDS) {
    if (from === to) continue;
    const v = evaluate(view, { src: ip(from), dst: ip(to), protocol, port });
    if (v.allowed !== allowed(from, to)) bad.push(`${from} -> ${to}: ${v.allowed ? 'allowed' : 'denied'} (${v.egress.why}; ${v.ingress.why})`);
  }
  return bad;
}
const ns = (id: string) => id.split('/')[0];

test('no policy: everything passes; a policy in another namespace changes nothing here', (t) => {
  t.deepEqual(mismatches(modelView([]), () => true), []);
});

test('default-deny-ingress: every pod of x is isolated for ingress, x still sends', (t) => {
  const view = modelView([np('x', 'deny', { podSelector: {}, policyTypes: ['Ingress'] })]);
  t.deepEqual(mismatches(view, (_f, to) => ns(to) !== 'x'), []);
  t.deepEqual(mismatches(view, (_f, to) => ns(to) !== 'x', 80, 'TCP', 6), [], 'IPv6 alike');
  const v = evaluate(view, { src: ip4('y/a'), dst: ip4('x/b'), protocol: 'TCP', port: 80 });
  t.deepEqual(v.ingress.selecting, ['x/deny']);
  t.regex(v.ingress.why, /x\/b is isolated for ingress by x\/deny/);
});

test('policyTypes inferred as the API defaults it: ingress always, egress only with egress rules', (t) => {
  const noTypes = normalizePolicy(np('x', 'p', { podSelector: {} }));
  t.truthy(noTypes.ingress);
  t.falsy(noTypes.egress);
  t.falsy(normalizePolicy(np('x', 'p', { podSelector: {}, egress: [] })).egress, 'an empty egress list is no egress rules');
  t.truthy(normalizePolicy(np('x', 'p', { podSelector: {}, egress: [{}] })).egress);
  t.falsy(normalizePolicy(np('x', 'p', { podSelector: {}, policyTypes: ['Egress'] })).ingress, 'given types are taken as they are');
  // A policy with only egress rules and no types still isolates ingress (a classic mistake).
  const view = modelView([np('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, egress: [{}] })]);
  t.false(evaluate(view, { src: ip4('y/a'), dst: ip4('x/a'), protocol: 'TCP', port: 80 }).allowed);
  t.true(evaluate(view, { src: ip4('x/a'), dst: ip4('y/a'), protocol: 'TCP', port: 80 }).allowed);
});

test('allow-all ingress: a rule with no from and no ports allows every source and port', (t) => {
  const view = modelView([np('x', 'deny', { podSelector: {}, policyTypes: ['Ingress'] }), np('x', 'allow-all', { podSelector: {}, ingress: [{}] })]);
  t.deepEqual(mismatches(view, () => true), []);
  t.deepEqual(mismatches(view, () => true, 81, 'UDP'), []);
  t.true(evaluate(view, { src: ip4('y/a'), dst: ip4('x/a'), protocol: 1 }).allowed, 'ICMP too: no ports means every protocol');
});

test('default-deny egress needs policyTypes Egress; it blocks everything x sends, DNS included', (t) => {
  const view = modelView([np('x', 'deny-egress', { podSelector: {}, policyTypes: ['Egress'] })]);
  t.deepEqual(mismatches(view, (from) => ns(from) !== 'x'), []);
  t.false(evaluate(view, { src: ip4('x/a'), dst: '10.96.0.10', protocol: 'UDP', port: 53 }).allowed);
});

test('default-deny-all (both types) and the rules that open it', (t) => {
  const view = modelView([np('x', 'deny-all', { podSelector: {}, policyTypes: ['Ingress', 'Egress'] })]);
  t.deepEqual(mismatches(view, (from, to) => ns(from) !== 'x' && ns(to) !== 'x'), []);
});

test('namespaceSelector only: pods of the selected namespaces, any pod there', (t) => {
  const view = modelView([np('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }] }] })]);
  t.deepEqual(mismatches(view, (from, to) => to !== 'x/a' || ns(from) === 'y'), []);
});

test('namespaces by name through the immutable kubernetes.io/metadata.name label, listed or not', (t) => {
  const pol = np('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: ['y'] }] } }] }] });
  t.deepEqual(mismatches(modelView([pol]), (from, to) => to !== 'x/a' || ns(from) === 'y'), []);
  t.deepEqual(mismatches(modelView([pol], { namespaces: [] }), (from, to) => to !== 'x/a' || ns(from) === 'y'), [], 'a namespace the view lacks still has its name label');
});

test('podSelector with matchExpressions: pods of the policy\'s own namespace only', (t) => {
  const view = modelView([np('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ podSelector: { matchExpressions: [{ key: 'pod', operator: 'In', values: ['b'] }] } }] }] })]);
  t.deepEqual(mismatches(view, (from, to) => to !== 'x/a' || from === 'x/b'), []);
});

test('matchExpressions NotIn and DoesNotExist hold for pods without the key; Exists does not', (t) => {
  const notIn = modelView([np('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchExpressions: [{ key: 'ns', operator: 'NotIn', values: ['y'] }] } }] }] })]);
  t.deepEqual(mismatches(notIn, (from, to) => to !== 'x/a' || ns(from) !== 'y'), []);
  const pods = modelPods();
  pods.find((p) => p.namespace === 'z' && p.name === 'c')!.labels = {};
  const dne = modelView([np('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: {}, podSelector: { matchExpressions: [{ key: 'pod', operator: 'DoesNotExist' }] } }] }] })], { pods });
  t.deepEqual(mismatches(dne, (from, to) => to !== 'x/a' || from === 'z/c'), []);
  const exists = modelView([np('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: {}, podSelector: { matchExpressions: [{ key: 'pod', operator: 'Exists' }] } }] }] })], { pods });
  t.deepEqual(mismatches(exists, (from, to) => to !== 'x/a' || from !== 'z/c'), []);
});

test('both selectors in one peer are AND; in two peers OR', (t) => {
  const and = modelView([np('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } }, podSelector: { matchLabels: { pod: 'b' } } }] }] })]);
  t.deepEqual(mismatches(and, (from, to) => to !== 'x/a' || from === 'y/b'), []);
  const or = modelView([np('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }, { podSelector: { matchLabels: { pod: 'b' } } }] }] })]);
  t.deepEqual(mismatches(or, (from, to) => to !== 'x/a' || ns(from) === 'y' || from === 'x/b'), []);
});

test('several policies are OR\'d: one allowing is enough', (t) => {
  const view = modelView([
    np('x', 'from-y', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }] }] }),
    np('x', 'from-z', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'z' } } }] }] }),
  ]);
  t.deepEqual(mismatches(view, (from, to) => to !== 'x/a' || ns(from) !== 'x'), []);
  const v = evaluate(view, { src: ip4('z/b'), dst: ip4('x/a'), protocol: 'TCP', port: 80 });
  t.deepEqual(v.ingress.selecting, ['x/from-y', 'x/from-z']);
  t.deepEqual(v.ingress.allowedBy, [{ policy: 'x/from-z', rule: 0 }]);
});

test('ports: by number, only that port and protocol; UDP-only does not open TCP; SCTP is not TCP', (t) => {
  const only81 = modelView([np('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ ports: [{ port: 81 }] }] })]);
  t.deepEqual(mismatches(only81, (_f, to) => to !== 'x/a', 80), []);
  t.deepEqual(mismatches(only81, () => true, 81), []);
  t.deepEqual(mismatches(only81, (_f, to) => to !== 'x/a', 81, 'UDP'), [], 'protocol defaults to TCP');
  const udp = modelView([np('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ ports: [{ port: 81, protocol: 'UDP' }] }] })]);
  t.deepEqual(mismatches(udp, (_f, to) => to !== 'x/a', 81, 'TCP'), []);
  t.deepEqual(mismatches(udp, () => true, 81, 'UDP'), []);
  const sctp = modelView([np('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ ports: [{ port: 80, protocol: 'SCTP' }] }] })]);
  t.deepEqual(mismatches(sctp, (_f, to) => to !== 'x/a', 80, 'TCP'), []);
  t.deepEqual(mismatches(sctp, () => true, 80, 'SCTP'), []);
  t.false(evaluate(only81, { src: ip4('y/a'), dst: ip4('x/a'), protocol: 1 }).allowed, 'ICMP: a rule with ports allows no ICMP');
  const proto = modelView([np('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ ports: [{ protocol: 'UDP' }] }] })]);
  t.true(evaluate(proto, { src: ip4('y/a'), dst: ip4('x/a'), protocol: 'UDP', port: 65000 }).allowed, 'a protocol without a port: every port of it');
  t.false(evaluate(proto, { src: ip4('y/a'), dst: ip4('x/a'), protocol: 'TCP', port: 65000 }).allowed);
});

test('endPort: the inclusive range port..endPort', (t) => {
  const view = modelView([np('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ ports: [{ port: 80, endPort: 81 }] }] })]);
  for (const port of [80, 81]) t.deepEqual(mismatches(view, () => true, port), []);
  for (const port of [79, 82]) t.false(evaluate(view, { src: ip4('y/a'), dst: ip4('x/a'), protocol: 'TCP', port }).allowed, `port ${port}`);
});

test('named ports: ingress resolves on the selected pod, egress on the destination; a name no pod has allows nothing', (t) => {
  const ing = modelView([np('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ ports: [{ port: 'serve-81-tcp' }] }] })]);
  t.deepEqual(mismatches(ing, (_f, to) => to !== 'x/a', 80), []);
  t.deepEqual(mismatches(ing, () => true, 81), []);
  t.deepEqual(mismatches(ing, (_f, to) => to !== 'x/a', 81, 'UDP'), [], 'the name is of a TCP port');
  const eg = modelView([np('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, policyTypes: ['Egress'], egress: [{ ports: [{ port: 'serve-80-tcp' }] }] })]);
  t.deepEqual(mismatches(eg, () => true, 80), []);
  t.deepEqual(mismatches(eg, (from) => from !== 'x/a', 81), []);
  // Pods of one selection that number a name differently: each is judged by its own.
  const pods = modelPods();
  pods.find((p) => p.namespace === 'x' && p.name === 'b')!.ports = [{ name: 'web', port: 81, protocol: 'TCP' }];
  pods.find((p) => p.namespace === 'x' && p.name === 'c')!.ports = [{ name: 'web', port: 80, protocol: 'TCP' }];
  const split = modelView([np('x', 'p', { podSelector: {}, ingress: [{ ports: [{ port: 'web' }] }] })], { pods });
  t.deepEqual(mismatches(split, (_f, to) => to === 'x/c' || ns(to) !== 'x', 80), []);
  t.deepEqual(mismatches(split, (_f, to) => to === 'x/b' || ns(to) !== 'x', 81), []);
  t.false(evaluate(eg, { src: ip4('x/a'), dst: '8.8.8.8', protocol: 'TCP', port: 80 }).allowed, 'egress by name to an address that is no pod: nothing to resolve');
});

test('ipBlock: cidr less except; an excepted address is still allowed by another rule that names it', (t) => {
  const large = '0.0.0.0/4'; // the e2e's makeLargeCIDRForIP for 10.x is 0.0.0.0/4
  const except = modelView([np('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, policyTypes: ['Egress'], egress: [{ to: [{ ipBlock: { cidr: large, except: [`${ip4('x/b')}/32`] } }] }] })]);
  t.deepEqual(mismatches(except, (from, to) => from !== 'x/a' || to !== 'x/b'), []);
  const both = modelView([np('x', 'p', {
    podSelector: { matchLabels: { pod: 'a' } }, policyTypes: ['Egress'],
    egress: [{ to: [{ ipBlock: { cidr: large, except: [`${ip4('x/b')}/32`] } }] }, { to: [{ ipBlock: { cidr: `${ip4('x/b')}/32` } }] }],
  })]);
  t.deepEqual(mismatches(both, () => true), []);
  const v = evaluate(both, { src: ip4('x/a'), dst: ip4('x/b'), protocol: 'TCP', port: 80 });
  t.deepEqual(v.egress.allowedBy, [{ policy: 'x/p', rule: 1 }]);
  const v6 = modelView([np('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, policyTypes: ['Egress'], egress: [{ to: [{ ipBlock: { cidr: 'fd00::/64', except: [`${ip6('y/c')}/128`] } }] }] })]);
  t.deepEqual(mismatches(v6, (from, to) => from !== 'x/a' || to !== 'y/c', 80, 'TCP', 6), []);
  t.deepEqual(mismatches(v6, (from) => from !== 'x/a', 80, 'TCP', 4), [], 'an IPv6 block allows no IPv4 destination');
  t.true(evaluate(except, { src: ip4('x/a'), dst: '10.200.0.1', protocol: 'TCP', port: 80 }).allowed, 'an address outside the cluster, in the block');
  t.false(evaluate(except, { src: ip4('x/a'), dst: '172.16.0.1', protocol: 'TCP', port: 80 }).allowed, 'outside the block');
});

test('ipBlock host bits are ignored, as the API\'s own CIDR parsing does', (t) => {
  const view = modelView([np('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ ipBlock: { cidr: '10.0.2.77/24' } }] }] })]);
  t.deepEqual(mismatches(view, (from, to) => to !== 'x/a' || ns(from) === 'y'), []);
});

test('the node: a pod\'s own node always reaches it and is reached; other nodes are addresses like any', (t) => {
  const view = modelView([np('x', 'deny-all', { podSelector: {}, policyTypes: ['Ingress', 'Egress'] })]);
  // x/a is on n1.
  t.true(evaluate(view, { src: NODE_ADDRS.n1![0]!, dst: ip4('x/a'), protocol: 'TCP', port: 80 }).allowed, 'kubelet probes from the node');
  t.true(evaluate(view, { src: ip4('x/a'), dst: NODE_ADDRS.n1![0]!, protocol: 'TCP', port: 10250 }).allowed, 'to its node');
  t.false(evaluate(view, { src: NODE_ADDRS.n2![0]!, dst: ip4('x/a'), protocol: 'TCP', port: 80 }).allowed, 'another node is denied');
  t.true(evaluate(view, { src: ip4('x/a'), dst: ip4('x/a'), protocol: 'TCP', port: 80 }).allowed, 'a pod cannot block itself');
});

test('hostNetwork pods: never selected as pods; their address is their node\'s', (t) => {
  const pods = [...modelPods(), { namespace: 'y', name: 'host', labels: { pod: 'b' }, ips: ['192.168.0.2'], node: 'n2', hostNetwork: true }];
  const view = modelView([np('x', 'p', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: {}, podSelector: { matchLabels: { pod: 'b' } } }] }] })], { pods, nodes: { n1: ['192.168.0.1'] } });
  t.false(evaluate(view, { src: '192.168.0.2', dst: ip4('x/a'), protocol: 'TCP', port: 80 }).allowed, 'pod=b on the host network is not a pod=b peer');
  t.true(evaluate(view, { src: ip4('y/b'), dst: ip4('x/a'), protocol: 'TCP', port: 80 }).allowed);
  const local = [...modelPods(), { namespace: 'y', name: 'host', labels: {}, ips: ['192.168.0.9'], node: 'n1', hostNetwork: true }];
  t.true(evaluate(modelView([np('x', 'deny', { podSelector: {} })], { pods: local, nodes: {} }), { src: '192.168.0.9', dst: ip4('x/a'), protocol: 'TCP', port: 80 }).allowed, 'a hostNetwork pod of the pod\'s node is that node');
});

test('a policy knit cannot read whole: its pods isolated, none of its rules, and the problem named', (t) => {
  const bad: NetworkPolicy = np('x', 'bad', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ podSelector: { matchExpressions: [{ key: 'pod', operator: 'Near', values: ['b'] }] } }] }, { ports: [{ port: 80 }] }] });
  const p = normalizePolicy(bad);
  t.deepEqual(p.problems, ['spec.ingress[0].from[0].podSelector.matchExpressions[0].operator: "Near" is not In, NotIn, Exists or DoesNotExist']);
  t.deepEqual(p.ingress, []);
  t.deepEqual(mismatches(modelView([bad]), (_f, to) => to !== 'x/a'), [], 'rule 1 (port 80) is not applied either: never half-applied');
  for (const [spec, problem] of [
    [{ ingress: [{ ports: [{ port: 'http', endPort: 90 }] }] }, /endPort: cannot go with a named port/],
    [{ ingress: [{ ports: [{ port: 90, endPort: 80 }] }] }, /port 90, endPort 80 is not a port or a range/],
    [{ ingress: [{ ports: [{ protocol: 'ICMP' }] }] }, /protocol: "ICMP" is not TCP, UDP or SCTP/],
    [{ ingress: [{ from: [{ ipBlock: { cidr: '10.0.0.0/8', except: ['fd00::/8'] } }] }] }, /except\[0\]: "fd00::\/8" is not a CIDR of the cidr's family/],
    [{ ingress: [{ from: [{}] }] }, /a peer needs podSelector, namespaceSelector or ipBlock/],
    [{ policyTypes: ['Sideways'] }, /policyTypes\[0\]: "Sideways"/],
  ] as const) t.regex(normalizePolicy(np('x', 'q', { podSelector: {}, ...spec } as unknown as NetworkPolicy['spec'])).problems.join('; '), problem);
});

test('flows with addresses that are not addresses are refused', (t) => {
  t.throws(() => evaluate(modelView([]), { src: 'pod-a', dst: '10.0.1.1', protocol: 'TCP', port: 80 } as Flow), { message: /"pod-a"/ });
});
