// Detach's netns_path is used, not ignored: naming another live network namespace than the
// sandbox's is refused and detaches nothing; the sandbox's own path, or a path with no live
// namespace behind it any more (the pod's netns deleted first, as runtimes do), detaches.
// The host's namespace and the daemon's own count as "another", however they are reached (a
// bind mount, a symlink): namespaces are told apart by (dev, inode), never by path. Each case
// goes through knit.v1 and KNI, and the refusal must name the field that caller sent.
import test, { type ExecutionContext } from 'ava';
import * as grpc from '@grpc/grpc-js';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cleanupDaemon, eventually, ipJson, knitLinksFor, makeNetns, podFactory, removeNetns, runcAttachReq, startDaemon, type Daemon } from '../helpers/daemon.js';
import { knitState } from '../helpers/knit-state.js';
import { uniquePrefix } from '../helpers/names.js';
import { kniCall, kniClient } from '../compat/kni-client.js';

const P = uniquePrefix('tdns').slice(0, -1);
const opts = { prefix: P, subnet: '10.188.7.0/24' };
const pods = podFactory(P);
let d: Daemon | undefined;

test.after.always(async () => {
  await cleanupDaemon(d, opts, pods.ids);
  pods.removeAll();
  removeNetns(`${P}-other`);
  await cleanupDaemon(onHost, hostOpts, hostPods.ids);
  hostPods.removeAll();
  await cleanupDaemon(inNs, inNsOpts, inNsPods.ids);
  inNsPods.removeAll();
  removeNetns(`${P}-host`);
  removeNetns(`${P}-d`);
  rmSync(links, { recursive: true, force: true });
});

test.serial('Detach with another live netns is refused and changes nothing; the right one, or a gone one, detaches', async (t) => {
  d = await startDaemon(opts);
  const a = pods.pod(1);
  const b = pods.pod(2);
  await d.call('Attach', runcAttachReq(a.id, a.path));
  await d.call('Attach', runcAttachReq(b.id, b.path));
  const other = makeNetns(`${P}-other`);

  const err = (await t.throwsAsync(d.call('Detach', { sandbox_id: a.id, netns_path: other }))) as unknown as grpc.ServiceError;
  t.is(err.code, grpc.status.INVALID_ARGUMENT);
  t.deepEqual(err.metadata.get('knit-field'), ['netns_path']);
  t.regex(err.details, /is another network namespace, not sandbox .*nothing was detached/);
  const wrong = (await t.throwsAsync(d.call('Detach', { sandbox_id: a.id, netns_path: b.path }))) as unknown as grpc.ServiceError;
  t.is(wrong.code, grpc.status.INVALID_ARGUMENT, "b's netns is not a's");
  t.is(knitLinksFor(d, [a.id]).filter((l) => l !== d!.bridge).length, 1, "a's host veth is still there (ip link)");
  t.is((await d.call('Query', { sandbox_id: a.id })).sandbox.state, 'ATTACHED');

  await d.call('Detach', { sandbox_id: a.id, netns_path: a.path });
  await t.throwsAsync(d.call('Query', { sandbox_id: a.id }), { message: /NOT_FOUND|not attached/ });

  removeNetns(b.ns); // the runtime deleted the pod's netns before its DEL
  await d.call('Detach', { sandbox_id: b.id, netns_path: b.path });
  await t.throwsAsync(d.call('Query', { sandbox_id: b.id }), { message: /NOT_FOUND|not attached/ });
});

// Two daemons: one on the host, as knit runs on a node, and one in a netns of its own
// (`${P}-d`), where "the daemon's own" namespace (/run/netns/${P}-d, the bind mount `ip netns
// add` made) is not the host's. The host's namespace is bind-mounted at /run/netns/${P}-host as
// `ip netns attach` does, from this test's process (it runs in the host's namespace: pid 1's
// cannot always be read, here among others), and each is reached by symlink too.
const hostOpts = { prefix: `${P}h`, subnet: '10.188.9.0/24' };
const inNsOpts = { prefix: `${P}n`, subnet: '10.188.8.0/24', netns: `${P}-d` };
const hostPods = podFactory(`${P}h`);
const inNsPods = podFactory(`${P}n`);
let onHost: Daemon | undefined;
let inNs: Daemon | undefined;
const links = mkdtempSync(path.join(os.tmpdir(), `${P}-links-`));

