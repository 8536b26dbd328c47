// Bandwidth limits from InterfaceRequest.bandwidth and the kubernetes.io/*-bandwidth pod
// annotations: units, defaults, conflicts, and refusals naming the field.
import test from 'ava';
import { KnitError } from '../../src/base/errors.js';
import { validateAttach } from '../../src/api/validate.js';
import { defaultBurst, parseQuantity } from '../../src/api/bandwidth.js';
import { parseInterface } from '../../src/cli/flags.js';
import { grpcCodeOf } from '../../src/api/status.js';
import * as grpc from '@grpc/grpc-js';

const good = { sandbox_id: 'sb-1', netns_path: '/run/netns/pbw-pod' };
const bw = (b: object, extra: object = {}) => ({ ...good, interfaces: [{ name: 'eth0', bandwidth: b }], ...extra });

function refused(t: import('ava').ExecutionContext, req: object, field: string, says: RegExp) {
  const err = t.throws(() => validateAttach(req as never), { instanceOf: KnitError }) as KnitError;
  t.is(err.code, 'INVALID_ARGUMENT');
  t.is(err.details.field, field);
  t.regex(err.message, says);
  t.true(err.message.startsWith(`${field}: `));
}

test('rates and bursts arrive as uint64 strings and become numbers', (t) => {
  const r = validateAttach(bw({ ingress_rate: '10000000', ingress_burst: '800000', egress_rate: '2000000', egress_burst: '0' }) as never);
  t.deepEqual(r.interfaces[0]!.bandwidth, {
    ingress: { rate: 10_000_000, burst: 800_000 },
    egress: { rate: 2_000_000, burst: defaultBurst(2_000_000) },
  });
});

test('all-zero bandwidth means no limit', (t) => {
  const r = validateAttach(bw({ ingress_rate: '0', ingress_burst: '0', egress_rate: '0', egress_burst: '0' }) as never);
  t.is(r.interfaces[0]!.bandwidth, undefined);
});

test('default burst: a tenth of a second at the rate, at least 64 KiB', (t) => {
  t.is(defaultBurst(1_000_000_000), 100_000_000);
  t.is(defaultBurst(1_000_000), 8 * 64 * 1024);
});

test('a burst without a rate is refused naming the burst', (t) => {
  refused(t, bw({ egress_burst: '1000' }), 'interfaces[0].bandwidth.egress_burst', /egress_rate is not/);
});

test('a burst above 4 GiB is refused', (t) => {
  refused(t, bw({ ingress_rate: '1000', ingress_burst: String(8 * 2 ** 32) }), 'interfaces[0].bandwidth.ingress_burst', /4 GiB/);
});

test('a non-number rate is refused quoting a short prefix', (t) => {
  refused(t, bw({ ingress_rate: 'x'.repeat(100) }), 'interfaces[0].bandwidth.ingress_rate', /"x{24}"… \(100 characters\)/);
  refused(t, bw({ ingress_rate: '99999999999999999' }), 'interfaces[0].bandwidth.ingress_rate', /up to 2\^53/);
});

test('the second interface is named by its index', (t) => {
  const req = { ...good, interfaces: [{ name: 'eth0' }, { name: 'net1', bandwidth: { ingress_burst: '5' } }] };
  refused(t, req, 'interfaces[1].bandwidth.ingress_burst', /ingress_rate is not/);
});

test('annotations limit the default interface', (t) => {
  const r = validateAttach({
    ...good,
    interfaces: [{ name: 'eth0' }, { name: 'net1' }],
    annotations: { 'kubernetes.io/ingress-bandwidth': '10M', 'kubernetes.io/egress-bandwidth': '1Mi' },
  } as never);
  t.deepEqual(r.interfaces[0]!.bandwidth, {
    ingress: { rate: 10_000_000, burst: defaultBurst(10_000_000) },
    egress: { rate: 2 ** 20, burst: defaultBurst(2 ** 20) },
  });
  t.is(r.interfaces[1]!.bandwidth, undefined);
});

test('annotations without interfaces apply to the implied eth0', (t) => {
  const r = validateAttach({ ...good, annotations: { 'kubernetes.io/egress-bandwidth': '5M' } } as never);
  t.is(r.interfaces[0]!.name, 'eth0');
  t.deepEqual(r.interfaces[0]!.bandwidth?.egress?.rate, 5_000_000);
});

test('an annotation that agrees with the request field keeps the request burst', (t) => {
  const r = validateAttach(bw({ ingress_rate: '10000000', ingress_burst: '1000000' }, { annotations: { 'kubernetes.io/ingress-bandwidth': '10M' } }) as never);
  t.deepEqual(r.interfaces[0]!.bandwidth, { ingress: { rate: 10_000_000, burst: 1_000_000 } });
});

