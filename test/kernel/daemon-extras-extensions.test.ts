// Extensions against a real daemon: test extensions are grpc-js servers implementing
// knit.v1.Extension/Notify on unix sockets, registered over the API like a mesh agent would.
// What they receive is compared with the attach answer and with what `ip` sees in the pod.
import test from 'ava';
import * as grpc from '@grpc/grpc-js';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { knitProto } from '../../src/api/proto.js';
import {
  startDaemon, cleanupDaemon, removeNetns, ipJson, eventually, hostLinks, podFactory, runcAttachReq, type Daemon,
} from '../helpers/daemon.js';

const P = 'kex';
const SUBNET = '10.234.1.0/24';
// The node is not ready until an extension of this name is registered.
const GATE = `${P}-gate`;
const opts = { prefix: P, subnet: SUBNET, config: { requiredExtensions: [GATE] } };
let d: Daemon | undefined;
const extDir = mkdtempSync(path.join(os.tmpdir(), `knit-${P}-ext-`));
const { pod, netnsNames, ids } = podFactory(P);
const servers: TestExtension[] = [];

interface Notified {
  phase: string;
  sandbox: any;
  result: any;
  /** Links in the pod netns while the extension was being called (pre-detach: still there?). */
  podLinks: string[];
}

interface TestExtension {
  socket: string;
  events: Notified[];
  close(): Promise<void>;
}

/** A knit.v1.Extension server on a unix socket; answer decides the reply to each Notify. */
async function startExtension(name: string, answer: (e: Notified) => { ok: boolean; message?: string }): Promise<TestExtension> {
  const socket = path.join(extDir, `${name}.sock`);
  const events: Notified[] = [];
  const server = new grpc.Server();
  server.addService(knitProto().Extension.service, {
    Notify: (call: grpc.ServerUnaryCall<any, any>, reply: grpc.sendUnaryData<any>) => {
      const ns = path.basename(call.request.sandbox?.netns_path ?? '');
      let podLinks: string[] = [];
      try {
        podLinks = ipJson(['link', 'show'], ns).map((l: any) => l.ifname);
      } catch {
        /* netns gone */
      }
      const e: Notified = { phase: call.request.phase, sandbox: call.request.sandbox, result: call.request.result, podLinks };
      events.push(e);
      reply(null, { message: '', ...answer(e) });
    },
  });
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`unix://${socket}`, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())),
  );
  const ext = {
    socket,
    events,
    close: () => new Promise<void>((resolve) => server.tryShutdown(() => resolve())),
  };
  servers.push(ext);
  return ext;
}

const attachReq = (id: string, netns: string) => runcAttachReq(id, netns, { podName: `pod-${id}`, podNamespace: 'exts' });

const registration = (name: string, endpoint: string, phase: 'POST_ATTACH' | 'PRE_DETACH', required = false, order = 0) => ({
  extension: { name, endpoint, phase, required, order },
});

const listedNames = async () => ((await d!.call('ListExtensions', {})).extensions ?? []).map((e: any) => e.name).sort();
const taggedDevices = (id: string) => hostLinks().filter((l) => l.ifalias?.includes(`sandbox=${id};`)).map((l) => l.ifname);

test.before(async () => {
  d = await startDaemon(opts);
});

test.after.always(async () => {
  await cleanupDaemon(d, opts, ids);
  for (const s of servers) await s.close();
  for (const n of netnsNames) removeNetns(n);
  rmSync(extDir, { recursive: true, force: true });
});

test.serial('the node is not ready while a required extension is missing, and ready once it registers', async (t) => {
  const before = await d!.call('NodeStatus', {});
  t.false(before.ready);
  t.is(before.reason, 'NetworkPluginNotReady');
  t.regex(before.message, new RegExp(`required extension ${GATE} is not registered`));

  const gate = await startExtension(GATE, () => ({ ok: true }));
  await d!.call('RegisterExtension', registration(GATE, gate.socket, 'PRE_DETACH'));
  const after = await d!.call('NodeStatus', {});
  t.true(after.ready, after.message);
  t.is(after.message, '');
  t.deepEqual(await listedNames(), [GATE]);
});

