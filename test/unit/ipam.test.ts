// IPAM: next-fit allocation, idempotency per owner, release and reuse, exhaustion, static
// reservations, huge v6 pools, and rebuilding from recorded reservations.
import test from 'ava';
import { KnitError } from '../../src/base/errors.js';
import { Ipam } from '../../src/ipam/ipam.js';
import { BITMAP_LIMIT } from '../../src/ipam/occupancy.js';

const small = () =>
  new Ipam([{ name: 'tiny', ipv4: { subnet: '10.9.0.0/29', gateway: '10.9.0.1' } }]); // hosts .2-.6

test('allocates sequentially after the gateway and reports prefix and gateway', (t) => {
  const ipam = new Ipam([{ name: 'n', ipv4: { subnet: '10.244.96.0/20', gateway: '10.244.96.1' } }]);
  const a = ipam.allocate('n', 4, 'sb1/eth0');
  t.like(a, { network: 'n', family: 4, address: '10.244.96.2', prefixLen: 20, cidr: '10.244.96.2/20', gateway: '10.244.96.1', owner: 'sb1/eth0' });
  t.is(ipam.allocate('n', 4, 'sb2/eth0').address, '10.244.96.3');
  t.is(ipam.allocate('n', 4, 'sb3/eth0').address, '10.244.96.4');
});

test('allocation is idempotent per owner, network and family', (t) => {
  const ipam = new Ipam([
    { name: 'a', ipv4: { subnet: '10.1.0.0/24' }, ipv6: { subnet: 'fd00:1::/64' } },
    { name: 'b', ipv4: { subnet: '10.2.0.0/24' } },
  ]);
  const first = ipam.allocate('a', 4, 'x');
  t.deepEqual(ipam.allocate('a', 4, 'x'), first);
  t.is(ipam.usage('a')[0].used, 1);
  // Same owner elsewhere gets its own address there.
  t.is(ipam.allocate('a', 6, 'x').address, 'fd00:1::1');
  t.is(ipam.allocate('b', 4, 'x').address, '10.2.0.1');
  t.is(ipam.holdings('x').length, 3);
});

test('next-fit: a freed address is not reused until the cursor wraps', (t) => {
  const ipam = small();
  const a = ipam.allocate('tiny', 4, 'a').address; // .2
  t.is(a, '10.9.0.2');
  t.deepEqual(ipam.release('a').map((x) => x.address), ['10.9.0.2']);
  t.is(ipam.allocate('tiny', 4, 'b').address, '10.9.0.3', 'freed .2 is skipped');
  for (const o of ['c', 'd', 'e']) ipam.allocate('tiny', 4, o); // .4 .5 .6 — end of range
  t.is(ipam.allocate('tiny', 4, 'f').address, '10.9.0.2', 'after the wrap the freed address comes back');
  t.is(ipam.ownerOf('tiny', '10.9.0.2'), 'f');
});

test('preview answers like allocate but takes nothing and keeps the cursor', (t) => {
  const ipam = small();
  ipam.allocate('tiny', 4, 'a'); // .2
  t.is(ipam.preview('tiny', 4, 'a').address, '10.9.0.2', 'an owner sees what it holds');
  t.is(ipam.preview('tiny', 4, 'plan').address, '10.9.0.3');
  t.is(ipam.preview('tiny', 4, 'plan').address, '10.9.0.3');
  t.is(ipam.ownerOf('tiny', '10.9.0.3'), undefined);
  t.is(ipam.allocate('tiny', 4, 'b').address, '10.9.0.3');
  for (const o of ['c', 'd', 'e']) ipam.allocate('tiny', 4, o);
  t.is((t.throws(() => ipam.preview('tiny', 4, 'plan')) as KnitError).code, 'RESOURCE_EXHAUSTED');
});

test('exhaustion is RESOURCE_EXHAUSTED naming the network, with CNI code 11', (t) => {
  const ipam = small();
  for (const o of ['a', 'b', 'c', 'd', 'e']) ipam.allocate('tiny', 4, o);
  t.deepEqual(ipam.usage('tiny'), [{ family: 4, subnet: '10.9.0.0/29', size: 5, used: 5, free: 0 }]);
  const err = t.throws(() => ipam.allocate('tiny', 4, 'late'), { instanceOf: KnitError }) as KnitError;
  t.is(err.code, 'RESOURCE_EXHAUSTED');
  t.regex(err.message, /network "tiny"/);
  t.regex(err.message, /10\.9\.0\.0\/29/);
  t.is(err.details.cniCode, 11);
  // An owner that already holds one still gets it back when the pool is full.
  t.is(ipam.allocate('tiny', 4, 'c').address, '10.9.0.4');
  ipam.releaseAddress('tiny', '10.9.0.5');
  t.is(ipam.allocate('tiny', 4, 'late').address, '10.9.0.5');
});

