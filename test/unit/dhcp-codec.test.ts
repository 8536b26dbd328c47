// The DHCP/RA codecs and the single-guest responder (src/dhcp), against byte facts from the
// RFCs: RFC 1071's checksum example, RFC 2131's message layout, RFC 3397's and RFC 3442's
// encodings, RFC 4291's EUI-64 example, RFC 4861's RA layout, RFC 8415's DUID-LL and IA_NA.
// Then the responder's promises: only the guest's MAC gets an answer, and no malformed frame
// gets one or throws.
import test from 'ava';
import { ipv4Bytes, ipv6Bytes, ipv6Text, linkLocalOf, macBytes } from '../../src/dhcp/addr.js';
import { buildIcmpv6Frame, buildUdpFrame, parseFrame, ETH_HEADER } from '../../src/dhcp/frame.js';
import { encodeClasslessRoutes, encodeDomainList, encodeOptions, parseOptions } from '../../src/dhcp/dhcpv4.js';
import { parseOptions6 } from '../../src/dhcp/dhcpv6.js';
import { leaseFrom } from '../../src/dhcp/lease.js';
import { LEASE_SECONDS, T1_SECONDS, T2_SECONDS, respond, routerAdvertisement } from '../../src/dhcp/responder.js';
import type { GuestConfig } from '../../src/base/handoff.js';
import { dhcpFrame as clientFrame, overloadedDiscover, partialChecksum, unicastDhcpFrame } from '../helpers/dhcp-client.js';

const GUEST_MAC = '0a:58:0a:76:00:05';
const SERVER_MAC = '0e:11:22:33:44:55';
const guest: GuestConfig = {
  name: 'eth0', mac: GUEST_MAC, mtu: 1450, delivery: 'dhcp', neighbors: [],
  ips: [{ address: '10.118.0.5/20', family: 4, gateway: '10.118.0.1' }, { address: 'fd00:118::5/64', family: 6, gateway: 'fd00:118::1' }],
  routes: [{ dst: '0.0.0.0/0', gateway: '10.118.0.1' }, { dst: '::/0', gateway: 'fd00:118::1' }],
  dns: { nameservers: ['10.96.0.10', 'fd00:96::a'], search: ['default.svc.cluster.local', 'cluster.local'], options: [] },
};
const lease = leaseFrom(guest, { mac: SERVER_MAC, isRouter6: true, hostname: 'vm1' });

const dhcpFrame = (type: number, o: Parameters<typeof clientFrame>[2] & { mac?: string } = {}) => clientFrame(type, o.mac ?? GUEST_MAC, o);

/** The DHCP payload and options of an answer frame, checked as a client would. */
function answerOf(frame: Buffer) {
  const f = parseFrame(frame, 1514);
  const msg = f.payload;
  return { f, msg, options: parseOptions(msg.subarray(240)) };
}

test('RFC 1071: the Internet checksum of its example bytes, through an IPv4 header round trip', (t) => {
  // RFC 1071 section 3's example: words 0001 f203 f4f5 f6f7 sum to ddf2 (one's complement).
  const frame = buildUdpFrame({ dstMac: macBytes(GUEST_MAC), srcMac: macBytes(SERVER_MAC), srcIp: ipv4Bytes('10.0.0.1'), dstIp: ipv4Bytes('10.0.0.2'), srcPort: 67, dstPort: 68, payload: Buffer.from('0001f203f4f5f6f7', 'hex') });
  const parsed = parseFrame(frame, 1514);
  t.is(parsed.payload.toString('hex'), '0001f203f4f5f6f7');
  t.is(parsed.srcIp, '10.0.0.1');
  // A flipped bit anywhere in the IP header or UDP payload is caught.
  const bad = Buffer.from(frame);
  bad[ETH_HEADER + 20 + 8] ^= 1;
  t.throws(() => parseFrame(bad, 1514), { message: 'bad-checksum' });
});

