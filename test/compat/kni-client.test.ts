// KNI POC wire compatibility, against the api layer with in-memory service (no kernel: the
// netns create/delete functions only record paths). Field numbers are pinned by comparing
// encodings with bytes written out by hand from the v0.0.8 field list, so a renumbered or
// retyped field in proto/kni/api.proto fails here.
import test, { type ExecutionContext } from 'ava';
import * as grpc from '@grpc/grpc-js';
import path from 'node:path';
import { startApiServer } from '../../src/api/server.js';
import { KnitError } from '../../src/base/errors.js';
import { MemorySandboxService, memoryNetns } from '../unit/api-memory-service.js';
import { recordingLogger, tempSocketDir } from '../unit/api-grpc-call.js';
import { kniCall, kniClient, kniDefinition, runKniLifecycle } from './kni-client.js';

const hex = (s: string) => Buffer.from(s.replace(/\s+/g, ''), 'hex');
const str = (s: string) => Buffer.from(s).toString('hex');
/** Length-delimited field: tag byte, one-byte length, payload (all payloads here are < 128). */
const ld = (tag: number, payloadHex: string) => {
  const p = payloadHex.replace(/\s+/g, '');
  return tag.toString(16).padStart(2, '0') + (p.length / 2).toString(16).padStart(2, '0') + p;
};

test('AttachInterfaceRequest encodes to the v0.0.8 field numbers, byte for byte', (t) => {
  const rpc = kniDefinition().service.AttachInterface!;
  t.is(rpc.path, '/kni.KNI/AttachInterface');
  const encoded = rpc.requestSerialize({
    name: 'web',
    id: 'sb1',
    namespace: 'ns',
    isolation: { path: '/p', type: 'netns' },
    dns_config: { servers: ['10.0.0.10'] },
    port_mappings: [{ protocol: 'UDP', container_port: 53, host_port: 5353 }],
    labels: { a: 'b' },
    annotations: { c: 'd' },
    extradata: { netns: '/p' },
  });
  const expected = hex(
    [
      ld(0x0a, str('web')), // 1 name
      ld(0x12, str('sb1')), // 2 id
      ld(0x1a, str('ns')), // 3 namespace
      ld(0x22, ld(0x0a, str('/p')) + ld(0x12, str('netns'))), // 4 isolation{1 path, 2 type}
      ld(0x2a, ld(0x0a, str('10.0.0.10'))), // 5 dns_config{1 servers}
      ld(0x32, '08 01' + '10 35' + '18 e9 29'), // 6 port_mappings{1 protocol=UDP, 2 container_port=53, 3 host_port=5353}
      ld(0x3a, ld(0x0a, str('a')) + ld(0x12, str('b'))), // 7 labels (map entry: 1 key, 2 value)
      ld(0x42, ld(0x0a, str('c')) + ld(0x12, str('d'))), // 8 annotations
      ld(0x4a, ld(0x0a, str('netns')) + ld(0x12, str('/p'))), // 9 extradata
    ].join(''),
  );
  t.is(encoded.toString('hex'), expected.toString('hex'));
  // And the server's decoder reads hand-made bytes the same way.
  const decoded = rpc.requestDeserialize(expected) as any;
  t.is(decoded.isolation.path, '/p');
  t.is(decoded.port_mappings[0].protocol, 'UDP');
  t.is(decoded.port_mappings[0].host_port, 5353);
  t.deepEqual(decoded.extradata, { netns: '/p' });
});

