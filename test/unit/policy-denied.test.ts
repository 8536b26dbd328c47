// Denied flows in a log (networkPolicy.logDenied), the pure parts: the config block, the log
// rule and the named limit in the compiled table and its transactions, the table read back
// with its limits, a logged packet read into its flow (IPv4 and IPv6, TCP, UDP, ICMP, an
// extension header, a later fragment), a flow told once per quiet spell, and the JSON line.
import test from 'ava';
import { validateConfig } from '../../src/config/load.js';
import { ViewIndex } from '../../src/policy/view-index.js';
import { compileRuleset, deniedLimit, type GroupChain, type PolicyRuleset } from '../../src/policy/compile.js';
import { chainRules, emptyKernel, heldWithChanges, parseKernel, transaction, wanted, BASE_CHAIN, type KernelPolicy } from '../../src/policy/ruleset.js';
import { deniedLine, flowKey, parseIpPacket, RecentFlows } from '../../src/policy/denied.js';
import { ip4, modelView, np } from '../helpers/policy-model.js';

const base = { networks: [{ name: 'pods', ipv4: { subnet: '10.1.0.0/24' } }] };
const LOG = { group: 100, rate: '10/second', burst: 20 };

test('config: logDenied: true takes the defaults; an object sets group, rate, burst and file; bad values name their field', (t) => {
  t.deepEqual(validateConfig({ ...base, networkPolicy: { logDenied: true } }).networkPolicy!.logDenied, LOG);
  t.deepEqual(validateConfig({ ...base, networkPolicy: { logDenied: { file: '/var/log/knit/denied.jsonl', rate: '3/minute' } } }).networkPolicy!.logDenied,
    { group: 100, rate: '3/minute', burst: 20, file: '/var/log/knit/denied.jsonl' });
  t.is(validateConfig({ ...base, networkPolicy: {} }).networkPolicy!.logDenied, undefined, 'off unless asked for');
  t.throws(() => validateConfig({ ...base, networkPolicy: { logDenied: { rate: '10 per second' } } }), { message: /networkPolicy\.logDenied\.rate/ });
  t.throws(() => validateConfig({ ...base, networkPolicy: { logDenied: { group: 70000 } } }), { message: /networkPolicy\.logDenied\.group/ });
  t.throws(() => validateConfig({ ...base, networkPolicy: { logDenied: { file: 'denied.jsonl' } } }), { message: /networkPolicy\.logDenied\.file/ });
  t.throws(() => validateConfig({ ...base, networkPolicy: { logDenied: false } }), { message: /networkPolicy\.logDenied/ });
});

const asKernel = (rs: PolicyRuleset): KernelPolicy => ({ ...wanted(rs), chains: new Set([...rs.chains.keys(), BASE_CHAIN]) });
const view = modelView([np('x', 'deny', { podSelector: {}, policyTypes: ['Ingress'] })]);
const compiled = (log?: typeof LOG) => {
  const ix = new ViewIndex(view);
  return compileRuleset(ix, ix.pods.filter((p) => p.node === 'n1'), log);
};