test('RFC 3442: classless route encodings of its examples; RFC 3397: the search list of its example', (t) => {
  const r = (cidr: string, gw = '0.0.0.0') => ({ dst: ipv4Bytes(cidr.split('/')[0]!), prefix: Number(cidr.split('/')[1]), gateway: ipv4Bytes(gw) });
  // RFC 3442 section 3 destination descriptors, each followed by its router.
  t.is(encodeClasslessRoutes([r('0.0.0.0/0', '10.0.0.1')]).toString('hex'), '00' + '0a000001');
  t.is(encodeClasslessRoutes([r('10.0.0.0/8')]).toString('hex'), '080a' + '00000000');
  t.is(encodeClasslessRoutes([r('10.17.0.0/16')]).toString('hex'), '100a11' + '00000000');
  t.is(encodeClasslessRoutes([r('10.27.129.0/24')]).toString('hex'), '180a1b81' + '00000000');
  t.is(encodeClasslessRoutes([r('10.229.0.128/25')]).toString('hex'), '190ae50080' + '00000000');
  t.is(encodeClasslessRoutes([r('255.255.255.255/32')]).toString('hex'), '20ffffffff' + '00000000');
  // RFC 3397 section 3's example list, uncompressed.
  t.deepEqual(encodeDomainList(['eng.apple.com.', 'marketing.apple.com.']), Buffer.concat([
    Buffer.from([3]), Buffer.from('eng'), Buffer.from([5]), Buffer.from('apple'), Buffer.from([3]), Buffer.from('com'), Buffer.from([0]),
    Buffer.from([9]), Buffer.from('marketing'), Buffer.from([5]), Buffer.from('apple'), Buffer.from([3]), Buffer.from('com'), Buffer.from([0]),
  ]));
});

test('RFC 4291 appendix A: the EUI-64 link-local address of a MAC; IPv6 text is RFC 5952 short form', (t) => {
  t.is(ipv6Text(linkLocalOf('34:56:78:9a:bc:de')), 'fe80::3656:78ff:fe9a:bcde');
  t.is(ipv6Text(ipv6Bytes('2001:db8:0:0:1:0:0:1')), '2001:db8::1:0:0:1');
  t.is(ipv6Text(ipv6Bytes('ff02::1:2')), 'ff02::1:2');
});

test('options: RFC 3396 splits a long value and joins it again; a list without the end option is malformed', (t) => {
  const long = Buffer.alloc(300, 7);
  const enc = encodeOptions([[119, long]]);
  t.is(enc[0], 119);
  t.is(enc[1], 255);
  t.is(enc[257], 119);
  t.is(enc[258], 45);
  t.deepEqual(parseOptions(enc).get(119), long);
  t.throws(() => parseOptions(Buffer.from([53, 1, 1])), { message: 'bad-message' });
});

test('DISCOVER gets an OFFER to the guest MAC: yiaddr, server id, lease, mask, router, DNS, search, hostname, MTU', (t) => {
  const out = respond(lease, dhcpFrame(1));
  t.is(out.result, 'answered');
  if (out.result !== 'answered') return;
  t.is(out.kind, 'offer');
  const { f, msg, options } = answerOf(out.frames[0]!);
  t.is(f.dstMac, GUEST_MAC);
  t.is(f.srcMac, SERVER_MAC);
  t.is(f.srcIp, '10.118.0.1');
  t.is(f.dstIp, '10.118.0.5', 'no broadcast flag: unicast to the offered address (RFC 2131 4.1)');
  t.is(msg[0], 2, 'BOOTREPLY');
  t.is(msg.readUInt32BE(4), 0xdeadbeef, 'xid echoed');
  t.is([...msg.subarray(16, 20)].join('.'), '10.118.0.5', 'yiaddr');
  t.true(msg.length >= 300, 'at least BOOTP\'s 300 bytes');
  t.deepEqual(options.get(53), Buffer.from([2]));
  t.deepEqual(options.get(54), ipv4Bytes('10.118.0.1'));
  t.is(options.get(51)!.readUInt32BE(0), LEASE_SECONDS);
  t.deepEqual(options.get(1), Buffer.from([255, 255, 240, 0]));
  t.deepEqual(options.get(3), ipv4Bytes('10.118.0.1'));
  t.false(options.has(121), 'a default route via the router alone needs no classless routes');
  t.deepEqual(options.get(6), ipv4Bytes('10.96.0.10'));
  t.is(options.get(15)!.toString(), 'default.svc.cluster.local');
  t.deepEqual(options.get(119), encodeDomainList(['default.svc.cluster.local', 'cluster.local']));
  t.is(options.get(12)!.toString(), 'vm1');
  t.is(options.get(26)!.readUInt16BE(0), 1450);
});