test('the other v0.0.8 messages keep their field numbers', (t) => {
  const svc = kniDefinition().service;
  t.is(
    svc.CreateNetwork!.requestSerialize({ name: 'web', uid: 'u1', namespace: 'ns', netns_path_prefix: '/run/netns' }).toString('hex'),
    ld(0x0a, str('web')) + ld(0x12, str('u1')) + ld(0x1a, str('ns')) + ld(0x22, str('/run/netns')),
  );
  t.is(
    svc.CreateNetwork!.requestSerialize({ labels: { l: 'v' }, annotations: { a: 'v' }, extradata: { e: 'v' } }).toString('hex'),
    ld(0x2a, ld(0x0a, str('l')) + ld(0x12, str('v'))) +
      ld(0x32, ld(0x0a, str('a')) + ld(0x12, str('v'))) +
      ld(0x3a, ld(0x0a, str('e')) + ld(0x12, str('v'))),
  );
  t.is(svc.CreateNetwork!.responseSerialize({ netns_path: '/n' }).toString('hex'), ld(0x0a, str('/n')));
  t.is(
    svc.DeleteNetwork!.requestSerialize({ id: 'i', name: 'n', namespace: 's', netns_path: '/p', extradata: { k: 'v' } }).toString('hex'),
    ld(0x0a, str('i')) + ld(0x12, str('n')) + ld(0x1a, str('s')) + ld(0x22, str('/p')) + ld(0x2a, ld(0x0a, str('k')) + ld(0x12, str('v'))),
  );
  t.is(
    svc.DetachInterface!.requestSerialize({ name: 'n', id: 'i', namespace: 's', isolation: { path: '/p' }, extradata: { k: 'v' } }).toString('hex'),
    ld(0x0a, str('n')) + ld(0x12, str('i')) + ld(0x1a, str('s')) + ld(0x22, ld(0x0a, str('/p'))) + ld(0x3a, ld(0x0a, str('k')) + ld(0x12, str('v'))),
  );
  t.is(
    svc.QueryPodNetwork!.requestSerialize({ name: 'n', id: 'i', namespace: 's' }).toString('hex'),
    ld(0x0a, str('n')) + ld(0x12, str('i')) + ld(0x1a, str('s')),
  );
  // Response: ipconfigs=1 map<string, IPConfig{1 ip[], 2 mac}>
  t.is(
    svc.QueryPodNetwork!.responseSerialize({ ipconfigs: { eth0: { ip: ['10.0.0.2/24'], mac: '02:00:00:00:00:01' } } }).toString('hex'),
    ld(0x0a, ld(0x0a, str('eth0')) + ld(0x12, ld(0x0a, str('10.0.0.2/24')) + ld(0x12, str('02:00:00:00:00:01')))),
  );
  t.is(
    svc.QueryNodeNetworks!.responseSerialize({ networks: [{ name: 'default', ready: true }] }).toString('hex'),
    ld(0x0a, ld(0x0a, str('default')) + '10 01'),
  );
  // The pre-v0.0.7 names are served with the same messages.
  t.is(svc.AttachNetwork!.path, '/kni.KNI/AttachNetwork');
  t.is(svc.DetachNetwork!.path, '/kni.KNI/DetachNetwork');
  t.is((svc.AttachNetwork as any).requestType.type.name, 'AttachInterfaceRequest');
});

async function serve(t: ExecutionContext, extra: Partial<Parameters<typeof startApiServer>[0]> = {}) {
  const dir = tempSocketDir(t, 'kkni-');
  const socketPath = path.join(dir, 'knit.sock');
  const service = new MemorySandboxService();
  const netns = memoryNetns();
  const log = recordingLogger();
  const server = await startApiServer({
    socketPath,
    service,
    logger: log.logger,
    createNetns: netns.createNetns,
    deleteNetns: netns.deleteNetns,
    defaultNetnsDir: path.join(dir, 'netns'),
    ...extra,
  });
  t.teardown(() => server.close(100));
  const client = kniClient(socketPath);
  t.teardown(() => client.close());
  return { dir, service, netns, client, log };
}

test('the KNI lifecycle: CreateNetwork -> AttachInterface -> QueryPodNetwork -> DetachInterface -> DeleteNetwork', async (t) => {
  const { dir, service, netns, client } = await serve(t);
  const prefix = path.join(dir, 'netns', 'pinned'); // under knit's netns dir: the only place it pins
  const pod = { name: 'web', namespace: 'prod', uid: 'uid-1', id: 'kkni-sb1', netnsPathPrefix: prefix };

  const run = runKniLifecycle(client, pod);
  const r = await run;

  t.is(r.created.netns_path, `${prefix}/knit-prod-web`);
  t.false(netns.created.has(r.created.netns_path), 'DeleteNetwork removed the netns it created');

  t.deepEqual(Object.keys(r.attached.ipconfigs), ['eth0']);
  t.deepEqual(r.attached.ipconfigs.eth0.ip, ['10.88.0.2', 'fd00:88::2'], 'bare addresses, as the POC answers');
  t.is(r.attached.ipconfigs.eth0.mac, '02:00:00:00:00:02');
  t.is(r.attached.extradata.netns, r.created.netns_path);
  t.deepEqual(r.queried.ipconfigs, r.attached.ipconfigs);
  t.is(r.queried.extradata.state, 'attached');
  t.deepEqual(r.detached, {});
  t.deepEqual(r.deleted, {});

  // What core was asked to do, in domain terms.
  t.deepEqual(service.detachCalls, [{ sandboxId: 'kkni-sb1', netnsPath: r.created.netns_path }]);
  t.is(service.records.size, 0);
});

