// The KNI proof of concept's client, built from the KNI field list, against a real knit
// daemon: CreateNetwork pins a real netns, AttachInterface gives it a real interface, and
// DeleteNetwork removes the netns knit pinned — checked with ip, not only through KNI.
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { kniClient, runKniLifecycle, kniCall } from './kni-client.js';
import * as grpc from '@grpc/grpc-js';
import { mkdirSync, writeFileSync } from 'node:fs';
import { startDaemon, cleanupDaemon, hostLinks, eventually, runcAttachReq, type Daemon } from '../helpers/daemon.js';
import { knitState } from '../helpers/knit-state.js';

const P = 'ckn';
const opts = { prefix: P, subnet: '10.231.8.0/24' };
let d: Daemon | undefined;

test.before(async () => {
  d = await startDaemon(opts);
});

test.after.always(async () => {
  await cleanupDaemon(d, opts, [`${P}-sb1`, `${P}-sb2`, `${P}-sb4`, `${P}-sb5`, `${P}-sb6`, `${P}-sb7`]);
});

const attachedIds = async () => ((await d!.call('List', {})).sandboxes ?? []).map((s: any) => s.sandbox_id ?? s.request?.sandbox_id);
const freeV4 = async () => Number((await d!.call('NodeStatus', {})).networks[0].pools.find((p: any) => p.family === 4).free);

test.serial("the POC's order: DetachInterface{id}, then DeleteNetwork{id}, leaves nothing pinned", async (t) => {
  const client = kniClient(d!.socket);
  const pod = { name: `${P}-ord`, namespace: 'default', uid: `${P}-uid4`, id: `${P}-sb4` };
  const created = await kniCall(client, 'CreateNetwork', { name: pod.name, uid: pod.uid, namespace: pod.namespace, netns_path_prefix: path.join(d!.dir, 'netns') });
  await kniCall(client, 'AttachInterface', { name: pod.name, id: pod.id, namespace: pod.namespace, isolation: { path: created.netns_path } });
  await kniCall(client, 'DetachInterface', { id: pod.id });
  await kniCall(client, 'DeleteNetwork', { id: pod.id });
  t.false(existsSync(created.netns_path), 'the netns knit pinned is gone');
  t.false(readFileSync('/proc/self/mountinfo', 'utf8').includes(created.netns_path), 'no mount left');
  client.close();
});

test.serial('a runtime that owns the netns: DeleteNetwork without DetachInterface detaches the sandbox and frees its address', async (t) => {
  const client = kniClient(d!.socket);
  const pod = { name: `${P}-own`, namespace: 'default', id: `${P}-sb5` };
  const own = `${P}-own`;
  execFileSync('ip', ['netns', 'add', own]);
  t.teardown(() => execFileSync('ip', ['netns', 'del', own], { stdio: 'ignore' }));
  const free = await freeV4();
  await kniCall(client, 'AttachInterface', { name: pod.name, id: pod.id, namespace: pod.namespace, isolation: { path: `/run/netns/${own}` } });
  t.is(await freeV4(), free - 1);
  await kniCall(client, 'DeleteNetwork', { id: pod.id, name: pod.name, namespace: pod.namespace, netns_path: `/run/netns/${own}` });
  t.false((await attachedIds()).includes(pod.id), 'no record left');
  t.is(await freeV4(), free, 'the address is back in the pool');
  t.true(existsSync(`/run/netns/${own}`), "the runtime's netns is the runtime's to delete");
  await eventually(() => !hostLinks().some((l) => l.ifalias?.includes(`sandbox=${pod.id};`)), 'host end reaped');
  client.close();
});

