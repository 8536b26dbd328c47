// api layer with in-memory service: the real gRPC server on a temp unix socket, called with a
// real grpc-js client. The service behind it is in memory (test/unit/api-memory-service.ts):
// this tests decoding, validation, mapping, error statuses and the socket, not the kernel.
import test, { type ExecutionContext } from 'ava';
import * as grpc from '@grpc/grpc-js';
import { execFileSync } from 'node:child_process';
import { existsSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import { KnitError } from '../../src/base/errors.js';
import { startApiServer, type ApiServerOptions } from '../../src/api/server.js';
import { knitProto } from '../../src/api/proto.js';
import { fromServiceError } from '../../src/api/status.js';
import { MemorySandboxService } from './api-memory-service.js';
import { recordingLogger, tempSocketDir, unaryCall } from './api-grpc-call.js';

async function serve(t: ExecutionContext, extra: Partial<ApiServerOptions> = {}) {
  const dir = tempSocketDir(t, 'kapi-');
  const socketPath = path.join(dir, 'knit.sock');
  const service = new MemorySandboxService();
  const log = recordingLogger();
  const server = await startApiServer({ socketPath, service, logger: log.logger, ...extra });
  t.teardown(() => server.close(100));
  const client = new (knitProto().Knit)(`unix:${socketPath}`, grpc.credentials.createInsecure());
  t.teardown(() => client.close());
  return { socketPath, service, client, log, server };
}

const attachReq = (id: string, extra: object = {}) => ({ sandbox_id: id, netns_path: `/run/netns/kapi-${id}`, ...extra });

async function expectError(t: ExecutionContext, p: Promise<unknown>): Promise<grpc.ServiceError> {
  const err = await t.throwsAsync(p);
  return err as unknown as grpc.ServiceError;
}

test('Attach returns a CNI-1.1-shaped result with the KNI ipconfigs view', async (t) => {
  const { client, service } = await serve(t);
  const res = await unaryCall(client, 'Attach', attachReq('a1', { pod_name: 'web', pod_namespace: 'prod', runtime: 'KATA' }));
  const r = res.result;
  t.is(r.cni_version, '1.1.0');
  t.is(r.sandbox_id, 'a1');
  t.is(r.runtime, 'KATA');
  t.is(r.netns_path, '/run/netns/kapi-a1');
  const eth0 = r.interfaces.findIndex((i: { name: string }) => i.name === 'eth0');
  t.is(r.interfaces[eth0].sandbox, '/run/netns/kapi-a1');
  t.is(r.interfaces[eth0].host_name, 'knit2h');
  t.deepEqual(r.interfaces[eth0].handoff, {
    fields: { tap: { kind: 'stringValue', stringValue: 'tap0_kata' }, queues: { kind: 'numberValue', numberValue: 1 } },
  });
  t.deepEqual(
    r.ips.map((ip: { address: string; interface: number; family: number }) => [ip.address, ip.interface, ip.family]),
    [
      ['10.88.0.2/24', eth0, 4],
      ['fd00:88::2/64', eth0, 6],
    ],
  );
  t.deepEqual(r.routes[0], { dst: '0.0.0.0/0', gw: '10.88.0.1', mtu: 0, priority: 0, table: 0, scope: 0 });
  // Only the sandbox-side interface appears in the KNI view, keyed by its name.
  t.deepEqual(r.ipconfigs, { eth0: { ip: ['10.88.0.2/24', 'fd00:88::2/64'], mac: '02:00:00:00:00:02' } });
  // What core received: the validated domain request.
  t.deepEqual(service.records.get('a1')!.request, {
    sandboxId: 'a1',
    podName: 'web',
    podNamespace: 'prod',
    netnsPath: '/run/netns/kapi-a1',
    runtime: 'kata',
    interfaces: [{ name: 'eth0' }],
    portMappings: [],
    labels: {},
    annotations: {},
  });
});

test('a bad field is INVALID_ARGUMENT naming it, in the message and in knit-field / knit-cni-code', async (t) => {
  const { client, service } = await serve(t);
  const err = await expectError(t, unaryCall(client, 'Attach', attachReq('a2', { interfaces: [{ name: 'eth0', mac: 'zz' }] })));
  t.is(err.code, grpc.status.INVALID_ARGUMENT);
  t.is(err.details, 'interfaces[0].mac: "zz" is not a MAC address');
  t.deepEqual(err.metadata.get('knit-field'), ['interfaces[0].mac']);
  t.deepEqual(err.metadata.get('knit-cni-code'), ['7']);
  t.is(service.records.size, 0, 'core was not called');
  // The client-side helper rebuilds the KnitError.
  const rebuilt = fromServiceError(err);
  t.is(rebuilt.code, 'INVALID_ARGUMENT');
  t.is(rebuilt.details.field, 'interfaces[0].mac');
  t.is(rebuilt.details.cniCode, 7);
});

test('core errors map to their gRPC codes with the CNI code', async (t) => {
  const { client, service, log } = await serve(t);
  const notFound = await expectError(t, unaryCall(client, 'Query', { sandbox_id: 'nope' }));
  t.is(notFound.code, grpc.status.NOT_FOUND);
  t.is(notFound.details, 'sandbox nope is not attached');
  t.deepEqual(notFound.metadata.get('knit-cni-code'), ['3']);

  for (const id of ['x1', 'x2', 'x3']) await unaryCall(client, 'Attach', attachReq(id));
  const full = await expectError(t, unaryCall(client, 'Attach', attachReq('x4')));
  t.is(full.code, grpc.status.RESOURCE_EXHAUSTED);
  t.deepEqual(full.metadata.get('knit-cni-code'), ['11']);

  const conflict = await expectError(t, unaryCall(client, 'Attach', { sandbox_id: 'x1', netns_path: '/run/netns/other' }));
  t.is(conflict.code, grpc.status.FAILED_PRECONDITION);
  t.deepEqual(conflict.metadata.get('knit-field'), ['netns_path']);

  const codes: [KnitError['code'], grpc.status][] = [
    ['ALREADY_EXISTS', grpc.status.ALREADY_EXISTS],
    ['UNAVAILABLE', grpc.status.UNAVAILABLE],
    ['PERMISSION_DENIED', grpc.status.PERMISSION_DENIED],
    ['INTERNAL', grpc.status.INTERNAL],
  ];
  for (const [code, status] of codes) {
    service.failNext.list = new KnitError(code, `list failed: ${code}`);
    const err = await expectError(t, unaryCall(client, 'List', {}));
    t.is(err.code, status, code);
    t.is(err.details, `list failed: ${code}`);
  }

  // Something that is not a KnitError: INTERNAL with the message, and logged as an error.
  service.failNext.nodeStatus = new TypeError('cannot read properties of undefined');
  const bug = await expectError(t, unaryCall(client, 'NodeStatus', {}));
  t.is(bug.code, grpc.status.INTERNAL);
  t.is(bug.details, 'internal error: cannot read properties of undefined');
  t.true(log.lines.some((l) => l.level === 'error' && l.msg.includes('NodeStatus failed unexpectedly')));
});

test('Detach, Check, Query and List', async (t) => {
  const { client, service } = await serve(t);
  await unaryCall(client, 'Attach', attachReq('q1', { pod_name: 'p', pod_namespace: 'n' }));
  t.deepEqual(await unaryCall(client, 'Check', { sandbox_id: 'q1' }), { ok: true, differences: [] });

  const q = await unaryCall(client, 'Query', { sandbox_id: 'q1' });
  t.is(q.sandbox.state, 'ATTACHED');
  t.is(q.sandbox.request.pod_name, 'p');
  t.is(q.sandbox.request.runtime, 'RUNC');
  t.deepEqual(q.sandbox.request.interfaces.map((i: { name: string }) => i.name), ['eth0']);
  t.is(q.sandbox.result.sandbox_id, 'q1');
  t.deepEqual(q.live, { ok: true, differences: [] });
  t.deepEqual(q.pod_ips, ['10.88.0.2', 'fd00:88::2']);
  t.regex(q.sandbox.created_at, /^\d{4}-\d\d-\d\dT/);

  const list = await unaryCall(client, 'List', {});
  t.deepEqual(list.sandboxes.map((s: { request: { sandbox_id: string } }) => s.request.sandbox_id), ['q1']);

  t.deepEqual(await unaryCall(client, 'Detach', { sandbox_id: 'q1' }), {});
  t.deepEqual(service.detachCalls, [{ sandboxId: 'q1' }]);
  await unaryCall(client, 'Detach', { sandbox_id: 'q1', netns_path: '/run/netns/kapi-q1' });
  t.deepEqual(service.detachCalls[1], { sandboxId: 'q1', netnsPath: '/run/netns/kapi-q1' });
  t.deepEqual((await unaryCall(client, 'List', {})).sandboxes, []);
});

test('NodeStatus keeps 64-bit pool sizes exact (clamped at uint64 max)', async (t) => {
  const { client } = await serve(t);
  await unaryCall(client, 'Attach', attachReq('n1'));
  const s = await unaryCall(client, 'NodeStatus', {});
  t.true(s.ready);
  t.true(s.schedulable);
  t.is(s.sandboxes, 1);
  t.is(s.networks[0].name, 'default');
  t.is(s.networks[0].mode, 'bridge');
  t.deepEqual(s.networks[0].pools[0], { family: 4, subnet: '10.88.0.0/24', size: '254', used: '1', free: '253' });
  t.is(s.networks[0].pools[1].size, '18446744073709551615');
});

test('GarbageCollect: explicit valid attachments, or keep every recorded sandbox', async (t) => {
  const { client, service } = await serve(t);
  await unaryCall(client, 'Attach', attachReq('g1'));
  await unaryCall(client, 'Attach', attachReq('g2'));
  const kept = await unaryCall(client, 'GarbageCollect', { keep_recorded: true });
  t.deepEqual(kept, { removed: [], errors: [] });
  t.deepEqual(service.gcCalls[0], [{ sandboxId: 'g1' }, { sandboxId: 'g2' }]);
  const r = await unaryCall(client, 'GarbageCollect', { valid_attachments: [{ sandbox_id: 'g2', interface_name: 'eth0' }] });
  t.deepEqual(r, { removed: ['g1'], errors: [] });
  t.deepEqual(service.gcCalls[1], [{ sandboxId: 'g2', interface: 'eth0' }]);
});

test('Plan validates under attach. and returns the steps with their ops', async (t) => {
  const { client } = await serve(t);
  const plan = await unaryCall(client, 'Plan', { attach: attachReq('p1') });
  t.is(plan.steps.length, 1);
  t.is(plan.steps[0].description, 'create veth eth0 in /run/netns/kapi-p1');
  t.is(plan.steps[0].op.fields.op.stringValue, 'link.add');
  t.is(plan.steps[0].op.fields.peer.structValue.fields.netns.stringValue, '/run/netns/kapi-p1');
  t.is(plan.steps[0].undo.fields.ignoreMissing.boolValue, true);
  const err = await expectError(t, unaryCall(client, 'Plan', { attach: attachReq('p1', { runtime: 7 }) }));
  t.is(err.code, grpc.status.INVALID_ARGUMENT);
  t.deepEqual(err.metadata.get('knit-field'), ['attach.runtime']);
  const missing = await expectError(t, unaryCall(client, 'Plan', {}));
  t.deepEqual(missing.metadata.get('knit-field'), ['attach']);
});

test('extensions: register, list, unregister', async (t) => {
  const { client } = await serve(t);
  const ext = { name: 'policy', endpoint: '/run/knit/ext/policy.sock', phase: 'POST_ATTACH', required: true, order: 2 };
  t.deepEqual(await unaryCall(client, 'RegisterExtension', { extension: ext }), {});
  t.deepEqual((await unaryCall(client, 'ListExtensions', {})).extensions, [ext]);
  await unaryCall(client, 'UnregisterExtension', { name: 'policy' });
  t.deepEqual((await unaryCall(client, 'ListExtensions', {})).extensions, []);
  const gone = await expectError(t, unaryCall(client, 'UnregisterExtension', { name: 'policy' }));
  t.is(gone.code, grpc.status.NOT_FOUND);
  const bad = await expectError(t, unaryCall(client, 'RegisterExtension', { extension: { ...ext, phase: 'EXTENSION_PHASE_UNSPECIFIED' } }));
  t.deepEqual(bad.metadata.get('knit-field'), ['extension.phase']);
});

test('Version', async (t) => {
  const { client } = await serve(t);
  const v = await unaryCall(client, 'Version', {});
  t.regex(v.version, /^\d+\.\d+\.\d+/);
  t.is(v.api_version, 'knit.v1');
  t.is(v.cni_version, '1.1.0');
  t.deepEqual(v.supported_cni_versions, ['1.0.0', '1.1.0']);
  t.is(v.kni_version, 'v0.0.8');
  t.deepEqual(v.runtimes, ['runc', 'kata', 'kubevirt']);
});

test('Watch streams sandbox events, filters by sandbox, and unsubscribes on cancel', async (t) => {
  const { client, service } = await serve(t);
  const events: any[] = [];
  const stream = (client as any).Watch({ sandbox_id: 'w1' }) as grpc.ClientReadableStream<any>;
  const got = new Promise<void>((resolve) =>
    stream.on('data', (e: any) => {
      events.push(e);
      if (events.length === 2) resolve();
    }),
  );
  stream.on('error', () => {}); // the cancel below ends it with CANCELLED
  // The subscription exists once the server has seen the call.
  while (service.listeners.size === 0) await new Promise((r) => setTimeout(r, 5));
  await unaryCall(client, 'Attach', attachReq('other'));
  await unaryCall(client, 'Attach', attachReq('w1'));
  await unaryCall(client, 'Detach', { sandbox_id: 'w1' });
  await got;
  t.is(events[0].event, 'sandbox');
  t.is(events[0].sandbox.type, 'attach');
  t.is(events[0].sandbox.sandbox_id, 'w1');
  t.is(events[0].sandbox.result.ipconfigs.eth0.ip[0], '10.88.0.3/24');
  t.is(events[1].sandbox.type, 'detach');
  t.is(events[1].sandbox.result, null);
  stream.cancel();
  while (service.listeners.size > 0) await new Promise((r) => setTimeout(r, 5));
  t.is(service.listeners.size, 0, 'listener removed after cancel');
});

test('the socket is mode 0600 and its directory is created', async (t) => {
  const { socketPath } = await serve(t);
  const st = statSync(socketPath);
  t.true(st.isSocket());
  t.is(st.mode & 0o777, 0o600);
});

test('a stale socket is replaced; a live one or a non-socket file is not', async (t) => {
  const dir = tempSocketDir(t, 'kapi-');
  const socketPath = path.join(dir, 'knit.sock');
  // A socket file nobody listens on, as a crashed daemon leaves it.
  execFileSync('python3', ['-c', 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])', socketPath]);
  t.true(statSync(socketPath).isSocket());
  const service = new MemorySandboxService();
  const first = await startApiServer({ socketPath, service });
  t.teardown(() => first.close(100));
  await t.throwsAsync(startApiServer({ socketPath, service }), { message: /another process is serving .*knit\.sock/ });
  await first.close(100);

  const filePath = path.join(dir, 'not-a-socket');
  writeFileSync(filePath, 'keep me');
  await t.throwsAsync(startApiServer({ socketPath: filePath, service }), { message: /exists and is not a socket/ });
});

async function refusedCall(t: ExecutionContext, socketPath: string) {
  const client = new (knitProto().Knit)(`unix:${socketPath}`, grpc.credentials.createInsecure());
  t.teardown(() => client.close());
  return expectError(t, unaryCall(client, 'Version', {}));
}

test('a peer uid not in allowedUids is refused (peer credentials from an injected reader)', async (t) => {
  const seen: number[] = [];
  const { socketPath, log } = await serve(t, {
    allowedUids: [12345],
    peerCred: (fd) => {
      seen.push(fd);
      return { uid: 4242, gid: 4242, pid: 777 };
    },
  });
  const err = await refusedCall(t, socketPath);
  t.is(err.code, grpc.status.UNAVAILABLE);
  t.true(seen.length > 0 && seen.every((fd) => Number.isInteger(fd) && fd > 2), 'the reader got the accepted socket fd');
  t.true(log.lines.some((l) => l.level === 'warn' && l.msg.includes('refused a connection from uid 4242 (pid 777)')));
});

test('a peer uid in allowedUids is served (peer credentials from an injected reader)', async (t) => {
  const { client } = await serve(t, { allowedUids: [4242], peerCred: () => ({ uid: 4242, gid: 0, pid: 1 }) });
  t.is((await unaryCall(client, 'Version', {})).api_version, 'knit.v1');
});

/** The addon's peerCred, loaded synchronously (ava wants tests declared synchronously). */
function nativePeerCred(): ((fd: number) => { uid: number; gid: number; pid: number }) | undefined {
  const candidates = [process.env.KNIT_NATIVE, 'build/native/Release/knit_native.node', 'build/Release/knit_native.node'];
  const found = candidates.find((p): p is string => Boolean(p) && existsSync(p!));
  if (!found) return undefined;
  try {
    const addon = createRequire(import.meta.url)(path.resolve(found));
    return typeof addon.peerCred === 'function' ? addon.peerCred : undefined;
  } catch {
    return undefined;
  }
}

// Decided when the file loads, so a missing addon function shows up as a skipped test.
const addonPeerCred = nativePeerCred();
const withAddon = addonPeerCred ? test : test.skip;
const addonNote = addonPeerCred ? '' : ' [skipped: the native addon has no peerCred(fd) yet, or is not built]';

withAddon(`SO_PEERCRED through the addon: this process (root) is refused when only uid 12345 is allowed${addonNote}`, async (t) => {
  const uid = process.getuid!();
  const { socketPath, log } = await serve(t, { allowedUids: [12345], peerCred: addonPeerCred! });
  const err = await refusedCall(t, socketPath);
  t.is(err.code, grpc.status.UNAVAILABLE);
  t.true(
    log.lines.some((l) => l.level === 'warn' && l.msg.includes(`refused a connection from uid ${uid} (pid ${process.pid})`)),
    JSON.stringify(log.lines.map((l) => l.msg)),
  );
});

withAddon(`SO_PEERCRED through the addon: this process is served when its uid is allowed${addonNote}`, async (t) => {
  const { client } = await serve(t, { allowedUids: [process.getuid!()], peerCred: addonPeerCred! });
  t.is((await unaryCall(client, 'Version', {})).kni_version, 'v0.0.8');
});

test('without a peer credential reader the server warns that uids are not checked', async (t) => {
  const { log, client } = await serve(t);
  await unaryCall(client, 'Version', {});
  t.true(log.lines.some((l) => l.level === 'warn' && l.msg.includes('not checked against allowed uids')));
});

test('net: the raw socket answers HTTP/2 only after the peer check (a refused peer is disconnected)', async (t) => {
  const { socketPath } = await serve(t, { allowedUids: [1], peerCred: () => ({ uid: 2, gid: 2, pid: 2 }) });
  const closed = await new Promise<boolean>((resolve) => {
    const s = net.connect(socketPath);
    s.on('error', () => resolve(true));
    s.on('close', () => resolve(true));
  });
  t.true(closed);
});
