// IP math: parse/format both families, RFC 5952 text, CIDR containment, overlap, nth address.
import test from 'ava';
import {
  cidrContains, cidrLast, cidrSize, cidrsOverlap, formatCidr, formatIPv4, formatIPv6, formatIp,
  nthAddress, normalizeIp, overlappingPairs, parseCidr, parseIp, parseIPv4, parseIPv6, tryParseCidr, tryParseIp,
} from '../../src/ipam/ip.js';

test('IPv4 parses and formats round trip', (t) => {
  t.is(parseIPv4('0.0.0.0'), 0n);
  t.is(parseIPv4('255.255.255.255'), 0xffffffffn);
  t.is(parseIPv4('10.244.96.1'), (10n << 24n) | (244n << 16n) | (96n << 8n) | 1n);
  t.is(formatIPv4(0x0a000001n), '10.0.0.1');
  for (const text of ['1.2.3.4', '192.168.100.200', '0.0.0.1']) t.is(formatIPv4(parseIPv4(text)!), text);
});

test('IPv4 rejects malformed and ambiguous text', (t) => {
  for (const bad of ['', '1.2.3', '1.2.3.4.5', '256.0.0.1', '1.2.3.-1', '01.2.3.4', '1.2.3.4 ', ' 1.2.3.4', '1..3.4', 'a.b.c.d', '1.2.3.0x4', '1e1.0.0.1']) {
    t.is(parseIPv4(bad), undefined, bad);
  }
});

test('IPv6 parses full, compressed and dotted-quad forms', (t) => {
  t.is(parseIPv6('::'), 0n);
  t.is(parseIPv6('::1'), 1n);
  t.is(parseIPv6('1::'), 1n << 112n);
  t.is(parseIPv6('2001:db8:0:0:0:0:0:1'), parseIPv6('2001:db8::1'));
  t.is(parseIPv6('2001:DB8::1'), parseIPv6('2001:db8::1'));
  t.is(parseIPv6('0001:0db8::0001'), parseIPv6('1:db8::1'));
  t.is(parseIPv6('::ffff:10.0.0.1'), (0xffffn << 32n) | 0x0a000001n);
  t.is(parseIPv6('64:ff9b::192.0.2.33'), parseIPv6('64:ff9b::c000:221'));
  t.is(parseIPv6('1:2:3:4:5:6:7::'), parseIPv6('1:2:3:4:5:6:7:0'), ':: may stand for a single group');
  t.is(parseIPv6('ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'), (1n << 128n) - 1n);
});

test('IPv6 rejects malformed text', (t) => {
  for (const bad of [
    '', ':', ':::', '1::2::3', '1:2:3:4:5:6:7', '1:2:3:4:5:6:7:8:9', '1:2:3:4:5:6:7:8::', '12345::', 'g::1',
    ':1::', '1::2:', '::1.2.3', '1.2.3.4::', '::1.2.3.4:5', 'fe80::1%eth0', '1:2:3:4:5:6:7:1.2.3.4',
  ]) {
    t.is(parseIPv6(bad), undefined, bad);
  }
});

test('IPv6 formats per RFC 5952', (t) => {
  const cases: [string, string][] = [
    ['2001:0db8:0000:0000:0000:0000:0000:0001', '2001:db8::1'], // leading zeros, longest run
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'], // tie: first run is compressed
    ['2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1'], // a single zero group is not compressed
    ['2001:db8:0:0:1:0:0:0', '2001:db8:0:0:1::'], // longest run wins over an earlier shorter one
    ['0:0:0:0:0:0:0:0', '::'],
    ['0:0:0:0:0:0:0:1', '::1'],
    ['1:0:0:0:0:0:0:0', '1::'],
    ['2001:DB8::ABCD', '2001:db8::abcd'], // lower case
    ['::ffff:c000:0280', '::ffff:192.0.2.128'], // IPv4-mapped in mixed notation (§5)
    ['fd6b:6e69:7400:0:0:0:0:2', 'fd6b:6e69:7400::2'],
  ];
  for (const [input, want] of cases) t.is(formatIPv6(parseIPv6(input)!), want, input);
});

test('generic parse/format picks the family and normalizes', (t) => {
  t.deepEqual(parseIp('10.0.0.1'), { family: 4, value: 0x0a000001n });
  t.deepEqual(parseIp('::2'), { family: 6, value: 2n });
  t.is(tryParseIp('nope'), undefined);
  t.throws(() => parseIp('10.0.0.256'), { message: '"10.0.0.256" is not a valid IP address' });
  t.is(normalizeIp('FD00:0:0::0001'), 'fd00::1');
  t.is(formatIp({ family: 4, value: 1n }), '0.0.0.1');
});