test.serial('a post-attach extension gets the full result; a pre-detach one is called on detach while the pod still has its interface', async (t) => {
  const post = await startExtension(`${P}-post`, () => ({ ok: true }));
  await d!.call('RegisterExtension', registration(`${P}-post`, post.socket, 'POST_ATTACH'));
  const gate = servers[0]!;
  const p = pod(1);

  const { result } = await d!.call('Attach', attachReq(p.id, p.path));
  const got = post.events.filter((e) => e.sandbox?.sandbox_id === p.id);
  t.is(got.length, 1, 'called once for the attach');
  const e = got[0]!;
  t.is(e.phase, 'POST_ATTACH');
  t.like(e.sandbox, { sandbox_id: p.id, pod_name: `pod-${p.id}`, pod_namespace: 'exts', pod_uid: `uid-${p.id}`, netns_path: p.path, runtime: 'RUNC' });
  t.deepEqual(e.result.ips, result.ips, 'the same addresses the attach answered');
  t.deepEqual(e.result.interfaces.map((i: any) => [i.name, i.mac, i.sandbox]), result.interfaces.map((i: any) => [i.name, i.mac, i.sandbox]));
  t.is(e.result.sandbox_id, p.id);
  // Independent observer: what the extension was told is what the pod has.
  const [eth0] = ipJson(['addr', 'show', 'dev', 'eth0'], p.ns);
  const podIf = e.result.interfaces.find((i: any) => i.sandbox === p.path);
  t.is(eth0.address, podIf.mac);
  t.true(eth0.addr_info.some((a: any) => `${a.local}/${a.prefixlen}` === e.result.ips[0].address));
  t.true(e.podLinks.includes('eth0'), 'post-attach runs after the pod interface exists');
  t.false(gate.events.some((g) => g.sandbox?.sandbox_id === p.id), 'the pre-detach extension is not called on attach');
  await d!.call('Attach', attachReq(p.id, p.path)); // a retry of the same attach (idempotent)
  t.is(post.events.filter((x) => x.sandbox?.sandbox_id === p.id).length, 1, 'a repeated attach does not notify again');

  await d!.call('Detach', { sandbox_id: p.id });
  const pre = gate.events.filter((g) => g.sandbox?.sandbox_id === p.id);
  t.is(pre.length, 1, 'pre-detach called once');
  t.is(pre[0]!.phase, 'PRE_DETACH');
  t.deepEqual(pre[0]!.result.ips, result.ips);
  t.true(pre[0]!.podLinks.includes('eth0'), 'pre-detach runs before the pod interface is taken away');
  t.is(post.events.filter((x) => x.sandbox?.sandbox_id === p.id).length, 1, 'the post-attach extension is not called on detach');
  await eventually(() => taggedDevices(p.id).length === 0, 'host end reaped');
});

test.serial('registrations survive a daemon restart and go only with UnregisterExtension', async (t) => {
  await d!.stop();
  d = await d!.restart();
  t.deepEqual(await listedNames(), [`${P}-post`, GATE].sort(), 'both still registered after the restart');
  const listed = (await d!.call('ListExtensions', {})).extensions.find((e: any) => e.name === GATE);
  t.like(listed, { phase: 'PRE_DETACH', required: false, endpoint: servers[0]!.socket });
  t.true((await d!.call('NodeStatus', {})).ready, 'the required extension is still registered');

  const post = servers[1]!;
  await d!.call('UnregisterExtension', { name: `${P}-post` });
  t.deepEqual(await listedNames(), [GATE]);
  const p = pod(2);
  await d!.call('Attach', attachReq(p.id, p.path));
  t.false(post.events.some((e) => e.sandbox?.sandbox_id === p.id), 'an unregistered extension is not called');
  await d!.call('Detach', { sandbox_id: p.id });

  await d!.stop();
  d = await d!.restart();
  t.deepEqual(await listedNames(), [GATE], 'the unregistration survives a restart too');

  const err = await t.throwsAsync(d!.call('UnregisterExtension', { name: `${P}-post` }));
  t.is((err as any).code, grpc.status.NOT_FOUND);
  t.regex(err!.message, new RegExp(`${P}-post`));
});

/** Attach must fail naming the extension, and leave no device, no address and no record. */
async function assertRefusedAndRolledBack(t: any, name: string, p: ReturnType<typeof pod>, why: RegExp) {
  const poolsBefore = (await d!.call('NodeStatus', {})).networks[0].pools;
  const err = await t.throwsAsync(d!.call('Attach', attachReq(p.id, p.path)));
  t.is(err.code, grpc.status.FAILED_PRECONDITION);
  t.regex(err.message, new RegExp(`required extension ${name}\\b`));
  t.regex(err.message, why);
  await eventually(() => taggedDevices(p.id).length === 0, `no device of ${p.id} on the host`);
  t.deepEqual(ipJson(['link', 'show'], p.ns).map((l: any) => l.ifname), ['lo'], 'nothing left in the pod netns');
  t.deepEqual((await d!.call('NodeStatus', {})).networks[0].pools, poolsBefore, 'no address held');
  t.false((await d!.call('List', {})).sandboxes.some((s: any) => s.request.sandbox_id === p.id), 'no record');
  const q = await t.throwsAsync(d!.call('Query', { sandbox_id: p.id }));
  t.is(q.code, grpc.status.NOT_FOUND);
}