const callers = {
  'knit.v1 Detach': { field: 'netns_path', detach: (d: Daemon, id: string, netns: string) => d.call('Detach', { sandbox_id: id, netns_path: netns }) },
  'KNI DetachInterface': { field: 'isolation.path', detach: (d: Daemon, id: string, netns: string) => kni(d, 'DetachInterface', { id, isolation: { path: netns } }) },
  'KNI DetachNetwork': { field: 'extradata["netns"]', detach: (d: Daemon, id: string, netns: string) => kni(d, 'DetachNetwork', { id, extradata: { netns } }) },
};

async function kni(d: Daemon, rpc: string, req: object) {
  const client = kniClient(d.socket);
  try {
    return await kniCall(client, rpc, req);
  } finally {
    client.close();
  }
}

function symlink(name: string, target: string): string {
  symlinkSync(target, path.join(links, name));
  return path.join(links, name);
}

/** Every wrong path through every caller: INVALID_ARGUMENT naming the caller's field, and the
 * kernel, the records and the pools as they were; then the right path detaches. */
async function refusedThenDetached(t: ExecutionContext, d: Daemon, pods: ReturnType<typeof podFactory>, daemonNs: string | undefined, wrong: [string, string, RegExp][]) {
  const a = pods.pod(1);
  const b = pods.pod(2);
  await d.call('Attach', runcAttachReq(a.id, a.path));
  await d.call('Attach', runcAttachReq(b.id, b.path));
  wrong.push(["another pod's netns", b.path, /is another network namespace, not sandbox/]);
  const ns = [daemonNs, a.ns, b.ns];
  const before = await knitState(d, ns);
  t.is(before.records.length, 2);
  for (const [caller, { field, detach }] of Object.entries(callers)) {
    for (const [what, netns, says] of wrong) {
      const err = (await t.throwsAsync(detach(d, a.id, netns), undefined, `${caller}, ${what}`)) as unknown as grpc.ServiceError;
      t.is(err?.code, grpc.status.INVALID_ARGUMENT, `${caller}, ${what}: ${err?.details}`);
      t.deepEqual(err?.metadata.get('knit-field'), [field], `${caller}, ${what}`);
      t.true(err?.details.startsWith(`${field}: `), `${caller}, ${what}: ${err?.details}`);
      t.regex(err?.details ?? '', says, `${caller}, ${what}`);
      t.regex(err?.details ?? '', /nothing was detached$/);
    }
  }
  t.deepEqual(await knitState(d, ns), before, 'links, addresses, routes (ip -j), records and pools as they were');
  t.is(ipJson(['addr', 'show', 'eth0'], a.ns)[0].addr_info.filter((x: any) => x.family === 'inet').length, 1, "a's eth0 keeps its address");

  // The right path detaches, through each API.
  await d.call('Detach', { sandbox_id: a.id, netns_path: a.path });
  await kni(d, 'DetachInterface', { id: b.id, isolation: { path: b.path } });
  t.deepEqual((await knitState(d, [])).records, []);
  await eventually(() => !ipJson(['link', 'show'], daemonNs).some((l: any) => [a.id, b.id].some((id) => l.ifalias?.includes(`sandbox=${id};`))), 'host ends reaped');
}

const HOSTS = /is the host's network namespace \(or knit's own\), not sandbox/;

test.serial("Detach naming the host's netns through a bind mount or a symlink is refused through knit.v1 and KNI and changes nothing", async (t) => {
  removeNetns(`${P}-host`);
  execFileSync('ip', ['netns', 'attach', `${P}-host`, String(process.pid)]);
  onHost = await startDaemon(hostOpts);
  await refusedThenDetached(t, onHost, hostPods, undefined, [
    ["the host's netns, bind-mounted", `/run/netns/${P}-host`, HOSTS],
    ["a symlink to the host's bind mount", symlink('host-bind', `/run/netns/${P}-host`), HOSTS],
    ['a symlink to /proc/1/ns/net', symlink('proc1', '/proc/1/ns/net'), HOSTS],
    ['a symlink to /proc/self/ns/net', symlink('proc-self', '/proc/self/ns/net'), HOSTS],
  ]);
});

test.serial("Detach naming the daemon's own netns (not the host's) through a bind mount or a symlink is refused the same way", async (t) => {
  makeNetns(`${P}-d`);
  inNs = await startDaemon(inNsOpts);
  await refusedThenDetached(t, inNs, inNsPods, `${P}-d`, [
    ["the daemon's own netns, bind-mounted", `/run/netns/${P}-d`, HOSTS],
    ["a symlink to the daemon's own", symlink('self-bind', `/run/netns/${P}-d`), HOSTS],
  ]);
});