test('KNI attach as the kubelet fork does it: AttachNetwork with the netns in extradata, query by id', async (t) => {
  const { service, client } = await serve(t);
  const res = await kniCall(client, 'AttachNetwork', {
    id: 'kkni-sb2',
    name: 'db',
    namespace: 'prod',
    extradata: { netns: '/run/netns/kkni-db', cgroupPath: '/kubepods/x' },
    labels: { 'io.kubernetes.pod.name': 'db' },
  });
  t.deepEqual(Object.keys(res.ipconfigs), ['eth0']);
  const rec = service.records.get('kkni-sb2')!;
  t.is(rec.request.netnsPath, '/run/netns/kkni-db');
  t.is(rec.request.podName, 'db');
  t.is(rec.request.podNamespace, 'prod');
  t.deepEqual(rec.request.labels, { 'io.kubernetes.pod.name': 'db' });

  // QueryPodNetwork by (name, namespace) alone finds the same sandbox.
  const byName = await kniCall(client, 'QueryPodNetwork', { name: 'db', namespace: 'prod' });
  t.deepEqual(byName.ipconfigs, res.ipconfigs);

  await kniCall(client, 'DetachNetwork', { id: 'kkni-sb2' });
  t.is(service.records.size, 0);
  // Detach again: idempotent, like CNI DEL.
  t.deepEqual(await kniCall(client, 'DetachNetwork', { id: 'kkni-sb2' }), {});
});

test('KNI errors: missing netns names isolation.path; an unknown pod answers empty, as the POC does', async (t) => {
  const { client } = await serve(t);
  const err = (await t.throwsAsync(kniCall(client, 'AttachInterface', { id: 'kkni-sb3', name: 'x', namespace: 'y' }))) as unknown as grpc.ServiceError;
  t.is(err.code, grpc.status.INVALID_ARGUMENT);
  t.regex(err.details, /^isolation\.path: is required \(or extradata\["netns"\]\)/);
  t.deepEqual(err.metadata.get('knit-field'), ['isolation.path']);
  t.deepEqual((await kniCall(client, 'QueryPodNetwork', { id: 'kkni-none' })).ipconfigs, {});
  const badName = (await t.throwsAsync(kniCall(client, 'CreateNetwork', { name: '../etc', namespace: 'x' }))) as unknown as grpc.ServiceError;
  t.is(badName.code, grpc.status.INVALID_ARGUMENT);
  t.deepEqual(badName.metadata.get('knit-field'), ['name']);
});

test('KNI node RPCs: SetupNodeNetwork is a no-op, QueryNodeNetworks lists knit networks', async (t) => {
  const { dir, netns, client } = await serve(t);
  t.deepEqual(await kniCall(client, 'SetupNodeNetwork', {}), {});
  const nets = await kniCall(client, 'QueryNodeNetworks', {});
  t.deepEqual(nets.networks, [{ name: 'default', ready: true, extradata: { mode: 'bridge', subnets: '10.88.0.0/24,fd00:88::/64' } }]);
  t.is(nets.extradata.ready, 'true');
  // CreateNetwork{} with no pod identity (the containerd embedded POC) still gets a netns,
  // under the default directory.
  const anon = await kniCall(client, 'CreateNetwork', {});
  t.regex(anon.netns_path, new RegExp(`^${dir}/netns/knit-[0-9a-f-]{36}$`));
  t.true(netns.created.has(anon.netns_path));
  // DeleteNetwork by id alone finds the netns recorded for that sandbox (as libkni does).
  const byId = await kniCall(client, 'CreateNetwork', { name: 'cache', namespace: 'prod' });
  await kniCall(client, 'AttachInterface', { id: 'kkni-sb4', name: 'cache', namespace: 'prod', isolation: { path: byId.netns_path } });
  await kniCall(client, 'DeleteNetwork', { id: 'kkni-sb4' });
  t.false(netns.created.has(byId.netns_path));
  // DeleteNetwork by (name, namespace) computes the same default path CreateNetwork used.
  const named = await kniCall(client, 'CreateNetwork', { name: 'api', namespace: 'prod' });
  await kniCall(client, 'DeleteNetwork', { name: 'api', namespace: 'prod' });
  t.false(netns.created.has(named.netns_path));
});

