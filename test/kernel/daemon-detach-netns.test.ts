// Detach's netns_path is used, not ignored: naming another live network namespace than the
// sandbox's is refused and detaches nothing; the sandbox's own path, or a path with no live
// namespace behind it any more (the pod's netns deleted first, as runtimes do), detaches.
import test from 'ava';
import * as grpc from '@grpc/grpc-js';
import { cleanupDaemon, knitLinksFor, makeNetns, podFactory, removeNetns, runcAttachReq, startDaemon, type Daemon } from '../helpers/daemon.js';
import { uniquePrefix } from '../helpers/names.js';

const P = uniquePrefix('tdns').slice(0, -1);
const opts = { prefix: P, subnet: '10.188.7.0/24' };
const pods = podFactory(P);
let d: Daemon | undefined;

test.after.always(async () => {
  await cleanupDaemon(d, opts, pods.ids);
  pods.removeAll();
  removeNetns(`${P}-other`);
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
  t.regex(err.details, /another network namespace than sandbox/);
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