test('REQUEST for the offered address gets an ACK (broadcast when asked); for another address a NAK; for another server nothing', (t) => {
  const ack = respond(lease, dhcpFrame(3, { flags: 0x8000, options: [[50, ipv4Bytes('10.118.0.5')], [54, ipv4Bytes('10.118.0.1')]] }));
  t.like(ack, { result: 'answered', kind: 'ack' });
  if (ack.result === 'answered') t.is(answerOf(ack.frames[0]!).f.dstIp, '255.255.255.255');
  const nak = respond(lease, dhcpFrame(3, { options: [[50, ipv4Bytes('10.118.0.99')]] }));
  t.like(nak, { result: 'answered', kind: 'nak' });
  if (nak.result === 'answered') {
    const { f, msg, options } = answerOf(nak.frames[0]!);
    t.is(f.dstIp, '255.255.255.255');
    t.is([...msg.subarray(16, 20)].join('.'), '0.0.0.0');
    t.false(options.has(51));
  }
  t.like(respond(lease, dhcpFrame(3, { options: [[50, ipv4Bytes('10.118.0.5')], [54, ipv4Bytes('10.9.9.9')]] })), { result: 'ignored', reason: 'not-for-us' });
  // Renewing (ciaddr set, no option 50): unicast to ciaddr.
  const renew = respond(lease, dhcpFrame(3, { ciaddr: '10.118.0.5' }));
  t.like(renew, { result: 'answered', kind: 'ack' });
  if (renew.result === 'answered') t.is(answerOf(renew.frames[0]!).f.dstIp, '10.118.0.5');
  // RELEASE and DECLINE take no answer (RFC 2131 4.3.3, 4.3.4): received; one to another server, not ours.
  t.deepEqual(respond(lease, dhcpFrame(7, { ciaddr: '10.118.0.5', options: [[54, ipv4Bytes('10.118.0.1')]] })), { result: 'received', kind: 'release' });
  t.deepEqual(respond(lease, dhcpFrame(4, { options: [[50, ipv4Bytes('10.118.0.5')], [54, ipv4Bytes('10.118.0.1')]] })), { result: 'received', kind: 'decline' });
  t.like(respond(lease, dhcpFrame(7, { ciaddr: '10.118.0.5', options: [[54, ipv4Bytes('10.9.9.9')]] })), { result: 'ignored', reason: 'not-for-us' });
  t.like(respond(lease, dhcpFrame(5)), { result: 'ignored', reason: 'unanswered-type' }, 'a server\'s message type from the guest');
});

test('routes beyond the default go as option 121 with the default last (routed network: on-link gateway)', (t) => {
  const routed = leaseFrom({
    ...guest,
    ips: [{ address: '10.118.0.5/32', family: 4, gateway: '169.254.1.1' }],
    routes: [{ dst: '0.0.0.0/0', gateway: '169.254.1.1', onlink: true }, { dst: '169.254.1.1/32', scope: 'link' }],
  }, { mac: SERVER_MAC, isRouter6: false });
  const out = respond(routed, dhcpFrame(1));
  if (out.result !== 'answered') return t.fail(JSON.stringify(out));
  const { options } = answerOf(out.frames[0]!);
  t.is(options.get(121)!.toString('hex'), '20a9fe0101' + '00000000' + '00' + 'a9fe0101');
  t.deepEqual(options.get(1), Buffer.from([255, 255, 255, 255]));
});

