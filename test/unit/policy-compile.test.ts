// The compiler (src/policy/compile.ts, boxes.ts, ruleset.ts) against the oracle: for each
// policy set, every pod pair, both families, TCP/UDP on 80 and 81, SCTP and ICMP, the verdict
// of the compiled datapath on the nodes the packet crosses (egress on the source's, ingress on
// the destination's) equals evaluate()'s. Then the transactions: a first one builds the table,
// a change touches only its elements, and no change is no transaction.
import test from 'ava';
import { evaluate } from '../../src/policy/evaluate.js';
import { ViewIndex } from '../../src/policy/view-index.js';
import { compileRuleset, type PolicyRuleset } from '../../src/policy/compile.js';
import { normalizeBoxes, type Box } from '../../src/policy/boxes.js';
import { emptyKernel, transaction, wanted, BASE_CHAIN, type KernelPolicy } from '../../src/policy/ruleset.js';
import type { NetworkPolicy, PolicyView } from '../../src/policy/types.js';
import { ALL_IDS, ip4, ip6, modelPods, modelView, np } from '../helpers/policy-model.js';
import { forwardVerdict } from '../../src/policy/datapath.js';

const a = { matchLabels: { pod: 'a' } };
const SCENARIOS: Record<string, NetworkPolicy[]> = {
  'none': [],
  'deny ingress x': [np('x', 'deny', { podSelector: {}, policyTypes: ['Ingress'] })],
  'deny egress x': [np('x', 'deny', { podSelector: {}, policyTypes: ['Egress'] })],
  'deny all x + allow all x': [np('x', 'deny', { podSelector: {}, policyTypes: ['Ingress', 'Egress'] }), np('x', 'all', { podSelector: {}, ingress: [{}], egress: [{}], policyTypes: ['Ingress', 'Egress'] })],
  'from ns y': [np('x', 'p', { podSelector: a, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }] }] })],
  'from pod b AND ns y, port 81': [np('x', 'p', { podSelector: a, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } }, podSelector: { matchLabels: { pod: 'b' } } }], ports: [{ port: 81 }] }] })],
  'OR of peers, UDP only': [np('x', 'p', { podSelector: a, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }, { podSelector: { matchLabels: { pod: 'b' } } }], ports: [{ port: 80, protocol: 'UDP' }] }] })],
  'two policies OR': [
    np('x', 'p1', { podSelector: a, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }] }] }),
    np('x', 'p2', { podSelector: {}, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'z' } } }], ports: [{ port: 80 }] }] }),
  ],
  'endPort': [np('y', 'p', { podSelector: {}, ingress: [{ ports: [{ port: 80, endPort: 81, protocol: 'TCP' }, { port: 81, protocol: 'UDP' }] }] })],
  'named ingress': [np('x', 'p', { podSelector: {}, ingress: [{ ports: [{ port: 'serve-81-tcp' }, { port: 'serve-80-udp', protocol: 'UDP' }] }] })],
  'named egress': [np('x', 'p', { podSelector: a, policyTypes: ['Egress'], egress: [{ ports: [{ port: 'serve-80-tcp' }] }] })],
  'named egress to a block': [np('x', 'p', { podSelector: a, policyTypes: ['Egress'], egress: [{ to: [{ ipBlock: { cidr: '10.0.2.0/24' } }], ports: [{ port: 'serve-81-tcp' }, { port: 80, protocol: 'UDP' }] }] })],
  'ipBlock except + overlapping rule': [np('x', 'p', {
    podSelector: a, policyTypes: ['Egress', 'Ingress'],
    egress: [{ to: [{ ipBlock: { cidr: '0.0.0.0/4', except: [`${ip4('x/b')}/32`, '10.0.3.0/30'] } }] }, { to: [{ ipBlock: { cidr: `${ip4('x/b')}/32` } }], ports: [{ port: 81 }] }],
    ingress: [{ from: [{ ipBlock: { cidr: 'fd00::/64', except: [`${ip6('y/c')}/128`] } }, { podSelector: {} }], ports: [{ port: 80 }, { protocol: 'UDP' }] }],
  })],
  'ingress and egress together': [np('y', 'p', {
    podSelector: { matchLabels: { pod: 'b' } }, policyTypes: ['Ingress', 'Egress'],
    ingress: [{ from: [{ namespaceSelector: {}, podSelector: a }] }], egress: [{ to: [{ namespaceSelector: { matchLabels: { ns: 'z' } } }], ports: [{ port: 80 }] }],
  })],
  'a broken policy isolates': [np('z', 'bad', { podSelector: {}, ingress: [{ ports: [{ port: 'x', endPort: 9 }] }] })],
};