test('range, reserved addresses and CIDRs are respected', (t) => {
  const ipam = new Ipam([{
    name: 'r',
    ipv4: { subnet: '10.3.0.0/24', gateway: '10.3.0.1', rangeStart: '10.3.0.10', rangeEnd: '10.3.0.20', reserved: ['10.3.0.11', '10.3.0.12/31', '10.3.0.16/30'] },
  }]);
  const got = ['a', 'b', 'c', 'd'].map((o) => ipam.allocate('r', 4, o).address);
  t.deepEqual(got, ['10.3.0.10', '10.3.0.14', '10.3.0.15', '10.3.0.20']);
  t.is(ipam.usage('r')[0].size, 4, '11 addresses in range minus 7 reserved');
  t.throws(() => ipam.allocate('r', 4, 'e'), { message: /no free IPv4 address/ });
});

test('reserve: static addresses, conflicts and bad input', (t) => {
  const ipam = new Ipam([{ name: 'n', ipv4: { subnet: '10.4.0.0/24', gateway: '10.4.0.1', reserved: ['10.4.0.50'] }, ipv6: { subnet: 'fd00:4::/64' } }]);
  t.like(ipam.reserve('n', '10.4.0.2/24', 'a'), { address: '10.4.0.2', owner: 'a' });
  t.like(ipam.reserve('n', '10.4.0.2', 'a'), { address: '10.4.0.2' }, 'same owner again is fine');
  t.like(ipam.reserve('n', '10.4.0.50', 'b'), { address: '10.4.0.50' }, 'config-reserved addresses are for statics');
  t.like(ipam.reserve('n', 'FD00:4::0:10', 'c'), { address: 'fd00:4::10', family: 6 });

  const taken = t.throws(() => ipam.reserve('n', '10.4.0.2', 'z')) as KnitError;
  t.is(taken.code, 'ALREADY_EXISTS');
  t.regex(taken.message, /10\.4\.0\.2 is already held by "a"/);
  const outside = t.throws(() => ipam.reserve('n', '10.5.0.2', 'z')) as KnitError;
  t.is(outside.code, 'INVALID_ARGUMENT');
  t.regex(outside.message, /outside network "n" \(10\.4\.0\.0\/24\)/);
  t.throws(() => ipam.reserve('n', '10.4.0.1', 'z'), { message: /gateway/ });
  t.throws(() => ipam.reserve('n', '10.4.0.0', 'z'), { message: /network address/ });
  t.throws(() => ipam.reserve('n', '10.4.0.255', 'z'), { message: /broadcast address/ });
  t.throws(() => ipam.reserve('n', 'bogus', 'z'), { message: /"bogus" is not an IP address/ });
  t.is((t.throws(() => ipam.reserve('nope', '10.4.0.9', 'z')) as KnitError).code, 'NOT_FOUND');

  // The dynamic allocator steps over statics.
  t.is(ipam.allocate('n', 4, 'd').address, '10.4.0.3');
  t.deepEqual(ipam.release('a').map((x) => x.cidr), ['10.4.0.2/24']);
  t.is(ipam.ownerOf('n', '10.4.0.2'), undefined);
});

test('unknown network and missing family are clear errors', (t) => {
  const ipam = small();
  const unknown = t.throws(() => ipam.allocate('nope', 4, 'a')) as KnitError;
  t.is(unknown.code, 'NOT_FOUND');
  t.regex(unknown.message, /network "nope" is not configured \(known: tiny\)/);
  t.throws(() => ipam.allocate('tiny', 6, 'a'), { message: /network "tiny" has no IPv6 pool/ });
});

test('bad pool config is rejected naming the network and key', (t) => {
  t.throws(() => new Ipam([{ name: 'n', ipv4: { subnet: '10.0.0.0/33' } }]), { message: /network "n" subnet: "10.0.0.0\/33" is not a valid CIDR/ });
  t.throws(() => new Ipam([{ name: 'n', ipv4: { subnet: '10.0.0.0/24', gateway: '10.0.1.1' } }]), { message: /gateway/ });
  t.throws(() => new Ipam([{ name: 'n', ipv4: { subnet: 'fd00::/64' } }]), { message: /not an IPv4 subnet/ });
  t.throws(() => new Ipam([{ name: 'n', ipv4: { subnet: '10.0.0.0/24', rangeStart: '10.0.0.9', rangeEnd: '10.0.0.8' } }]), { message: /range/ });
});

test('a /64 v6 pool allocates without materializing its addresses (sparse)', (t) => {
  const ipam = new Ipam([{ name: 'v6', ipv6: { subnet: 'fd6b:6e69:7400::/64', gateway: 'fd6b:6e69:7400::1' } }]);
  const seen = new Set<string>();
  for (let i = 0; i < 20_000; i++) seen.add(ipam.allocate('v6', 6, `o${i}`).address);
  t.is(seen.size, 20_000);
  t.true(seen.has('fd6b:6e69:7400::2'));
  t.true(seen.has('fd6b:6e69:7400::4e21')); // 2 + 19999
  const [u] = ipam.usage('v6');
  t.is(u.used, 20_000);
  t.is(u.size, Number((1n << 64n) - 2n)); // minus subnet-router anycast and gateway
  t.is(u.subnet, 'fd6b:6e69:7400::/64');
});