test('only the guest: another source MAC, or another chaddr, is dropped as foreign', (t) => {
  t.deepEqual(respond(lease, dhcpFrame(1, { mac: '0a:58:0a:76:00:06' })), { result: 'dropped', reason: 'foreign-mac' });
  t.deepEqual(respond(lease, dhcpFrame(1, { chaddr: '0a:58:0a:76:00:06' })), { result: 'dropped', reason: 'foreign-mac' });
});

test('fuzz: every truncation, oversized frames, flipped bytes and random frames are dropped or ignored, never answered or thrown', (t) => {
  const good = dhcpFrame(1);
  for (let n = 0; n < good.length; n++) {
    const out = respond(lease, good.subarray(0, n));
    t.not(out.result, 'answered', `truncated to ${n} bytes`);
  }
  t.deepEqual(respond(lease, Buffer.concat([good, Buffer.alloc(1500)])), { result: 'dropped', reason: 'oversized' });
  let seed = 42;
  const rand = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) & 0xff;
  for (let i = 0; i < 2000; i++) {
    const bad = Buffer.from(good);
    // Mangle one byte past the Ethernet header: a header, a checksum or an option breaks.
    bad[ETH_HEADER + (rand() * 7 + i) % (bad.length - ETH_HEADER)] ^= 1 + (rand() % 255);
    const out = respond(lease, bad);
    if (out.result === 'answered') {
      // Only a byte the checksum does not cover (IPv4 UDP with checksum) can survive: none here.
      t.fail(`mangled frame ${i} was answered`);
      return;
    }
  }
  for (let i = 0; i < 500; i++) {
    const junk = Buffer.from(Array.from({ length: rand() * 3 }, rand));
    t.notThrows(() => respond(lease, junk));
  }
});

test('DHCPv6: SOLICIT gets an ADVERTISE with the client id, the server DUID-LL and IA_NA of the same IAID; rapid commit a REPLY', (t) => {
  const clientId = Buffer.from('00030001' + '0a580a760005', 'hex');
  const ia = Buffer.concat([Buffer.from('cafe0001', 'hex'), Buffer.alloc(8)]);
  const opt = (code: number, v: Buffer) => Buffer.concat([Buffer.from([code >> 8, code & 0xff, v.length >> 8, v.length & 0xff]), v]);
  const solicit = (rapid: boolean) => buildUdpFrame({
    dstMac: macBytes('33:33:00:01:00:02'), srcMac: macBytes(GUEST_MAC), srcIp: linkLocalOf(GUEST_MAC), dstIp: ipv6Bytes('ff02::1:2'), srcPort: 546, dstPort: 547,
    payload: Buffer.concat([Buffer.from([1, 0x12, 0x34, 0x56]), opt(1, clientId), opt(3, ia), ...(rapid ? [opt(14, Buffer.alloc(0))] : [])]),
  });
  const out = respond(lease, solicit(false));
  if (out.result !== 'answered') return t.fail(JSON.stringify(out));
  t.is(out.kind, 'advertise');
  const f = parseFrame(out.frames[0]!, 1514);
  t.is(f.dstIp, ipv6Text(linkLocalOf(GUEST_MAC)));
  t.is(f.srcIp, ipv6Text(linkLocalOf(SERVER_MAC)));
  t.is(f.payload[0], 2);
  t.is(f.payload.subarray(1, 4).toString('hex'), '123456');
  const options = parseOptions6(f.payload.subarray(4));
  t.deepEqual(options.get(1)![0], clientId);
  t.is(options.get(2)![0]!.toString('hex'), '00030001' + '0e1122334455');
  const iaNa = options.get(3)![0]!;
  t.is(iaNa.subarray(0, 4).toString('hex'), 'cafe0001');
  const iaAddr = parseOptions6(iaNa.subarray(12)).get(5)![0]!;
  t.is(ipv6Text(iaAddr.subarray(0, 16)), 'fd00:118::5');
  t.deepEqual(options.get(23)![0], ipv6Bytes('fd00:96::a'));
  t.like(respond(lease, solicit(true)), { result: 'answered', kind: 'reply' });
});

