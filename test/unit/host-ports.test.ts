// Host-port conflicts and plans (src/core/host-ports.ts); the kernel side with real traffic is
// test/kernel/host-ports.test.ts.
import test from 'ava';
import { KnitError } from '../../src/base/errors.js';
import type { PortMapping } from '../../src/base/types.js';
import { hostPortRuleset, planHostPorts, refuseHostPortConflicts } from '../../src/core/host-ports.js';

const tcp = (hostPort: number, hostIp?: string): PortMapping => ({ protocol: 'tcp', containerPort: 80, hostPort, ...(hostIp && { hostIp }) });

function clash(mine: PortMapping[], theirs: PortMapping[]): KnitError | undefined {
  try {
    refuseHostPortConflicts('me', mine, [{ sandboxId: 'other', mappings: theirs }]);
    return undefined;
  } catch (err) {
    return err as KnitError;
  }
}

test('a host port held on an overlapping address is refused naming the holder and the field', (t) => {
  for (const [mine, theirs] of [
    [tcp(8080), tcp(8080)],
    [tcp(8080, '10.0.0.1'), tcp(8080)],
    [tcp(8080), tcp(8080, '10.0.0.1')],
    [tcp(8080, '0.0.0.0'), tcp(8080, '10.0.0.1')],
    [tcp(8080, 'fd00::1'), tcp(8080, 'fd00:0::1')],
    [tcp(8080, '::'), tcp(8080)],
  ] as const) {
    const err = clash([{ protocol: 'udp', containerPort: 1, hostPort: 1 }, mine], [theirs]);
    t.is(err?.code, 'ALREADY_EXISTS', JSON.stringify([mine, theirs]));
    t.is(err?.details.field, 'port_mappings[1]');
    t.regex(err!.message, /held by sandbox other \(its port_mappings\[0\]/);
  }
});

test('other ports, protocols, addresses and families do not conflict; a mapping without a host port holds nothing', (t) => {
  t.is(clash([tcp(8080)], [tcp(8081)]), undefined);
  t.is(clash([tcp(8080)], [{ ...tcp(8080), protocol: 'udp' }]), undefined);
  t.is(clash([tcp(8080, '10.0.0.1')], [tcp(8080, '10.0.0.2')]), undefined);
  t.is(clash([tcp(8080, '10.0.0.1')], [tcp(8080, 'fd00::1')]), undefined);
  t.is(clash([tcp(8080, '0.0.0.0')], [tcp(8080, '::')]), undefined);
  t.is(clash([tcp(0)], [tcp(0)]), undefined);
  // The sandbox's own record (a repeated attach) is not a holder.
  t.notThrows(() => refuseHostPortConflicts('me', [tcp(8080)], [{ sandboxId: 'me', mappings: [tcp(8080)] }]));
});

test('two mappings of one request that overlap are INVALID_ARGUMENT naming the second', (t) => {
  const err = clash([tcp(8080, '10.0.0.1'), tcp(9090), tcp(8080)], []);
  t.is(err?.code, 'INVALID_ARGUMENT');
  t.is(err?.details.field, 'port_mappings[2]');
});

test('the plan: route_localnet with its restore, conntrack flushes, the table, then the UDP flush; inverses in the right order', (t) => {
  const steps = planHostPorts({
    sandboxId: 'sb', mappings: [tcp(8080), { protocol: 'udp', containerPort: 53, hostPort: 5353 }], pod4: '10.1.0.2', pod6: 'fd00::2',
    localnet: { device: 'br0', original: '0' }, hairpinPort: 'kn123',
  });
  t.deepEqual(steps.map((s) => s.do.op), ['sysctl.set', 'link.set', 'conntrack.flush', 'conntrack.flush', 'conntrack.flush', 'conntrack.flush', 'nft.apply', 'conntrack.flush', 'conntrack.flush']);
  t.deepEqual(steps[0].undo, { op: 'localnet.restore', device: 'br0', value: '0', guardChain: 'localnet_br0' });
  t.is(steps.every((s) => s.netns === undefined), true, 'all in the host netns');
  t.deepEqual(planHostPorts({ sandboxId: 'sb', mappings: [tcp(0)], pod4: '10.1.0.2', localnet: { device: 'br0' } }), [], 'no host port, no step');
  // The sandbox's own host veth (routed) goes with it: no restore.
  t.is(planHostPorts({ sandboxId: 'sb', mappings: [tcp(1)], pod4: '10.1.0.2', localnet: { device: 'kn1' } })[0].undo, undefined);
});

test('the ruleset DNATs each family to the pod, a given host_ip only, and masquerades only localhost and hairpin', (t) => {
  const rs = hostPortRuleset({
    sandboxId: 'sb', mappings: [tcp(8080), { protocol: 'sctp', containerPort: 0, hostPort: 9000, hostIp: '10.9.9.9' }], pod4: '10.1.0.2', pod6: 'fd00::2',
    localnet: { device: 'br0' },
  });
  t.regex(rs, /meta l4proto tcp th dport 8080 counter dnat ip to 10\.1\.0\.2:80\n/);
  t.regex(rs, /meta l4proto tcp th dport 8080 counter dnat ip6 to \[fd00::2\]:80\n/);
  t.regex(rs, /ip daddr 10\.9\.9\.9 meta l4proto sctp th dport 9000 counter dnat ip to 10\.1\.0\.2:9000\n/);
  t.notRegex(rs, /sctp.*dnat ip6/, 'an IPv4 host_ip publishes IPv4 only');
  t.deepEqual(rs.match(/masquerade/g)?.length, 3);
  t.regex(rs, /iifname "br0" ip daddr 127\.0\.0\.0\/8 counter drop/);
});

test('a host_ip of a family the pod has no address in is INVALID_ARGUMENT naming it, not a mapping that publishes nothing', (t) => {
  const err = t.throws(() => planHostPorts({ sandboxId: 'sb', mappings: [tcp(1), tcp(8080, 'fd00::1')], pod4: '10.1.0.2', localnet: { device: 'br0' } }), { instanceOf: KnitError });
  t.is(err!.code, 'INVALID_ARGUMENT');
  t.is(err!.details.field, 'port_mappings[1].host_ip');
});