/** Both nodes' rulesets, and the datapath's verdict for a packet between two pods. */
function datapath(view: PolicyView) {
  const ix = new ViewIndex(view);
  const rs: Record<string, PolicyRuleset> = {};
  for (const node of ['n1', 'n2']) rs[node] = compileRuleset(ix, ix.pods.filter((p) => p.node === node));
  const nodeOf = (id: string) => view.pods.find((p) => `${p.namespace}/${p.name}` === id)!.node!;
  return (from: string, to: string, pkt: { src: string; dst: string; proto: number; dport?: number }) => {
    const path = [...new Set([nodeOf(from), nodeOf(to)])];
    return path.every((n) => forwardVerdict(rs[n]!, pkt) === 'accept');
  };
}

const FLOWS = [
  { protocol: 'TCP', proto: 6, port: 80 }, { protocol: 'TCP', proto: 6, port: 81 }, { protocol: 'UDP', proto: 17, port: 80 },
  { protocol: 'UDP', proto: 17, port: 81 }, { protocol: 'SCTP', proto: 132, port: 80 }, { protocol: 1, proto: 1, port: undefined },
] as const;

for (const [name, policies] of Object.entries(SCENARIOS)) {
  test(`the compiled datapath agrees with the oracle: ${name}`, (t) => {
    const view = modelView(policies);
    const pass = datapath(view);
    const ix = new ViewIndex(view);
    const bad: string[] = [];
    let checked = 0;
    for (const from of ALL_IDS) for (const to of ALL_IDS) {
      if (from === to) continue;
      for (const ip of [ip4, ip6]) for (const f of FLOWS) {
        const oracle = evaluate(ix, { src: ip(from), dst: ip(to), protocol: f.protocol, port: f.port }).allowed;
        const kernel = pass(from, to, { src: ip(from), dst: ip(to), proto: f.proto, dport: f.port });
        checked++;
        if (oracle !== kernel) bad.push(`${from} -> ${to} ${ip === ip4 ? 'v4' : 'v6'} ${f.protocol}/${f.port}: oracle ${oracle}, datapath ${kernel}`);
      }
    }
    t.is(checked, 72 * 2 * FLOWS.length);
    t.deepEqual(bad, []);
  });
}

test('outside addresses: a block\'s except and the rest of the world, as the oracle says', (t) => {
  const view = modelView(SCENARIOS['ipBlock except + overlapping rule']!);
  const ix = new ViewIndex(view);
  const rs = compileRuleset(ix, ix.pods.filter((p) => p.node === 'n1'));
  for (const dst of ['10.200.0.1', '10.0.3.1', '10.0.3.4', '172.16.0.1', ip4('x/b')]) {
    for (const f of FLOWS) {
      const oracle = evaluate(ix, { src: ip4('x/a'), dst, protocol: f.protocol, port: f.port }).allowed;
      t.is(forwardVerdict(rs, { src: ip4('x/a'), dst, proto: f.proto, dport: f.port }) === 'accept', oracle, `${dst} ${f.protocol}/${f.port}`);
    }
  }
});

test('pods no policy selects are in no map; pods the same policies select share one chain', (t) => {
  const view = modelView(SCENARIOS['two policies OR']!);
  const ix = new ViewIndex(view);
  const rs = compileRuleset(ix, ix.pods);
  t.deepEqual([...rs.maps.in4.keys()].sort(), [ip4('x/a'), ip4('x/b'), ip4('x/c')].sort(), 'only x\'s pods are isolated');
  t.is(rs.maps.out4.size, 0, 'and only for ingress');
  t.is(rs.maps.in4.get(ip4('x/b')), rs.maps.in4.get(ip4('x/c')), 'b and c: selected by p2 alone, one chain');
  t.not(rs.maps.in4.get(ip4('x/a')), rs.maps.in4.get(ip4('x/b')), 'a: by p1 and p2, another');
  t.is(rs.chains.size, 4, 'two groups × two families');
  t.deepEqual(rs.self[4].length, 9);
});