test('RA: hop limit 255, managed+other flags, the router\'s link-layer address, MTU, the on-link prefix, RDNSS and DNSSL', (t) => {
  const frame = routerAdvertisement(lease);
  const f = parseFrame(frame, 1514);
  t.is(f.hopLimit, 255);
  t.is(f.srcIp, ipv6Text(linkLocalOf(SERVER_MAC)));
  t.is(f.dstIp, 'ff02::1');
  const ra = f.payload;
  t.is(ra[0], 134);
  t.is(ra[5], 0xc0);
  t.is(ra.readUInt16BE(6), 9000);
  t.is(ra.subarray(16, 24).toString('hex'), '0101' + '0e1122334455');
  t.is(ra.subarray(24, 32).toString('hex'), '0501' + '0000' + (1450).toString(16).padStart(8, '0'));
  t.is(ra.subarray(32, 36).toString('hex'), '0304' + '40' + '80', 'prefix /64, on-link, not autonomous');
  t.is(ipv6Text(ra.subarray(48, 64)), 'fd00:118::');
  t.is(ra[64], 25);
  t.is(ra.length % 8, 0);
  // An RS from the guest gets that RA, to its link-local address.
  const rs = Buffer.from([133, 0, 0, 0, 0, 0, 0, 0]);
  const out = respond(lease, buildIcmpv6Frame(macBytes('33:33:00:00:00:02'), macBytes(GUEST_MAC), linkLocalOf(GUEST_MAC), ipv6Bytes('ff02::2'), rs));
  t.like(out, { result: 'answered', kind: 'ra' });
  const notRouter = leaseFrom(guest, { mac: SERVER_MAC, isRouter6: false });
  t.is(parseFrame(routerAdvertisement(notRouter), 1514).payload.readUInt16BE(6), 0, 'no default router when the server is not the router');
});

test('a checksum the guest left to its NIC (TP_STATUS_CSUMNOTREADY): answered when the seed is the pseudo-header sum, dropped otherwise', (t) => {
  // A unicast RENEW from the guest's kernel UDP socket: 10.118.0.5:68 -> 10.118.0.1:67.
  const full = unicastDhcpFrame(3, GUEST_MAC, SERVER_MAC, '10.118.0.5', '10.118.0.1');
  const { frame: renew, start, offset } = partialChecksum(full);
  t.deepEqual(respond(lease, renew), { result: 'dropped', reason: 'bad-checksum' }, 'read as a finished checksum, the seed is wrong');
  t.like(respond(lease, renew, true), { result: 'answered', kind: 'ack' });
  t.like(respond(lease, full, true), { result: 'dropped', reason: 'bad-checksum' }, 'a finished checksum is no pseudo-header seed');
  // A seed that is not this pseudo-header's sum (as if an address changed after it): dropped.
  const wrongSeed = Buffer.from(renew);
  wrongSeed.writeUInt16BE(wrongSeed.readUInt16BE(start + offset) ^ 0x0100, start + offset);
  t.deepEqual(respond(lease, wrongSeed, true), { result: 'dropped', reason: 'bad-checksum' });
  // A finished checksum with a flipped byte is still dropped.
  const flipped = Buffer.from(full);
  flipped[flipped.length - 20] ^= 0x10;
  t.deepEqual(respond(lease, flipped), { result: 'dropped', reason: 'bad-checksum' });

  // DHCPv6 from dhclient's kernel socket, and an RS, the same way.
  const solicitPartial = partialChecksum(solicitFrame(false)).frame;
  t.deepEqual(respond(lease, solicitPartial), { result: 'dropped', reason: 'bad-checksum' });
  t.like(respond(lease, solicitPartial, true), { result: 'answered', kind: 'advertise' });
  const rs = buildIcmpv6Frame(macBytes('33:33:00:00:00:02'), macBytes(GUEST_MAC), linkLocalOf(GUEST_MAC), ipv6Bytes('ff02::2'), Buffer.from([133, 0, 0, 0, 0, 0, 0, 0]));
  t.like(respond(lease, partialChecksum(rs).frame, true), { result: 'answered', kind: 'ra' });
});

