// The incremental compiler (src/policy/incremental.ts) against the full compile and the oracle:
// random sequences of changes (pods of any node added, relabelled, readdressed, deleted;
// namespaces relabelled; policies added, changed, deleted; this node's pods admitted and
// released, some of unknown labels, some shadowing a stale pod that still holds their address)
// applied one by one. After each, the share it holds equals compileRuleset's on the same view,
// the transaction over what it says it touched equals the transaction over the whole table, and
// the kernel model it leaves equals the ruleset; the node's verdicts agree with evaluate().
// Half the seeds log denied packets (networkPolicy.logDenied: a log rule per chain, one limit).
import test from 'ava';
import { IncrementalCompiler } from '../../src/policy/incremental.js';
import type { DeniedLogSettings, LocalPod, PolicyRuleset } from '../../src/policy/compile.js';
import { committed, emptyKernel, transaction, wanted, BASE_CHAIN, type KernelPolicy } from '../../src/policy/ruleset.js';
import { canonical, type ViewIndex } from '../../src/policy/view-index.js';
import { evaluate } from '../../src/policy/evaluate.js';
import { forwardVerdict } from '../../src/policy/datapath.js';
import type { PolicyPod } from '../../src/policy/types.js';
import { NODE, change, fullCompile, lines, plain, plainKernel, random, type World } from '../helpers/policy-random.js';

/** This node's verdict on a flow against the oracle's sides that this node judges. */
function oracleMismatches(rs: PolicyRuleset, ix: ViewIndex, local: LocalPod[]): string[] {
  if (local.some((p) => p.unknown)) return []; // fail closed: the oracle knows nothing of it
  const localIps = new Set(local.flatMap((p) => p.ips.map(canonical)));
  const bad: string[] = [];
  const pods = ix.pods;
  for (const from of pods) for (const to of pods) {
    if (from === to) continue;
    for (const family of [4, 6] as const) {
      const src = from.ips.find((ip) => ip.includes(':') === (family === 6));
      const dst = to.ips.find((ip) => ip.includes(':') === (family === 6));
      if (!src || !dst || (!localIps.has(canonical(src)) && !localIps.has(canonical(dst)))) continue;
      for (const [protocol, proto, dport] of [['TCP', 6, 80], ['UDP', 17, 53], ['TCP', 6, 8080]] as const) {
        const v = evaluate(ix, { src, dst, protocol, port: dport });
        const want = (!localIps.has(canonical(src)) || v.egress.allowed) && (!localIps.has(canonical(dst)) || v.ingress.allowed);
        const got = forwardVerdict(rs, { src, dst, proto, dport }) === 'accept';
        if (want !== got) bad.push(`${from.namespace}/${from.name} -> ${to.namespace}/${to.name} ${protocol}/${dport}: oracle ${want}, node ${got}`);
      }
    }
  }
  return bad;
}

const LOG: DeniedLogSettings = { group: 100, rate: '10/second', burst: 20 };

for (const seed of [1, 2, 3, 4, 5, 6]) {
  const logDenied = seed % 2 === 0 ? LOG : undefined;
  test(`random changes applied one by one equal the full compile, the transaction and the oracle (seed ${seed}${logDenied ? ', logDenied' : ''})`, (t) => {
    const r = random(seed);
    const w: World = { pods: new Map(), namespaces: new Map(), policies: new Map(), locals: new Map(), nextIp: 1 };
    const c = new IncrementalCompiler(NODE, logDenied);
    const limitSeen = { on: false, off: false };
    let kernel: KernelPolicy = emptyKernel();
    const history: string[] = [];
    for (let step = 0; step < 220; step++) {
      history.push(change(r, w, c, step));
      const touched = c.flush();
      const { rs, ix, local } = fullCompile(w, logDenied);
      const at = `after step ${step}: ${history.slice(-3).join('; ')}`;
      t.deepEqual(plain(c.ruleset), plain(rs), at);
      // The transaction over what it touched does what the one over the whole table does.
      const whole = transaction('knit-policy', kernel, rs);
      const part = transaction('knit-policy', kernel, c.ruleset, kernel.base ? touched : undefined);
      t.deepEqual(lines(part), lines(whole), at);
      kernel = committed(kernel, c.ruleset, kernel.base ? touched : undefined);
      t.deepEqual(plainKernel(kernel), plainKernel({ ...wanted(rs), chains: new Set([...rs.chains.keys(), BASE_CHAIN]) }), at);
      t.is(transaction('knit-policy', kernel, rs), '', at);
      if (step % 20 === 19) t.deepEqual(oracleMismatches(c.ruleset, ix, local), [], at);
      if (!t.passed) return; // the first difference says enough
      if (touched.limits.size) limitSeen[c.ruleset.limits.size ? 'on' : 'off'] = true;
    }
    t.true(c.ruleset.maps.in4.size + c.ruleset.maps.out4.size > 0, 'the sequence isolated some pod');
    if (logDenied) {
      t.true(limitSeen.on && limitSeen.off, 'the limit came with the first chain and went with the last');
      t.true([...c.ruleset.chains.values()].every((ch) => 'log' in ch && ch.log?.group === LOG.group), 'every chain logs');
    }
  });
}

