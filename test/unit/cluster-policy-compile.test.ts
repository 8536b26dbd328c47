// The compiled tiers (src/policy/cluster-policy-compile.ts, cluster-policy-nft.ts, and the
// datapath reading in datapath.ts) against the tiered oracle: for each set of
// ClusterNetworkPolicies and NetworkPolicies, every pod pair, both families, TCP and UDP on 80
// and 81, SCTP and ICMP, the verdict of the two nodes' compiled tables (egress on the source's
// node, ingress on the destination's) equals evaluateTiered()'s; and every pod to every node
// address (its own node through the input hook's local map). Then the transactions.
import test from 'ava';
import { evaluateTiered, TierIndex } from '../../src/policy/cluster-policy-evaluate.js';
import { compileTiers } from '../../src/policy/cluster-policy-compile.js';
import type { ClusterNetworkPolicy } from '../../src/policy/cluster-policy.js';
import { ViewIndex } from '../../src/policy/view-index.js';
import { compileRuleset, type PolicyRuleset } from '../../src/policy/compile.js';
import { emptyKernel, transaction, wanted, BASE_CHAIN, INPUT_CHAIN, type KernelPolicy } from '../../src/policy/ruleset.js';
import { forwardVerdict, localVerdict } from '../../src/policy/datapath.js';
import type { NetworkPolicy, PolicyView } from '../../src/policy/types.js';
import { ALL_IDS, NODE_ADDRS, ip4, ip6, modelView, np } from '../helpers/policy-model.js';
import { MODEL_NODES, cnp, fromNs, fromPod, nsSel, rule } from '../helpers/cluster-policy-model.js';

const web = [{ tcp: { destinationPort: { number: 80 } } }];
const SCENARIOS: Record<string, [ClusterNetworkPolicy[], NetworkPolicy[]]> = {
  'Admin deny ingress x': [[cnp('d', 'Admin', 1, { subject: { namespaces: nsSel('x') }, ingress: [rule('Deny', [{ namespaces: {} }])] })], []],
  'Admin accept over NetworkPolicy deny-all': [[cnp('a', 'Admin', 1, { ingress: [rule('Accept', [fromNs('z')])], egress: [{ action: 'Accept', to: [fromPod('y', 'c')] }] })], [
    np('x', 'deny', { podSelector: {}, policyTypes: ['Ingress', 'Egress'] }), np('y', 'deny', { podSelector: {}, policyTypes: ['Ingress', 'Egress'] }),
  ]],
  'Pass to NetworkPolicy, then Baseline': [[
    cnp('pass', 'Admin', 20, { egress: [{ action: 'Pass', to: [fromPod('y', 'b')], protocols: [...web, { destinationNamedPort: 'serve-81-udp' }] }] }),
    cnp('deny-y', 'Admin', 40, { egress: [{ action: 'Deny', to: [fromNs('y')] }] }),
    cnp('base', 'Baseline', 1, { egress: [{ action: 'Deny', to: [fromPod(undefined, 'b')] }] }),
  ], [np('x', 'egress-z', { podSelector: {}, policyTypes: ['Egress'], egress: [{ to: [{ namespaceSelector: nsSel('z') }] }] })]],
  'Baseline deny-all with a NetworkPolicy allowing': [[cnp('default', 'Baseline', 10, { ingress: [rule('Deny', [{ namespaces: {} }])] })], [
    np('x', 'from-z', { podSelector: {}, ingress: [{ from: [{ namespaceSelector: nsSel('z') }], ports: [{ port: 81 }] }] }),
  ]],
  'priorities and rule order': [[
    cnp('late', 'Admin', 10, { ingress: [rule('Deny', [fromNs('y')])] }),
    cnp('early', 'Admin', 5, { ingress: [rule('Accept', [fromPod('y', 'a')], { protocols: web }), rule('Pass', [fromPod('y', 'b')])] }),
    cnp('bp', 'Baseline', 1, { ingress: [rule('Pass', [fromNs('z')]), rule('Deny', [{ namespaces: {} }], { protocols: [{ udp: {} }] })] }),
  ], []],
  'ports, ranges, SCTP and named ports': [[
    cnp('in', 'Admin', 1, { subject: { namespaces: nsSel('x') }, ingress: [rule('Deny', [{ namespaces: {} }], { protocols: [{ destinationNamedPort: 'serve-81-tcp' }, { udp: { destinationPort: { range: { start: 80, end: 81 } } } }, { sctp: {} }] })] }),
    cnp('out', 'Baseline', 1, { subject: { pods: { namespaceSelector: nsSel('y'), podSelector: { matchLabels: { pod: 'a' } } } }, egress: [{ action: 'Deny', to: [{ namespaces: {} }], protocols: [{ destinationNamedPort: 'serve-80-udp' }, { tcp: {} }] }] }),
  ], []],
  'networks and nodes': [[
    cnp('nets', 'Admin', 1, { subject: { namespaces: nsSel('x') }, egress: [
      { action: 'Accept', to: [{ nodes: { matchLabels: { zone: 'one' } } }], protocols: [{ tcp: { destinationPort: { number: 10250 } } }] },
      { action: 'Pass', to: [fromNs('x')] },
      { action: 'Deny', to: [{ nodes: {} }, { networks: ['0.0.0.0/0', 'fd00::3:0/112'] }] },
    ] }),
    cnp('z-base', 'Baseline', 3, { subject: { namespaces: nsSel('z') }, egress: [{ action: 'Deny', to: [{ networks: [`${ip4('y/b')}/32`, '192.168.0.0/31'] }] }] }),
  ], [np('z', 'egress', { podSelector: { matchLabels: { pod: 'c' } }, policyTypes: ['Egress'], egress: [{ to: [{ ipBlock: { cidr: '10.0.0.0/16' } }] }] })]],
  'fail closed': [[
    cnp('dns', 'Admin', 1, { egress: [{ action: 'Accept', to: [{ domainNames: ['example.com'] }] }] }),
    cnp('unreadable', 'Admin', 2, { subject: { namespaces: nsSel('y') }, ingress: [{ action: 'Pass', from: [{}] }] }),
  ], [np('x', 'deny', { podSelector: {}, policyTypes: ['Egress'] })]],
};