test('option overload (RFC 2131 4.1, RFC 2132 9.3): options in file and sname are read; an overrun or a bad value gets no answer', (t) => {
  const field = (len: number, ...opts: Buffer[]) => {
    const b = Buffer.alloc(len); // the rest is pad (0)
    Buffer.concat(opts).copy(b);
    return b;
  };
  const opt = (code: number, v: Buffer) => Buffer.concat([Buffer.from([code, v.length]), v]);
  const end = Buffer.from([255]);
  // 52 = 3: the parameter request list in file, the requested address in sname.
  const both = overloadedDiscover(GUEST_MAC, [[52, Buffer.from([3])]], field(128, opt(55, Buffer.from([119, 6, 3, 1])), end), field(64, opt(50, ipv4Bytes('10.118.0.5')), end));
  const out = respond(lease, both);
  if (out.result !== 'answered') return t.fail(JSON.stringify(out));
  t.deepEqual([...answerOf(out.frames[0]!).options.keys()].slice(0, 9), [53, 54, 51, 1, 3, 119, 6, 15, 12], 'file\'s option 55 ordered the answer');
  // 52 = 1: file only; sname's bytes are then a server name, not options.
  t.like(respond(lease, overloadedDiscover(GUEST_MAC, [[52, Buffer.from([1])]], field(128, opt(55, Buffer.from([6])), end), Buffer.alloc(64, 0x41))), { result: 'answered', kind: 'offer' });

  const dropped = { result: 'dropped', reason: 'bad-message' };
  // An option that runs past the end of file, and a file with no end option.
  t.deepEqual(respond(lease, overloadedDiscover(GUEST_MAC, [[52, Buffer.from([1])]], Buffer.concat([Buffer.alloc(124), Buffer.from([55, 10, 1, 3])]), undefined)), dropped);
  t.deepEqual(respond(lease, overloadedDiscover(GUEST_MAC, [[52, Buffer.from([1])]], Buffer.alloc(128, 0), undefined)), dropped);
  t.deepEqual(respond(lease, overloadedDiscover(GUEST_MAC, [[52, Buffer.from([2])]], undefined, Buffer.concat([Buffer.alloc(62), Buffer.from([12, 9])]))), dropped);
  // Option 52 with a value other than 1, 2, 3 or of another length; and 52 again inside file.
  t.deepEqual(respond(lease, overloadedDiscover(GUEST_MAC, [[52, Buffer.from([4])]], field(128, end), undefined)), dropped);
  t.deepEqual(respond(lease, overloadedDiscover(GUEST_MAC, [[52, Buffer.from([1, 1])]], field(128, end), undefined)), dropped);
  t.deepEqual(respond(lease, overloadedDiscover(GUEST_MAC, [[52, Buffer.from([1])]], field(128, opt(52, Buffer.from([2])), end), field(64, end))), dropped);
});

