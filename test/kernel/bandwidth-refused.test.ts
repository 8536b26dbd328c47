// Until knit enforces them, rate limits on its own networks are refused with UNIMPLEMENTED
// naming the field, through the real daemon (Attach, Plan and the annotations alike), and
// nothing is made on the host. (Host ports are published: test/kernel/host-ports.test.ts.)
import test from 'ava';
import * as grpc from '@grpc/grpc-js';
import { startDaemon, cleanupDaemon, hostLinks, podFactory, runcAttachReq, type Daemon } from '../helpers/daemon.js';

const P = 'pbwr';
const opts = { prefix: P, subnet: '10.170.2.0/24' };
let d: Daemon | undefined;
const { pod, ids, removeAll } = podFactory(P);

test.before(async () => {
  d = await startDaemon(opts);
});

test.after.always(async () => {
  await cleanupDaemon(d, opts, ids);
  removeAll();
});

async function refused(t: import('ava').ExecutionContext, method: string, req: object, field: string) {
  const err = (await t.throwsAsync(d!.call(method, req))) as unknown as grpc.ServiceError;
  t.is(err.code, grpc.status.UNIMPLEMENTED, err.details);
  t.is(err.metadata.get('knit-field')[0], field);
}

test.serial('a bandwidth limit is refused with UNIMPLEMENTED and leaves nothing behind', async (t) => {
  const p = pod(1);
  const limited = { interfaces: [{ name: 'eth0', bandwidth: { ingress_rate: '10000000' } }] };
  await refused(t, 'Attach', runcAttachReq(p.id, p.path, { extra: limited }), 'interfaces[0].bandwidth');
  await refused(t, 'Attach', runcAttachReq(p.id, p.path, { extra: { annotations: { 'kubernetes.io/egress-bandwidth': '5M' } } }), 'interfaces[0].bandwidth');
  await refused(t, 'Plan', { attach: runcAttachReq(p.id, p.path, { extra: limited }) }, 'attach.interfaces[0].bandwidth');
  t.deepEqual(hostLinks().filter((l) => l.ifalias?.includes(`sandbox=${p.id};`)), []);
  const listed = async () => ((await d!.call('List', {})).sandboxes ?? []).some((s: any) => s.request?.sandbox_id === p.id);
  t.false(await listed(), 'no record');
  // Without the limit the same request works.
  await d!.call('Attach', runcAttachReq(p.id, p.path));
  t.true(await listed());
  await d!.call('Detach', { sandbox_id: p.id });
});