test('the table: each group chain logs its drops through one named limit, with the chain\'s name as prefix; without logDenied nothing of it', (t) => {
  const plain = compiled();
  const logged = compiled(LOG);
  t.deepEqual([...plain.limits], []);
  const limit = deniedLimit(LOG);
  t.deepEqual([...logged.limits], [[limit.name, 'rate 10/second burst 20 packets']]);
  t.notDeepEqual([...logged.chains.keys()], [...plain.chains.keys()], 'logging is part of a chain\'s content, so of its name');
  const [name, chain] = [...logged.chains][0]!;
  const rules = chainRules(name, chain);
  t.is(rules.at(-2), `limit name "${limit.name}" log prefix "${name}" group 100`);
  t.is(rules.at(-1), 'drop');
  t.false(chainRules(...[...plain.chains][0]!).some((r) => r.includes('log')));

  const first = transaction('knit-policy', emptyKernel(), logged);
  t.regex(first, new RegExp(`\\tlimit ${limit.name} \\{ rate 10/second burst 20 packets \\}`));
  // Turned on over a table without it: the limit first, new chains, the pods moved, the old chains gone.
  const on = transaction('knit-policy', asKernel(plain), logged);
  t.regex(on, new RegExp(`^add limit inet knit-policy ${limit.name} \\{ rate 10/second burst 20 packets \\}$`, 'm'));
  t.true(on.indexOf('add limit') < on.indexOf('add chain'));
  t.regex(on, /^delete chain inet knit-policy gi4_/m);
  // A new rate is a new limit object and new chains; the old limit goes after the chains that used it.
  const faster = compiled({ ...LOG, rate: '100/second' });
  const change = transaction('knit-policy', asKernel(logged), faster);
  t.true(change.indexOf(`delete limit inet knit-policy ${limit.name}`) > change.lastIndexOf('delete chain'), change);
  t.is(transaction('knit-policy', asKernel(faster), faster), '');
  // Off again: chains and limit go.
  t.regex(transaction('knit-policy', asKernel(logged), plain), new RegExp(`delete limit inet knit-policy ${limit.name}$`, 'm'));
});

test('the table read back: its limits; while the cluster is unknown they stay with the chains that use them', (t) => {
  const limit = deniedLimit(LOG).name;
  const have = parseKernel(JSON.stringify({ nftables: [
    { table: { family: 'inet', name: 'knit-policy' } },
    { limit: { family: 'inet', name: limit, table: 'knit-policy', rate: 10, per: 'second', burst: 20 } },
    { chain: { name: 'gi4_0123456789ab' } },
    { chain: { name: BASE_CHAIN, hook: 'forward' } },
    { rule: { chain: 'gi4_0123456789ab', expr: [{ limit: limit }, { log: { prefix: 'gi4_0123456789ab', group: 100 } }] } },
  ] }));
  t.deepEqual([...have.limits], [limit]);
  const held = heldWithChanges(have, () => true, ['10.0.0.9']);
  t.notRegex(transaction('knit-policy', have, held), /limit/, 'the limit is neither added nor deleted');
});

/** An IPv4 header (20 bytes) and `l4`. */
function v4(proto: number, src: number[], dst: number[], l4: number[], fragment = 0): Buffer {
  const h = Buffer.alloc(20);
  h[0] = 0x45;
  h.writeUInt16BE(20 + l4.length, 2);
  h.writeUInt16BE(fragment, 6);
  h[8] = 64;
  h[9] = proto;
  Buffer.from(src).copy(h, 12);
  Buffer.from(dst).copy(h, 16);
  return Buffer.concat([h, Buffer.from(l4)]);
}
const ports = (s: number, d: number) => [s >> 8, s & 255, d >> 8, d & 255, 0, 0, 0, 0];