test('CIDR parse keeps the written address and clears host bits for the network', (t) => {
  const c = parseCidr('10.244.96.7/20');
  t.is(c.family, 4);
  t.is(c.prefixLen, 20);
  t.is(formatIPv4(c.address), '10.244.96.7');
  t.is(formatCidr(c), '10.244.96.0/20');
  t.is(formatCidr(parseCidr('fd6b:6e69:7400::5/64')), 'fd6b:6e69:7400::/64');
  t.is(formatCidr(parseCidr('0.0.0.0/0')), '0.0.0.0/0');
  t.is(formatCidr(parseCidr('::/0')), '::/0');
  for (const bad of ['10.0.0.0', '10.0.0.0/33', '10.0.0.0/', '10.0.0.0/08', '10.0.0.0/-1', '::/129', 'x/8', '10.0.0.0/8/8']) {
    t.is(tryParseCidr(bad), undefined, bad);
  }
  t.throws(() => parseCidr('10.0.0.0/33'), { message: '"10.0.0.0/33" is not a valid CIDR' });
});

test('CIDR size, last address, containment and overlap', (t) => {
  const v4 = parseCidr('192.168.1.0/24');
  t.is(cidrSize(v4), 256n);
  t.is(formatIPv4(cidrLast(v4)), '192.168.1.255');
  t.true(cidrContains(v4, parseIp('192.168.1.0')));
  t.true(cidrContains(v4, parseIp('192.168.1.255')));
  t.false(cidrContains(v4, parseIp('192.168.2.0')));
  t.false(cidrContains(v4, parseIp('::1')), 'other family never contained');
  const v6 = parseCidr('fd00::/64');
  t.is(cidrSize(v6), 1n << 64n);
  t.true(cidrContains(v6, parseIp('fd00::ffff:ffff:ffff:ffff')));
  t.false(cidrContains(v6, parseIp('fd00:0:0:1::')));
  t.true(cidrsOverlap(parseCidr('10.0.0.0/8'), parseCidr('10.1.0.0/16')));
  t.true(cidrsOverlap(parseCidr('10.1.0.0/16'), parseCidr('10.0.0.0/8')));
  t.false(cidrsOverlap(parseCidr('10.0.0.0/24'), parseCidr('10.0.1.0/24')));
  t.false(cidrsOverlap(parseCidr('0.0.0.0/0'), parseCidr('::/0')));
});

test('overlappingPairs finds every overlapping pair, nested or equal, within a family, and only those (the same answer as comparing each pair)', (t) => {
  const texts = ['10.1.0.0/16', '10.1.1.0/24', '10.2.0.0/24', '10.1.1.0/25', '10.1.1.128/25', '10.1.1.0/24', 'fd00::/64', '::/0', '0.0.0.0/0', '10.3.0.0/24', 'fd00:1::/64'];
  const cidrs = texts.map(parseCidr);
  const key = ([a, b]: number[]) => [texts[a], texts[b]].sort().join(' ~ ');
  const brute: string[] = [];
  for (let i = 0; i < cidrs.length; i++) for (let j = i + 1; j < cidrs.length; j++) if (cidrsOverlap(cidrs[i]!, cidrs[j]!)) brute.push(key([i, j]));
  const swept = overlappingPairs(cidrs);
  t.deepEqual(swept.map(key).sort(), brute.sort());
  t.true(swept.every(([outer, inner]) => cidrs[outer]!.prefixLen <= cidrs[inner]!.prefixLen), 'the containing block first');
  t.deepEqual(overlappingPairs([parseCidr('10.0.0.0/24'), parseCidr('10.0.1.0/24')]), []);
  // A thousand nodes' blocks, two of them clashing: one pair.
  const many = Array.from({ length: 1000 }, (_, i) => parseCidr(`10.${i >> 8}.${i & 255}.0/24`));
  many.push(parseCidr('10.3.7.0/25'));
  t.deepEqual(overlappingPairs(many), [[3 * 256 + 7, 1000]]);
});

test('nthAddress counts from the network address and refuses to leave the prefix', (t) => {
  const c = parseCidr('10.0.0.0/30');
  t.is(formatIp(nthAddress(c, 0n)), '10.0.0.0');
  t.is(formatIp(nthAddress(c, 3n)), '10.0.0.3');
  t.throws(() => nthAddress(c, 4n), { instanceOf: RangeError });
  t.throws(() => nthAddress(c, -1n), { instanceOf: RangeError });
  t.is(formatIp(nthAddress(parseCidr('fd00::/64'), (1n << 64n) - 1n)), 'fd00::ffff:ffff:ffff:ffff');
});