test.serial('a required extension answering not ok fails the attach with its name and message, and the attach is rolled back', async (t) => {
  const deny = await startExtension(`${P}-deny`, () => ({ ok: false, message: 'mesh sidecar refused the pod' }));
  await d!.call('RegisterExtension', registration(`${P}-deny`, deny.socket, 'POST_ATTACH', true));
  t.teardown(() => d!.call('UnregisterExtension', { name: `${P}-deny` }).catch(() => undefined));
  const p = pod(3);
  await assertRefusedAndRolledBack(t, `${P}-deny`, p, /mesh sidecar refused the pod/);
  t.is(deny.events.filter((e) => e.sandbox?.sandbox_id === p.id).length, 1, 'it was asked once');

  // With it gone the same sandbox attaches fine: the failed attempt left nothing in the way.
  await d!.call('UnregisterExtension', { name: `${P}-deny` });
  const { result } = await d!.call('Attach', attachReq(p.id, p.path));
  t.regex(result.ips[0].address, /^10\.234\.1\./);
  await d!.call('Detach', { sandbox_id: p.id });
});

test.serial('an unreachable required extension fails the attach naming it, and the attach is rolled back', async (t) => {
  const missing = path.join(extDir, 'nobody-listens.sock');
  await d!.call('RegisterExtension', registration(`${P}-gone`, missing, 'POST_ATTACH', true));
  t.teardown(() => d!.call('UnregisterExtension', { name: `${P}-gone` }).catch(() => undefined));
  await assertRefusedAndRolledBack(t, `${P}-gone`, pod(4), new RegExp(missing.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
});

test.serial('a required extension that never answers fails the attach at its deadline, naming it, and the attach is rolled back', async (t) => {
  // Accepts the call and never replies: a hung mesh agent.
  const socket = path.join(extDir, `${P}-hang.sock`);
  const server = new grpc.Server();
  server.addService(knitProto().Extension.service, { Notify: () => undefined });
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`unix://${socket}`, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())),
  );
  t.teardown(() => server.forceShutdown());
  await d!.call('RegisterExtension', registration(`${P}-hang`, socket, 'POST_ATTACH', true));
  t.teardown(() => d!.call('UnregisterExtension', { name: `${P}-hang` }).catch(() => undefined));
  await assertRefusedAndRolledBack(t, `${P}-hang`, pod(6), /deadline/i);
});

test.serial('a non-required extension that fails does not fail the attach', async (t) => {
  const flaky = await startExtension(`${P}-flaky`, () => ({ ok: false, message: 'not today' }));
  await d!.call('RegisterExtension', registration(`${P}-flaky`, flaky.socket, 'POST_ATTACH', false));
  t.teardown(() => d!.call('UnregisterExtension', { name: `${P}-flaky` }).catch(() => undefined));
  const p = pod(5);
  const { result } = await d!.call('Attach', attachReq(p.id, p.path));
  t.is(flaky.events.filter((e) => e.sandbox?.sandbox_id === p.id).length, 1);
  // The operator still learns about it: a warning naming the sandbox, the extension and why.
  const logged = await eventually(
    () => d!.logs.map((l) => { try { return JSON.parse(l); } catch { return {}; } }).find((l) => l.sandboxId === p.id && l.extension === `${P}-flaky`),
    'a log line about the failed extension call',
  );
  t.like(logged, { level: 40, phase: 'post-attach', required: false, err: 'not today' });
  t.regex(logged.msg, /extension/);
  const [eth0] = ipJson(['addr', 'show', 'dev', 'eth0'], p.ns);
  t.true(eth0.addr_info.some((a: any) => `${a.local}/${a.prefixlen}` === result.ips[0].address));
  await d!.call('Detach', { sandbox_id: p.id });
});

test.serial('registration is validated: a relative endpoint and a bad phase are refused naming the field', async (t) => {
  const rel = await t.throwsAsync(d!.call('RegisterExtension', registration(`${P}-rel`, 'relative.sock', 'POST_ATTACH')));
  t.is((rel as any).code, grpc.status.INVALID_ARGUMENT);
  t.regex(rel!.message, /extension\.endpoint/);
  const phase = await t.throwsAsync(d!.call('RegisterExtension', { extension: { name: `${P}-ph`, endpoint: '/x.sock', phase: 'EXTENSION_PHASE_UNSPECIFIED' } }));
  t.is((phase as any).code, grpc.status.INVALID_ARGUMENT);
  t.regex(phase!.message, /extension\.phase/);
  t.deepEqual(await listedNames(), [GATE]);
});

test.serial('unregistering the required extension makes the node not ready again', async (t) => {
  await d!.call('UnregisterExtension', { name: GATE });
  const s = await d!.call('NodeStatus', {});
  t.false(s.ready);
  t.regex(s.message, new RegExp(GATE));
});