/** Both nodes' rulesets, tiers added. */
function rulesets(view: PolicyView, cnps: ClusterNetworkPolicy[]): Record<string, PolicyRuleset> {
  const ix = new ViewIndex(view);
  const tix = new TierIndex(ix, cnps, MODEL_NODES);
  const rs: Record<string, PolicyRuleset> = {};
  for (const node of ['n1', 'n2']) {
    const local = ix.pods.filter((p) => p.node === node);
    rs[node] = compileRuleset(ix, local);
    compileTiers(tix, local, rs[node]!);
  }
  return rs;
}

const FLOWS = [
  { protocol: 'TCP', proto: 6, port: 80 }, { protocol: 'TCP', proto: 6, port: 81 }, { protocol: 'UDP', proto: 17, port: 80 },
  { protocol: 'UDP', proto: 17, port: 81 }, { protocol: 'TCP', proto: 6, port: 10250 }, { protocol: 'SCTP', proto: 132, port: 80 }, { protocol: 1, proto: 1, port: undefined },
] as const;

for (const [name, [cnps, nps]] of Object.entries(SCENARIOS)) {
  test(`the compiled tiers agree with the tiered oracle: ${name}`, (t) => {
    const view = modelView(nps);
    const rs = rulesets(view, cnps);
    const ix = new ViewIndex(view);
    const tix = new TierIndex(ix, cnps, MODEL_NODES);
    const nodeOf = (id: string) => view.pods.find((p) => `${p.namespace}/${p.name}` === id)!.node!;
    const bad: string[] = [];
    let checked = 0;
    const check = (label: string, src: string, dst: string, f: (typeof FLOWS)[number], kernel: boolean) => {
      const oracle = evaluateTiered(ix, tix, [], { src, dst, protocol: f.protocol, ...(f.port !== undefined && { port: f.port }) }).allowed;
      checked++;
      if (oracle !== kernel) bad.push(`${label} ${f.protocol}/${f.port}: oracle ${oracle}, datapath ${kernel}`);
    };
    for (const from of ALL_IDS) {
      for (const [fam, ip] of [[4, ip4], [6, ip6]] as const) {
        for (const f of FLOWS) {
          const pkt = (dst: string) => ({ src: ip(from), dst, proto: f.proto, ...(f.port !== undefined && { dport: f.port }) });
          for (const to of ALL_IDS) {
            if (from === to) continue;
            const path = [...new Set([nodeOf(from), nodeOf(to)])];
            check(`${from} -> ${to} v${fam}`, ip(from), ip(to), f, path.every((n) => forwardVerdict(rs[n]!, pkt(ip(to))) === 'accept'));
          }
          // Every node address: the own node through the input hook, the other through forward.
          for (const [node, addrs] of Object.entries(NODE_ADDRS)) {
            const addr = addrs[fam === 4 ? 0 : 1]!;
            const own = node === nodeOf(from);
            check(`${from} -> node ${node} v${fam}`, ip(from), addr, f, (own ? localVerdict : forwardVerdict)(rs[nodeOf(from)]!, pkt(addr)) === 'accept');
          }
        }
      }
    }
    t.is(checked, 9 * 2 * FLOWS.length * (8 + 2));
    t.deepEqual(bad, []);
  });
}