test('the answer\'s options follow the client\'s option 55; what does not fit its largest message (576, or option 57) is left out, least wanted first', (t) => {
  const out = respond(lease, dhcpFrame(1, { options: [[55, Buffer.from([26, 119, 6])]] }));
  if (out.result !== 'answered') return t.fail(JSON.stringify(out));
  t.deepEqual([...answerOf(out.frames[0]!).options.keys()], [53, 54, 51, 1, 3, 26, 119, 6, 15, 12]);
  // Forty search domains: more than an options field of 312 bytes holds.
  const many = Array.from({ length: 40 }, (_, i) => `ns${i}.example.internal`);
  const big = leaseFrom({ ...guest, dns: { nameservers: ['10.96.0.10'], search: many, options: [] } }, { mac: SERVER_MAC, isRouter6: true, hostname: 'vm1' });
  const ipLength = (frame: Buffer) => frame.readUInt16BE(ETH_HEADER + 2);
  const small = respond(big, dhcpFrame(1, { options: [[55, Buffer.from([1, 3, 6, 15, 119])]] }));
  if (small.result !== 'answered') return t.fail(JSON.stringify(small));
  t.true(ipLength(small.frames[0]!) <= 576, `${ipLength(small.frames[0]!)} bytes`);
  const o = answerOf(small.frames[0]!).options;
  t.deepEqual([...o.keys()], [53, 54, 51, 1, 3, 6, 15, 12, 26], 'the search list did not fit; the rest, asked for or not, did');
  const large = respond(big, dhcpFrame(1, { options: [[55, Buffer.from([1, 3, 6, 15, 119])], [57, Buffer.from([0x05, 0xdc])]] }));
  if (large.result !== 'answered') return t.fail(JSON.stringify(large));
  t.deepEqual(answerOf(large.frames[0]!).options.get(119), encodeDomainList(many), 'with option 57 = 1500 it goes whole (split per RFC 3396)');
  t.true(ipLength(large.frames[0]!) <= 1500);
});

test('domain and search: option 15 is the config\'s domain, option 119 its search list (the domain alone when there is none)', (t) => {
  const withDomain = leaseFrom({ ...guest, dns: { nameservers: [], search: ['a.example', 'b.example'], options: [], domain: 'example' } }, { mac: SERVER_MAC, isRouter6: true });
  const out = respond(withDomain, dhcpFrame(1));
  if (out.result !== 'answered') return t.fail(JSON.stringify(out));
  const o = answerOf(out.frames[0]!).options;
  t.is(o.get(15)!.toString(), 'example');
  t.deepEqual(o.get(119), encodeDomainList(['a.example', 'b.example']));
  t.false(o.has(6), 'no nameservers, no option 6');
  const domainOnly = leaseFrom({ ...guest, dns: { nameservers: [], search: [], options: [], domain: 'example' } }, { mac: SERVER_MAC, isRouter6: true });
  const out2 = respond(domainOnly, dhcpFrame(1));
  if (out2.result !== 'answered') return t.fail(JSON.stringify(out2));
  t.deepEqual(answerOf(out2.frames[0]!).options.get(119), encodeDomainList(['example']));
});