test.serial("DeleteNetwork{id} for a sandbox in a netns the runtime made answers OK (detached, netns left); every refusal comes before anything is detached", async (t) => {
  const client = kniClient(d!.socket);
  t.teardown(() => client.close());
  const own = `${P}-own6`;
  const foreign = `${P}-frgn6`;
  for (const ns of [own, foreign, `${P}-own7`]) {
    execFileSync('ip', ['netns', 'add', ns]);
    t.teardown(() => execFileSync('ip', ['netns', 'del', ns], { stdio: 'ignore' }));
  }
  const pod = { name: `${P}-rt`, namespace: 'default', id: `${P}-sb6` };
  const freeBefore = await freeV4();
  await kniCall(client, 'AttachInterface', { ...pod, isolation: { path: `/run/netns/${own}` } });
  // Something in knit's netns dir under the name CreateNetwork would give (pod, namespace),
  // that knit did not pin.
  const squatter = path.join(d!.dir, 'netns', `knit-${pod.namespace}-${pod.name}`);
  mkdirSync(path.dirname(squatter), { recursive: true });
  writeFileSync(squatter, '');
  t.teardown(() => execFileSync('rm', ['-f', squatter]));
  const before = await knitState(d!, [undefined, own]);
  t.true(before.records.includes(`${pod.id} ATTACHED`));

  const refusals: [string, object, grpc.status, string][] = [
    ['a relative netns_path', { id: pod.id, netns_path: 'run/netns/x' }, grpc.status.INVALID_ARGUMENT, 'netns_path'],
    ["the host's netns_path", { id: pod.id, netns_path: '/proc/1/ns/net' }, grpc.status.INVALID_ARGUMENT, 'netns_path'],
    ['a netns knit did not pin, where no sandbox named lives', { id: pod.id, netns_path: `/run/netns/${foreign}` }, grpc.status.FAILED_PRECONDITION, 'netns_path'],
    ["by name, whose netns file in knit's dir knit did not pin", { name: pod.name, namespace: pod.namespace }, grpc.status.FAILED_PRECONDITION, 'name'],
    ['a bad id', { id: 'a/b', netns_path: `/run/netns/${own}` }, grpc.status.INVALID_ARGUMENT, 'id'],
  ];
  for (const [what, req, code, field] of refusals) {
    const err = (await t.throwsAsync(kniCall(client, 'DeleteNetwork', req), undefined, what)) as unknown as grpc.ServiceError;
    t.is(err?.code, code, `${what}: ${err?.details}`);
    t.deepEqual(err?.metadata.get('knit-field'), [field], what);
    t.true(err?.details.startsWith(`${field}: `), `${what}: ${err?.details}`);
    t.deepEqual(await knitState(d!, [undefined, own]), before, `${what}: links, addresses, routes, records and pools as they were`);
  }

  // The case: by id alone. OK, the sandbox goes, the runtime's netns stays.
  t.deepEqual(await kniCall(client, 'DeleteNetwork', { id: pod.id }), {});
  const after = await knitState(d!, [undefined, own]);
  t.false(after.records.some((r: string) => r.startsWith(`${pod.id} `)), 'no record left');
  t.is(await freeV4(), freeBefore, 'its address is back in the pool');
  t.true(existsSync(`/run/netns/${own}`), "the runtime's netns is the runtime's to delete");
  await eventually(() => !hostLinks().some((l) => l.ifalias?.includes(`sandbox=${pod.id};`)), 'host end reaped');
  t.deepEqual((await knitState(d!, [own])).kernel[0].links.map((l: { ifname: string }) => l.ifname), ['lo'], 'no eth0 left in the pod netns');
  t.deepEqual(await kniCall(client, 'DeleteNetwork', { id: pod.id }), {}, 'twice is fine');

  // knit.v1 has no DeleteNetwork: its Detach{sandbox_id} of a sandbox in a runtime's netns leaves the same.
  const v1 = `${P}-sb7`;
  const free = await freeV4();
  await d!.call('Attach', runcAttachReq(v1, `/run/netns/${P}-own7`));
  await d!.call('Detach', { sandbox_id: v1 });
  t.is(await freeV4(), free);
  t.true(existsSync(`/run/netns/${P}-own7`));
  t.false((await attachedIds()).includes(v1));
});

test.serial('QueryPodNetwork for a pod knit does not hold answers empty, as the POC does', async (t) => {
  const client = kniClient(d!.socket);
  const r = await kniCall(client, 'QueryPodNetwork', { id: `${P}-nobody` });
  t.deepEqual(r.ipconfigs, {});
  client.close();
});