test('box normalization: disjoint, and the same union, for random boxes', (t) => {
  let seed = 7;
  const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) % n);
  for (let round = 0; round < 200; round++) {
    const boxes: Box[] = [];
    for (let i = 0; i < 1 + rnd(6); i++) {
      const lo = BigInt(rnd(12));
      const plo = rnd(3);
      const tlo = rnd(6);
      boxes.push({ lo, hi: lo + BigInt(rnd(4)), plo, phi: plo + rnd(2), tlo, thi: tlo + rnd(3) });
    }
    const norm = normalizeBoxes(boxes);
    const inside = (bs: Box[], x: bigint, p: number, q: number) => bs.filter((b) => x >= b.lo && x <= b.hi && p >= b.plo && p <= b.phi && q >= b.tlo && q <= b.thi).length;
    for (let x = 0n; x < 17n; x++) for (let p = 0; p < 5; p++) for (let q = 0; q < 10; q++) {
      const want = inside(boxes, x, p, q) > 0 ? 1 : 0;
      if (inside(norm, x, p, q) !== want) return t.fail(`round ${round}: point ${x},${p},${q} covered ${inside(norm, x, p, q)} times, want ${want}`);
    }
    t.deepEqual(normalizeBoxes([...boxes].reverse()), norm, 'order does not matter');
  }
  t.pass();
});

/** The kernel as it would be after applying this ruleset (what parseKernel reads back). */
const asKernel = (rs: PolicyRuleset): KernelPolicy => ({ ...wanted(rs), chains: new Set([...rs.chains.keys(), BASE_CHAIN]) });

test('transactions: the first builds the table whole; no change, no transaction; a new peer adds its elements and nothing else', (t) => {
  const view = modelView(SCENARIOS['from ns y']!);
  const ix = new ViewIndex(view);
  const local = ix.pods.filter((p) => p.node === 'n1');
  const rs = compileRuleset(ix, local);
  const first = transaction('knit-policy', emptyKernel(), rs);
  t.regex(first, /^table inet knit-policy\ndelete table inet knit-policy\ntable inet knit-policy \{/);
  t.regex(first, new RegExp(`chain ${BASE_CHAIN} \\{\\n\\t\\ttype filter hook forward priority filter; policy accept;`));
  t.regex(first, /ip saddr @i4a_[0-9a-f]{12} counter name "ai_[0-9a-f]{12}" return/);
  t.regex(first, new RegExp(`add element inet knit-policy in4 \\{ ${ip4('x/a').replace(/\./g, '\\.')} : jump gi4_`));
  t.is(transaction('knit-policy', asKernel(rs), rs), '', 'the kernel already holds it');

  // y/d appears (a new pod of a selected namespace): one add element, in the rule's sets.
  const more = { ...view, pods: [...view.pods, { namespace: 'y', name: 'd', labels: { pod: 'd' }, ips: ['10.0.2.9', 'fd00::2:9'], node: 'n2' }] };
  const rs2 = compileRuleset(new ViewIndex(more), local);
  const tx = transaction('knit-policy', asKernel(rs), rs2).trim().split('\n');
  t.is(tx.length, 2, tx.join('\n'));
  t.true(tx.every((l) => l.startsWith('add element inet knit-policy i')), tx.join('\n'));
  t.true(tx.some((l) => / 10\.0\.2\.1-10\.0\.2\.3, 10\.0\.2\.9 \}|10\.0\.2\.9/.test(l)));
});

test('transactions: a pod selected by one more policy moves to another chain in one step; the old chain goes once unused', (t) => {
  const before = modelView(SCENARIOS['from ns y']!);
  const after = modelView([...SCENARIOS['from ns y']!, np('x', 'deny-egress', { podSelector: a, policyTypes: ['Egress'] })]);
  const local = (v: PolicyView) => new ViewIndex(v).pods.filter((p) => p.node === 'n1');
  const rs = compileRuleset(new ViewIndex(before), local(before));
  const rs2 = compileRuleset(new ViewIndex(after), local(after));
  const tx = transaction('knit-policy', asKernel(rs), rs2);
  t.regex(tx, /add counter inet knit-policy ae_/);
  t.regex(tx, /add chain inet knit-policy ge4_[0-9a-f]{12}\nadd rule inet knit-policy ge4_[0-9a-f]{12} counter name "de_[0-9a-f]{12}"\nadd rule inet knit-policy ge4_[0-9a-f]{12} drop/);
  t.regex(tx, new RegExp(`add element inet knit-policy out4 \\{ ${ip4('x/a').replace(/\./g, '\\.')} : jump ge4_`));
  t.notRegex(tx, /delete/, 'nothing goes: the ingress chain is unchanged');
  const back = transaction('knit-policy', asKernel(rs2), rs);
  t.regex(back, /delete element inet knit-policy out4 \{ 10\.0\.1\.1 \}[\s\S]*delete chain inet knit-policy ge4_[\s\S]*delete counter inet knit-policy ae_/);
});