test('an annotation that conflicts with the request field is refused naming the annotation', (t) => {
  refused(
    t,
    bw({ ingress_rate: '10000000' }, { annotations: { 'kubernetes.io/ingress-bandwidth': '20M' } }),
    'annotations["kubernetes.io/ingress-bandwidth"]',
    /conflicts with interfaces\[0\]\.bandwidth\.ingress_rate/,
  );
});

test('bad annotation quantities are refused', (t) => {
  refused(t, { ...good, annotations: { 'kubernetes.io/egress-bandwidth': 'fast' } }, 'annotations["kubernetes.io/egress-bandwidth"]', /not a quantity/);
  refused(t, { ...good, annotations: { 'kubernetes.io/egress-bandwidth': '10' } }, 'annotations["kubernetes.io/egress-bandwidth"]', /outside 1k\.\.1P/);
  refused(t, { ...good, annotations: { 'kubernetes.io/egress-bandwidth': '2P' } }, 'annotations["kubernetes.io/egress-bandwidth"]', /outside 1k\.\.1P/);
});

test('quantities: decimal and binary suffixes', (t) => {
  t.is(parseQuantity('1.5M', 'f'), 1_500_000);
  t.is(parseQuantity('1Gi', 'f'), 2 ** 30);
  t.is(parseQuantity('100000', 'f'), 100_000);
});

test('KNI prefix is applied to bandwidth fields under plan', (t) => {
  const err = t.throws(() => validateAttach(bw({ egress_burst: '1' }) as never, { prefix: 'attach.' }), { instanceOf: KnitError }) as KnitError;
  t.is(err.details.field, 'attach.interfaces[0].bandwidth.egress_burst');
});

test('knit attach --if takes ingress/egress rate and burst', (t) => {
  const f = parseInterface('eth0,ingress-rate=1000000,egress-rate=2000000,egress-burst=80000');
  t.deepEqual(f.bandwidth, { ingress_rate: '1000000', egress_rate: '2000000', egress_burst: '80000' });
  t.throws(() => parseInterface('eth0,ingress-rate=10M'), { message: /ingress-rate=10M is not a number of bits/ });
});

test('UNIMPLEMENTED maps onto the gRPC code', (t) => {
  t.is(grpcCodeOf('UNIMPLEMENTED'), grpc.status.UNIMPLEMENTED);
});

test('over gRPC: uint64 bandwidth fields reach core; a bad one is INVALID_ARGUMENT naming it', async (t) => {
  const { startApiServer } = await import('../../src/api/server.js');
  const { knitProto } = await import('../../src/api/proto.js');
  const { MemorySandboxService } = await import('./api-memory-service.js');
  const { recordingLogger, tempSocketDir, unaryCall } = await import('./api-grpc-call.js');
  const path = await import('node:path');
  const socketPath = path.join(tempSocketDir(t, 'pbw-api-'), 'knit.sock');
  const service = new MemorySandboxService();
  const server = await startApiServer({ socketPath, service, logger: recordingLogger().logger });
  t.teardown(() => server.close(100));
  const client = new (knitProto().Knit)(`unix:${socketPath}`, grpc.credentials.createInsecure());
  t.teardown(() => client.close());

  const big = '5000000000000'; // above 2^32: proves the 64-bit path
  await unaryCall(client, 'Attach', bw({ ingress_rate: big, egress_rate: 3_000_000, egress_burst: 240_000 }));
  t.deepEqual(service.records.get('sb-1')!.request.interfaces[0]!.bandwidth, {
    ingress: { rate: 5e12, burst: defaultBurst(5e12) },
    egress: { rate: 3_000_000, burst: 240_000 },
  });
  const err = (await t.throwsAsync(unaryCall(client, 'Attach', { ...bw({ egress_burst: 9 }), sandbox_id: 'sb-2' }))) as unknown as grpc.ServiceError;
  t.is(err.code, grpc.status.INVALID_ARGUMENT);
  t.is(err.metadata.get('knit-field')[0], 'interfaces[0].bandwidth.egress_burst');
});

test('AddInterface validates bandwidth under interface.', async (t) => {
  const { validateAddInterface } = await import('../../src/api/validate.js');
  const ok = validateAddInterface({ sandbox_id: 'sb-1', interface: { name: 'net1', bandwidth: { egress_rate: '1000000' } } });
  t.deepEqual(ok.iface.bandwidth, { egress: { rate: 1_000_000, burst: defaultBurst(1_000_000) } });
  const err = t.throws(() => validateAddInterface({ sandbox_id: 'sb-1', interface: { name: 'net1', bandwidth: { ingress_burst: '8' } } }), {
    instanceOf: KnitError,
  }) as KnitError;
  t.is(err.details.field, 'interface.bandwidth.ingress_burst');
});