test.serial('KNI Create → Attach → Query → Detach → Delete against the real daemon', async (t) => {
  const client = kniClient(d!.socket);
  const prefix = path.join(d!.dir, 'netns');
  const pod = { name: `${P}-web`, namespace: 'default', uid: `${P}-uid`, id: `${P}-sb1`, netnsPathPrefix: prefix };
  const r = await runKniLifecycle(client, pod);
  t.true(r.created.netns_path.startsWith(prefix), r.created.netns_path);
  const eth0 = r.attached.ipconfigs.eth0;
  t.truthy(eth0, JSON.stringify(r.attached.ipconfigs));
  // Bare addresses, as the POC answers: its kubelet parses each entry as an IP.
  t.regex(eth0.ip[0], /^10\.231\.8\.\d+$/);
  t.regex(eth0.mac, /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/);
  t.deepEqual(r.queried.ipconfigs.eth0.ip, eth0.ip);
  t.false(existsSync(r.created.netns_path), 'DeleteNetwork removed the netns knit pinned');
  await eventually(() => !hostLinks().some((l) => l.ifalias?.includes(`sandbox=${pod.id};`)), 'host end reaped');
  client.close();
});

test.serial('KNI AttachInterface gives the pod a working interface (checked with ip while attached)', async (t) => {
  const client = kniClient(d!.socket);
  const pod = { name: `${P}-db`, namespace: 'default', uid: `${P}-uid2`, id: `${P}-sb2` };
  const created = await kniCall(client, 'CreateNetwork', { name: pod.name, uid: pod.uid, namespace: pod.namespace, netns_path_prefix: path.join(d!.dir, 'netns') });
  try {
    const attached = await kniCall(client, 'AttachInterface', { name: pod.name, id: pod.id, namespace: pod.namespace, isolation: { path: created.netns_path, type: 'Network Namespace' } });
    const [ip] = attached.ipconfigs.eth0.ip;
    const { execFileSync } = await import('node:child_process');
    const out = execFileSync('nsenter', [`--net=${created.netns_path}`, 'ip', '-j', 'addr', 'show', 'eth0'], { encoding: 'utf8' });
    const eth0 = JSON.parse(out)[0];
    t.true(eth0.addr_info.some((a: any) => ip.startsWith(a.local)), out);
    t.is(eth0.address, attached.ipconfigs.eth0.mac);
    await kniCall(client, 'DetachInterface', { name: pod.name, id: pod.id, namespace: pod.namespace, isolation: { path: created.netns_path } });
  } finally {
    await kniCall(client, 'DeleteNetwork', { id: pod.id, name: pod.name, namespace: pod.namespace, netns_path: created.netns_path });
    client.close();
  }
  t.false(existsSync(created.netns_path));
  await eventually(() => !hostLinks().some((l) => l.ifalias?.includes(`sandbox=${pod.id};`)), "host end reaped");
});

test.serial('DeleteNetwork deletes what CreateNetwork pinned even after a restart, and refuses a netns knit did not pin', async (t) => {
  let client = kniClient(d!.socket);
  const pod = { name: `${P}-rs`, namespace: 'default', uid: `${P}-uid3` };
  const created = await kniCall(client, 'CreateNetwork', { ...pod, netns_path_prefix: path.join(d!.dir, 'netns') });
  client.close();
  await d!.stop();
  d = await d!.restart();
  client = kniClient(d.socket);
  const foreign = `${P}-foreign`;
  const { execFileSync } = await import('node:child_process');
  execFileSync('ip', ['netns', 'add', foreign]);
  try {
    const err = await t.throwsAsync(kniCall(client, 'DeleteNetwork', { id: `${P}-x`, netns_path: `/run/netns/${foreign}` }));
    t.regex(err!.message, /did not create/);
    t.true(existsSync(`/run/netns/${foreign}`), "someone else's netns is left alone");
    await kniCall(client, 'DeleteNetwork', { id: `${P}-sb3`, netns_path: created.netns_path });
    t.false(existsSync(created.netns_path), 'the netns pinned before the restart is gone');
    await kniCall(client, 'DeleteNetwork', { id: `${P}-sb3`, netns_path: created.netns_path }); // twice is fine
  } finally {
    execFileSync('ip', ['netns', 'del', foreign]);
    client.close();
  }
});