test('a logged packet read into its flow: IPv4 TCP, UDP and ICMP echo, IPv6 behind an extension header, a later fragment without ports', (t) => {
  t.deepEqual(parseIpPacket(4, v4(6, [10, 0, 0, 3], [10, 0, 0, 2], ports(43210, 8080))), { family: 4, proto: 6, src: '10.0.0.3', dst: '10.0.0.2', sport: 43210, dport: 8080 });
  t.deepEqual(parseIpPacket(4, v4(17, [10, 0, 0, 3], [10, 0, 0, 2], ports(5353, 53))), { family: 4, proto: 17, src: '10.0.0.3', dst: '10.0.0.2', sport: 5353, dport: 53 });
  t.deepEqual(parseIpPacket(4, v4(1, [10, 0, 0, 3], [10, 0, 0, 2], [8, 0, 0, 0, 0x12, 0x34, 0, 1])), { family: 4, proto: 1, src: '10.0.0.3', dst: '10.0.0.2', icmpType: 8, icmpId: 0x1234 });
  t.deepEqual(parseIpPacket(4, v4(6, [10, 0, 0, 3], [10, 0, 0, 2], ports(1, 2), 0x0010)), { family: 4, proto: 6, src: '10.0.0.3', dst: '10.0.0.2' }, 'a later fragment has no ports');
  // IPv6: a hop-by-hop options header (8 bytes) before UDP.
  const h6 = Buffer.alloc(40);
  h6[0] = 0x60;
  h6[6] = 0; // next: hop-by-hop
  h6[7] = 64;
  Buffer.from('fd000000000000000000000000000005', 'hex').copy(h6, 8);
  Buffer.from('fd000000000000000000000000000002', 'hex').copy(h6, 24);
  const hbh = [17, 0, 1, 4, 0, 0, 0, 0];
  t.deepEqual(parseIpPacket(6, Buffer.concat([h6, Buffer.from(hbh), Buffer.from(ports(40000, 81))])), { family: 6, proto: 17, src: 'fd00::5', dst: 'fd00::2', sport: 40000, dport: 81 });
  t.is(parseIpPacket(4, Buffer.from([0x60, 0, 0])), undefined, 'not an IPv4 packet');
  t.is(parseIpPacket(6, v4(6, [1, 1, 1, 1], [2, 2, 2, 2], ports(1, 2))), undefined, 'not an IPv6 packet');
});

test('a flow is told once per quiet spell: its retransmissions are not, another flow is, and it is again after the spell', (t) => {
  const recent = new RecentFlows(60_000, 3);
  const syn = { family: 4 as const, proto: 6, src: '10.0.0.3', dst: '10.0.0.2', sport: 43210, dport: 8080 };
  t.true(recent.fresh(flowKey(syn), 0));
  t.false(recent.fresh(flowKey(syn), 1_000), 'the SYN sent again');
  t.false(recent.fresh(flowKey(syn), 59_000), 'a spell restarts with each packet');
  t.true(recent.fresh(flowKey({ ...syn, sport: 43211 }), 59_500), 'the next connection is another flow');
  t.true(recent.fresh(flowKey(syn), 120_000), 'after a quiet minute, told again');
  for (let p = 1; p <= 3; p++) recent.fresh(flowKey({ ...syn, sport: p }), 120_001);
  t.true(recent.fresh(flowKey(syn), 120_002), 'the oldest flows are forgotten beyond the bound');
});

test('the JSON line: time, protocol, addresses and ports, the pods at both ends, the chain and its policies; a chain gone since still says its direction', (t) => {
  const rs = compiled(LOG);
  const [chain, c] = [...rs.chains].find(([, g]) => g.family === 4) as [string, GroupChain];
  const dst = ip4('x/a');
  const pkt = { family: 4 as const, proto: 6, src: ip4('y/b'), dst, sport: 40000, dport: 80 };
  const podAt = (ip: string) => ({ [ip4('y/b')]: 'y/b', [dst]: 'x/a' })[ip];
  t.deepEqual(deniedLine(pkt, Date.UTC(2026, 10, 27, 12, 0, 0, 5), chain, rs, podAt), {
    time: '2026-11-27T12:00:00.005Z', direction: 'ingress', protocol: 'TCP', src: ip4('y/b'), sport: 40000, dst, dport: 80, srcPod: 'y/b', dstPod: 'x/a', chain, policies: c.policies,
  });
  t.deepEqual(c.policies, ['x/deny']);
  const gone = deniedLine({ family: 4, proto: 1, src: '192.0.2.1', dst, icmpType: 8, icmpId: 1 }, 0, 'ge4_0123456789ab', rs, podAt);
  t.deepEqual(gone, { time: '1970-01-01T00:00:00.000Z', direction: 'egress', protocol: 'ICMP', src: '192.0.2.1', dst, icmpType: 8, dstPod: 'x/a', chain: 'ge4_0123456789ab', policies: [] });
});