/** The kernel as it would be after applying this ruleset (what parseKernel reads back). */
const asKernel = (rs: PolicyRuleset): KernelPolicy => ({ ...wanted(rs), chains: new Set([...rs.chains.keys(), BASE_CHAIN]) });

test('no ClusterNetworkPolicy: the NetworkPolicy ruleset as compile.ts made it', (t) => {
  const view = modelView(SCENARIOS['Pass to NetworkPolicy, then Baseline']![1]);
  const ix = new ViewIndex(view);
  const plain = compileRuleset(ix, ix.pods);
  const tiered = compileRuleset(ix, ix.pods);
  compileTiers(new TierIndex(ix, [], MODEL_NODES), ix.pods, tiered);
  t.deepEqual(tiered, plain);
});

test('the table: the input hook\'s chain and local maps; a tier chain goes to the pod\'s NetworkPolicy chain, or its Baseline chain', (t) => {
  const [cnps, nps] = SCENARIOS['Pass to NetworkPolicy, then Baseline']!;
  const view = modelView(nps);
  const rs = rulesets(view, cnps).n1!;
  const first = transaction('knit-policy', emptyKernel(), rs);
  t.regex(first, new RegExp(`chain ${INPUT_CHAIN} \\{\\n\\t\\ttype filter hook input priority filter; policy accept;`));
  t.regex(first, /\tmap local4 \{ type ipv4_addr : verdict; \}/);
  // x/a: Admin (pass, deny-y), then its NetworkPolicy chain; y/a: Admin, then Baseline.
  const admin = rs.maps.out4.get(ip4('x/a'))!;
  t.regex(admin, /^ae4_/);
  const chain = [...first.matchAll(new RegExp(`\\tchain ${admin} \\{\\n([\\s\\S]*?)\\n\\t\\}`, 'g'))][0]![1]!.split('\n').map((l) => l.trim());
  t.is(chain.length, 3, chain.join('\n'));
  t.regex(chain[0]!, /^ip daddr \. meta l4proto \. th dport @ce4c_[0-9a-f]{12} counter name "tpe_[0-9a-f]{12}" goto ge4_[0-9a-f]{12}$/);
  t.regex(chain[1]!, /^ip daddr @ce4a_[0-9a-f]{12} counter name "tde_[0-9a-f]{12}" drop$/);
  t.regex(chain[2]!, /^goto ge4_[0-9a-f]{12}$/);
  t.regex(rs.maps.out4.get(ip4('y/a'))!, /^ae4_/);
  t.not(rs.maps.out4.get(ip4('y/a')), admin, 'another tail: its own chain');
  // To its own node: x/a's NetworkPolicy allows it after the Admin tier; y/a goes on to Baseline
  // as it does for any other destination.
  t.regex(rs.maps.local4.get(ip4('x/a'))!, /^ae4_/);
  t.not(rs.maps.local4.get(ip4('x/a')), admin);
  t.is(rs.maps.local4.get(ip4('y/a')), rs.maps.out4.get(ip4('y/a')));
  // Chains come after what they go to.
  const order = [...rs.chains.keys()];
  for (const [name, c] of rs.chains) if ('next' in c && c.next) t.true(order.indexOf(c.next) < order.indexOf(name), `${name} after ${c.next}`);
  t.is(transaction('knit-policy', asKernel(rs), rs), '', 'the kernel already holds it');
});

test('transactions: a policy removed takes its tier chains out before the chains they go to', (t) => {
  const [cnps, nps] = SCENARIOS['Pass to NetworkPolicy, then Baseline']!;
  const view = modelView(nps);
  const before = rulesets(view, cnps).n1!;
  const after = rulesets(view, []).n1!;
  const tx = transaction('knit-policy', asKernel(before), after).trim().split('\n');
  const deletes = tx.filter((l) => l.startsWith('delete chain')).map((l) => l.split(' ').pop()![0]);
  t.true(deletes.length > 0);
  t.deepEqual(deletes, [...deletes].sort(), 'a… (Admin) before b… (Baseline) before g…');
  t.true(tx.some((l) => /^delete element inet knit-policy out4 /.test(l)), 'pods NetworkPolicy does not select leave the map');
  t.true(tx.findIndex((l) => l.startsWith('delete element inet knit-policy out4')) < tx.findIndex((l) => l.startsWith('delete chain')));
});