test('KNI DeleteNetwork judges the whole request before it detaches: a refusal leaves the sandbox attached', async (t) => {
  const { service, client } = await serve(t, { isPinned: () => false });
  await kniCall(client, 'AttachInterface', { id: 'kkni-sb5', name: 'q', namespace: 'prod', isolation: { path: '/run/netns/kkni-q' } });
  for (const [req, field] of [
    [{ id: 'kkni-sb5', netns_path: 'run/netns/kkni-q' }, 'netns_path'],
    [{ id: 'kkni-sb5', netns_path: '/proc/self/ns/net' }, 'netns_path'],
    [{ extradata: { netns: 'relative' } }, 'extradata["netns"]'],
    [{ id: 'kkni-sb5', name: 'q', namespace: 'a b', netns_path: '/run/netns/kkni-q/../x' }, 'netns_path'],
  ] as const) {
    const err = (await t.throwsAsync(kniCall(client, 'DeleteNetwork', req))) as unknown as grpc.ServiceError;
    t.is(err.code, grpc.status.INVALID_ARGUMENT, err.details);
    t.deepEqual(err.metadata.get('knit-field'), [field]);
  }
  t.deepEqual(service.detachCalls, [], 'nothing was detached');
  t.true(service.records.has('kkni-sb5'));
  // By id, for a netns the runtime made: OK, and the sandbox is detached.
  t.deepEqual(await kniCall(client, 'DeleteNetwork', { id: 'kkni-sb5' }), {});
  t.deepEqual(service.detachCalls.map((c) => c.sandboxId), ['kkni-sb5']);
});

test('KNI AttachInterface answers OK once attached even when noting the pinned netns fails (logged, not answered)', async (t) => {
  const { service, client, log } = await serve(t, {
    claimNetns: async () => {
      throw new Error('disk full');
    },
  });
  const res = await kniCall(client, 'AttachInterface', { id: 'kkni-sb6', name: 'r', namespace: 'prod', isolation: { path: '/run/netns/kkni-r' } });
  t.deepEqual(res.ipconfigs.eth0.ip, ['10.88.0.2', 'fd00:88::2']);
  t.true(service.records.has('kkni-sb6'));
  t.true(log.lines.some((l) => l.level === 'warn' && /disk full/.test(l.msg)));
});

test("KNI says core's refusals about the field the caller sent: netns_path as isolation.path or extradata[\"netns\"]; a pool's network, which KNI has no field for, as none", async (t) => {
  const { service, client } = await serve(t);
  await kniCall(client, 'AttachInterface', { id: 'kkni-sb7', name: 's', namespace: 'prod', isolation: { path: '/run/netns/kkni-s' } });
  const guard = () => KnitError.invalid('netns_path', '"/run/netns/other" is another network namespace, not sandbox kkni-sb7\'s; nothing was detached');
  for (const [req, field] of [
    [{ id: 'kkni-sb7', isolation: { path: '/run/netns/other' } }, 'isolation.path'],
    [{ id: 'kkni-sb7', extradata: { netns: '/run/netns/other' } }, 'extradata["netns"]'],
  ] as const) {
    service.failNext.detach = guard();
    const err = (await t.throwsAsync(kniCall(client, 'DetachInterface', req))) as unknown as grpc.ServiceError;
    t.deepEqual(err.metadata.get('knit-field'), [field]);
    t.true(err.details.startsWith(`${field}: "/run/netns/other" is another network namespace`), err.details);
  }
  service.failNext.attach = new KnitError('RESOURCE_EXHAUSTED', 'network "default": no free IPv4 address in 10.88.0.0/24 (3 of 3 in use)', { field: 'network' });
  const dry = (await t.throwsAsync(kniCall(client, 'AttachInterface', { id: 'kkni-sb8', isolation: { path: '/run/netns/kkni-t' } }))) as unknown as grpc.ServiceError;
  t.is(dry.code, grpc.status.RESOURCE_EXHAUSTED);
  t.deepEqual(dry.metadata.get('knit-field'), []);
  t.regex(dry.details, /no free IPv4 address/);
});