test('a change touches only its own: a new peer is its sets\' elements, a label its map entries', (t) => {
  const c = new IncrementalCompiler(NODE);
  const ns = (name: string) => ({ name, labels: { team: name } });
  const pod = (namespace: string, name: string, app: string, ip: string, node = 'n2'): PolicyPod => ({ namespace, name, labels: { app }, ips: [ip], node });
  c.load({
    namespaces: [ns('x'), ns('y')],
    pods: [pod('y', 'client', 'c', '10.0.1.1'), pod('x', 'server', 's', '10.0.0.1', NODE)],
    policies: [{ metadata: { namespace: 'x', name: 'p' }, spec: { podSelector: { matchLabels: { app: 's' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'y' } } }], ports: [{ port: 80 }] }] } }],
  });
  c.setLocal('sb1', { namespace: 'x', name: 'server', ips: ['10.0.0.1'], seen: 'unknown' });
  const first = c.flush();
  t.is(first.chains.size, 1);
  t.deepEqual([...first.maps.in4], ['10.0.0.1']);

  c.setPod('y/other', pod('y', 'other', 'o', '10.0.1.7'));
  const peer = c.flush();
  t.deepEqual([...peer.sets].length, 1, 'one set gets the new peer');
  t.deepEqual([peer.chains.size, peer.counters.size, peer.maps.in4.size, peer.self], [0, 0, 0, false]);

  c.setPod('y/unrelated', pod('z', 'unrelated', 'o', '10.0.2.7'));
  t.deepEqual(c.flush(), { sets: new Set(), chains: new Set(), counters: new Set(), limits: new Set(), self: false, maps: { in4: new Set(), in6: new Set(), out4: new Set(), out6: new Set(), local4: new Set(), local6: new Set() } }, 'a pod no peer selects touches nothing');

  c.setPod('x/server', pod('x', 'server', 'other', '10.0.0.1', NODE));
  const relabel = c.flush();
  t.deepEqual([...relabel.maps.in4], ['10.0.0.1'], 'the server left the policy: its map entry');
  t.deepEqual([...relabel.chains].length, 1, 'and its chain, now unused');
  t.false(c.ruleset.maps.in4.has('10.0.0.1'));
});

test('rules with the same peers and ports (their sets computed once per flush) hold the same elements; a port or the peers\' namespace still tells sets apart', (t) => {
  const c = new IncrementalCompiler(NODE);
  const pod = (namespace: string, name: string, app: string, ip: string, node = 'n2'): PolicyPod => ({ namespace, name, labels: { app }, ips: [ip], node });
  const from = (app: string) => [{ podSelector: { matchLabels: { app } } }];
  const allow = (namespace: string, name: string, port: number, direction: 'ingress' | 'egress' = 'ingress') => ({
    metadata: { namespace, name },
    spec: direction === 'ingress'
      ? { podSelector: { matchLabels: { app: 's' } }, ingress: [{ from: from('c'), ports: [{ port }] }] }
      : { podSelector: { matchLabels: { app: 's' } }, policyTypes: ['Egress'], egress: [{ to: from('c'), ports: [{ port }] }] },
  });
  c.load({
    namespaces: [{ name: 'x', labels: {} }, { name: 'y', labels: {} }],
    pods: [pod('x', 'c1', 'c', '10.0.1.1'), pod('x', 'c2', 'c', '10.0.1.5'), pod('y', 'c3', 'c', '10.0.2.1'), pod('x', 's', 's', '10.0.0.1', NODE), pod('y', 's', 's', '10.0.0.2', NODE)],
    policies: [allow('x', 'a', 80), allow('x', 'b', 80), allow('x', 'other-port', 81), allow('x', 'out', 80, 'egress'), allow('y', 'a', 80)],
  });
  c.setLocal('sb1', { namespace: 'x', name: 's', ips: ['10.0.0.1'], seen: 'unknown' });
  c.setLocal('sb2', { namespace: 'y', name: 's', ips: ['10.0.0.2'], seen: 'unknown' });
  c.flush();
  const holding = (element: string) => [...c.ruleset.sets.values()].filter((s) => s.elements.includes(element)).length;
  t.is(c.ruleset.sets.size, 5, 'one set per policy rule');
  t.is(holding('10.0.1.1 . 6 . 80'), 3, 'x/a, x/b and x/out: x\'s peers on TCP 80');

  c.setPod('x/c1', undefined);
  t.is(c.flush().sets.size, 4, 'the pod left the four sets of namespace x, not y\'s');
  t.is(holding('10.0.1.1 . 6 . 80'), 0, 'the deleted pod is in no set');
  t.is(holding('10.0.1.5 . 6 . 80'), 3, 'the sets of the same content still hold the other peer');
  t.is(holding('10.0.1.5 . 6 . 81'), 1, 'the other port\'s set keeps its own');
  t.is(holding('10.0.2.1 . 6 . 80'), 1, 'y\'s policy keeps y\'s peer');
  t.is(holding('10.0.2.1 . 6 . 81'), 0);
});