const CLIENT_ID = Buffer.from('00030001' + '0a580a760005', 'hex');
const opt6 = (code: number, v: Buffer) => Buffer.concat([Buffer.from([code >> 8, code & 0xff, v.length >> 8, v.length & 0xff]), v]);
const iaAddr6 = (addr: string) => opt6(5, Buffer.concat([ipv6Bytes(addr), Buffer.alloc(8)]));
const ia6 = (...addrs: string[]) => opt6(3, Buffer.concat([Buffer.from('cafe0001', 'hex'), Buffer.alloc(8), ...addrs.map(iaAddr6)]));
const SERVER_ID = opt6(2, Buffer.from('00030001' + '0e1122334455', 'hex'));
function message6(type: number, ...options: Buffer[]): Buffer {
  return buildUdpFrame({
    dstMac: macBytes('33:33:00:01:00:02'), srcMac: macBytes(GUEST_MAC), srcIp: linkLocalOf(GUEST_MAC), dstIp: ipv6Bytes('ff02::1:2'), srcPort: 546, dstPort: 547,
    payload: Buffer.concat([Buffer.from([type, 0x12, 0x34, 0x56]), opt6(1, CLIENT_ID), ...options]),
  });
}
const solicitFrame = (rapid: boolean) => message6(1, ia6(), ...(rapid ? [opt6(14, Buffer.alloc(0))] : []));
function reply6(out: ReturnType<typeof respond>) {
  if (out.result !== 'answered') throw new Error(JSON.stringify(out));
  const f = parseFrame(out.frames[0]!, 1514);
  return { type: f.payload[0], options: parseOptions6(f.payload.subarray(4)) };
}
const iaOf = (options: Map<number, Buffer[]>) => {
  const ia = options.get(3)![0]!;
  return { t1: ia.readUInt32BE(4), t2: ia.readUInt32BE(8), addrs: (parseOptions6(ia.subarray(12)).get(5) ?? []).map((a) => ({ address: ipv6Text(a.subarray(0, 16)), preferred: a.readUInt32BE(16), valid: a.readUInt32BE(20) })) };
};
const status6 = (options: Map<number, Buffer[]>) => options.get(13)?.[0]?.readUInt16BE(0);

test('DHCPv6: T1/T2 at 0.5 and 0.8 of the lifetimes (RFC 8415 21.4); a Renew keeps the address and ends any other; DNS in every Reply', (t) => {
  t.is(T1_SECONDS, LEASE_SECONDS / 2);
  t.is(T2_SECONDS, LEASE_SECONDS * 0.8);
  const adv = iaOf(reply6(respond(lease, solicitFrame(false))).options);
  t.deepEqual(adv, { t1: T1_SECONDS, t2: T2_SECONDS, addrs: [{ address: 'fd00:118::5', preferred: LEASE_SECONDS, valid: LEASE_SECONDS }] });
  const renew = reply6(respond(lease, message6(5, SERVER_ID, ia6('fd00:118::5', 'fd00:99::7'))));
  t.is(renew.type, 7);
  t.deepEqual(iaOf(renew.options).addrs, [
    { address: 'fd00:118::5', preferred: LEASE_SECONDS, valid: LEASE_SECONDS },
    { address: 'fd00:99::7', preferred: 0, valid: 0 },
  ]);
  t.deepEqual(renew.options.get(23)![0], ipv6Bytes('fd00:96::a'));
  t.deepEqual(renew.options.get(24)![0], encodeDomainList(['default.svc.cluster.local', 'cluster.local']));
  t.deepEqual(iaOf(reply6(respond(lease, message6(6, ia6('fd00:118::5')))).options).addrs.map((a) => a.address), ['fd00:118::5'], 'Rebind');
  t.like(respond(lease, message6(5, opt6(2, Buffer.from('000300010e1122334499', 'hex')), ia6('fd00:118::5'))), { result: 'ignored', reason: 'not-for-us' });
});

test('DHCPv6: Confirm says on-link or not (18.3.3); Release and Decline get Success (18.3.7, 18.3.8); Information-request the DNS alone', (t) => {
  t.is(status6(reply6(respond(lease, message6(4, ia6('fd00:118::5')))).options), 0);
  t.is(status6(reply6(respond(lease, message6(4, ia6('fd00:99::7')))).options), 4, 'NotOnLink');
  t.like(respond(lease, message6(4, ia6())), { result: 'ignored' }, 'a Confirm naming no address gets no Reply');
  for (const type of [8, 9]) {
    const r = reply6(respond(lease, message6(type, SERVER_ID, ia6('fd00:118::5'))));
    t.is(r.type, 7);
    t.is(status6(r.options), 0);
    t.false(r.options.has(3), 'no IA in the Reply');
  }
  const info = reply6(respond(lease, message6(11)));
  t.false(info.options.has(3));
  t.deepEqual(info.options.get(23)![0], ipv6Bytes('fd00:96::a'));
});
