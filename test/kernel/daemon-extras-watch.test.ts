// Watch streams against a real daemon: sandbox attach/detach events, and link events for the
// host ends of sandboxes when something changes them behind knit's back (checked with `ip`).
import test from 'ava';
import * as grpc from '@grpc/grpc-js';
import { execFileSync } from 'node:child_process';
import { knitProto } from '../../src/api/proto.js';
import {
  startDaemon, cleanupDaemon, removeNetns, ipJson, eventually, hostLinks, podFactory, runcAttachReq, type Daemon,
} from '../helpers/daemon.js';

const P = 'kwa';
const SUBNET = '10.234.6.0/24';
const opts = { prefix: P, subnet: SUBNET };
let d: Daemon | undefined;
let client: grpc.Client | undefined;
const { pod, netnsNames, ids } = podFactory(P);

const attachReq = (id: string, netns: string) => runcAttachReq(id, netns, { podNamespace: 'w' });

interface Watching {
  events: any[];
  cancel(): void;
}

/** Opens a Watch and resolves once the daemon has subscribed it (it answers with headers). */
async function watch(t: any, sandboxId = ''): Promise<Watching> {
  const events: any[] = [];
  const stream = (client as any).Watch({ sandbox_id: sandboxId }) as grpc.ClientReadableStream<any>;
  stream.on('data', (e: any) => events.push(e));
  stream.on('error', () => undefined); // CANCELLED at the end
  await new Promise<void>((resolve) => stream.once('metadata', () => resolve()));
  t.teardown(() => stream.cancel());
  return { events, cancel: () => stream.cancel() };
}

const sandboxEvents = (w: Watching, id: string) => w.events.filter((e) => e.sandbox?.sandbox_id === id).map((e) => e.sandbox);
const linkEvents = (w: Watching, name: string) => w.events.filter((e) => e.link?.name === name).map((e) => e.link);

test.before(async () => {
  d = await startDaemon(opts);
  client = new (knitProto().Knit)(`unix://${d.socket}`, grpc.credentials.createInsecure());
});

test.after.always(async () => {
  client?.close();
  await cleanupDaemon(d, opts, ids);
  for (const n of netnsNames) removeNetns(n);
});

test.serial('a Watch stream receives the attach (with its result) and the detach of a sandbox', async (t) => {
  const all = await watch(t);
  const p = pod(1);
  const { result } = await d!.call('Attach', attachReq(p.id, p.path));
  const attached = await eventually(() => sandboxEvents(all, p.id).find((e) => e.type === 'attach'), 'the attach event');
  t.deepEqual(attached.result.ips, result.ips);
  t.deepEqual(attached.result.interfaces.map((i: any) => i.name), result.interfaces.map((i: any) => i.name));
  // Independent observer: the address in the event is the one on the pod's eth0.
  const [eth0] = ipJson(['addr', 'show', 'dev', 'eth0'], p.ns);
  t.true(eth0.addr_info.some((a: any) => `${a.local}/${a.prefixlen}` === attached.result.ips[0].address));

  await d!.call('Detach', { sandbox_id: p.id });
  await eventually(() => sandboxEvents(all, p.id).find((e) => e.type === 'detach'), 'the detach event');
  t.deepEqual(sandboxEvents(all, p.id).map((e) => e.type), ['attach', 'detach'], 'each once, in order');
});

test.serial('a Watch for one sandbox sees only that sandbox', async (t) => {
  const a = pod(2);
  const b = pod(3);
  const onlyA = await watch(t, a.id);
  await d!.call('Attach', attachReq(a.id, a.path));
  await d!.call('Attach', attachReq(b.id, b.path));
  await d!.call('Detach', { sandbox_id: b.id });
  await d!.call('Detach', { sandbox_id: a.id });
  await eventually(() => sandboxEvents(onlyA, a.id).some((e) => e.type === 'detach'), 'detach of a');
  t.deepEqual(sandboxEvents(onlyA, a.id).map((e) => e.type), ['attach', 'detach']);
  t.deepEqual(onlyA.events.filter((e) => e.sandbox && e.sandbox.sandbox_id !== a.id), [], 'nothing about another sandbox');
  t.deepEqual(onlyA.events.filter((e) => e.link && e.link.sandbox_id !== a.id), [], 'no link event of another sandbox');
});

test.serial('link events: a host end set down and up behind knit is reported with its sandbox', async (t) => {
  const p = pod(4);
  const all = await watch(t);
  const { result } = await d!.call('Attach', attachReq(p.id, p.path));
  const hostEnd = result.interfaces.find((i: any) => !i.sandbox).name;
  await eventually(() => sandboxEvents(all, p.id).length > 0, 'the attach event');

  execFileSync('ip', ['link', 'set', hostEnd, 'down']);
  t.false(ipJson(['link', 'show', 'dev', hostEnd])[0].flags.includes('UP'), 'ip sees it down');
  const down = await eventually(() => linkEvents(all, hostEnd).find((e) => !e.up), 'a link-down event');
  t.is(down.sandbox_id, p.id);
  t.false(down.removed);
  t.is(down.index, ipJson(['link', 'show', 'dev', hostEnd])[0].ifindex);
  execFileSync('ip', ['link', 'set', hostEnd, 'up']);
  const up = await eventually(() => linkEvents(all, hostEnd).find((e) => e.up), 'a link-up event');
  t.is(up.sandbox_id, p.id);
  await d!.call('Detach', { sandbox_id: p.id });
  await eventually(() => !hostLinks().some((l) => l.ifname === hostEnd), 'host end reaped');
  // Once detached the device is no longer the sandbox's: its removal is knit's own doing.
  await eventually(() => sandboxEvents(all, p.id).some((e) => e.type === 'detach'), 'the detach event');
});

test.serial('a Watch with an invalid sandbox id is refused naming the field', async (t) => {
  const stream = (client as any).Watch({ sandbox_id: 'not/an/id' }) as grpc.ClientReadableStream<any>;
  const err: any = await new Promise((resolve) => stream.on('error', resolve));
  t.is(err.code, grpc.status.INVALID_ARGUMENT);
  t.regex(err.details, /sandbox_id/);
});