test('a /32 v6 pool (2^96 addresses) and a /8 v4 pool work with bounded memory', (t) => {
  t.true(BITMAP_LIMIT < 1n << 64n);
  const ipam = new Ipam([{ name: 'huge', ipv6: { subnet: 'fd00::/32', reserved: ['fd00::/48'] } }, { name: 'big', ipv4: { subnet: '10.0.0.0/8' } }]);
  // The reserved /48 (2^80 addresses) is skipped in one step.
  t.is(ipam.allocate('huge', 6, 'a').address, 'fd00:0:1::');
  t.is(ipam.allocate('big', 4, 'a').address, '10.0.0.1');
  t.is(ipam.usage('big')[0].size, 16_777_214);
});

test('50 concurrent allocations get 50 distinct addresses', async (t) => {
  const ipam = new Ipam([{ name: 'n', ipv4: { subnet: '10.6.0.0/26', gateway: '10.6.0.1' }, ipv6: { subnet: 'fd00:6::/64' } }]);
  const attach = async (i: number) => {
    await new Promise((r) => setImmediate(r));
    return [ipam.allocate('n', 4, `sb${i}/eth0`), ipam.allocate('n', 6, `sb${i}/eth0`)];
  };
  const results = await Promise.all(Array.from({ length: 50 }, (_, i) => attach(i)));
  t.is(new Set(results.map(([v4]) => v4.address)).size, 50);
  t.is(new Set(results.map(([, v6]) => v6.address)).size, 50);
  t.is(ipam.usage('n')[0].used, 50);
  t.is(ipam.usage('n')[0].free, 61 - 50);
});

test('rebuild from recorded reservations, then continue allocating around them', (t) => {
  const records = [
    { owner: 'sb1/eth0', network: 'n', address: '10.7.0.2/24' },
    { owner: 'sb2/eth0', network: 'n', address: '10.7.0.4/24' },
    { owner: 'sb2/eth0', network: 'n', address: 'fd00:7::2/64' },
    { owner: 'sb3/net1', network: 'm', address: '10.8.0.9/24' },
  ];
  const networks = [
    { name: 'n', ipv4: { subnet: '10.7.0.0/24', gateway: '10.7.0.1' }, ipv6: { subnet: 'fd00:7::/64', gateway: 'fd00:7::1' } },
    { name: 'm', ipv4: { subnet: '10.8.0.0/24' } },
  ];
  const ipam = new Ipam(networks);
  for (const r of records) ipam.reserve(r.network, r.address, r.owner);
  t.is(ipam.holdings().length, 4);
  // Idempotent allocate returns the recorded address, not a new one.
  t.is(ipam.allocate('n', 4, 'sb2/eth0').address, '10.7.0.4');
  t.is(ipam.allocate('n', 6, 'sb2/eth0').address, 'fd00:7::2');
  // New owners never get a recorded address.
  const fresh = [ipam.allocate('n', 4, 'new1').address, ipam.allocate('n', 4, 'new2').address];
  t.deepEqual(fresh, ['10.7.0.3', '10.7.0.5']);
  t.is(ipam.allocate('n', 6, 'new1').address, 'fd00:7::3');
  t.deepEqual(ipam.usage('n').map((u) => u.used), [4, 2]);
});

test('reconfigure carries holdings over, or refuses and changes nothing', (t) => {
  const ipam = new Ipam([{ name: 'n', ipv4: { subnet: '10.10.0.0/24' } }, { name: 'gone', ipv4: { subnet: '10.11.0.0/24' } }]);
  ipam.allocate('n', 4, 'a'); // .1
  ipam.allocate('n', 4, 'b'); // .2
  ipam.release('a');
  ipam.reconfigure([{ name: 'n', ipv4: { subnet: '10.10.0.0/23' } }]);
  t.is(ipam.ownerOf('n', '10.10.0.2'), 'b');
  t.is(ipam.allocate('n', 4, 'c').address, '10.10.0.3', 'cursor kept: .1 not reused yet');
  t.deepEqual(ipam.networks(), ['n']);

  const err = t.throws(() => ipam.reconfigure([{ name: 'n', ipv4: { subnet: '10.10.0.0/24', gateway: '10.10.0.3' } }])) as KnitError;
  t.is(err.code, 'FAILED_PRECONDITION');
  t.regex(err.message, /10\.10\.0\.3 \(held by "c"\): .*gateway/);
  t.is(ipam.usage('n')[0].subnet, '10.10.0.0/23', 'old config still in force');
});
