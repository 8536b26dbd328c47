// A clean stop under real callers: kubelet and containerd keep their channel open (and a
// watcher keeps a stream in flight) for the daemon's whole life. SIGTERM must still end the
// process, leaving the attached sandbox attached for the next start.
import test from 'ava';
import * as grpc from '@grpc/grpc-js';
import { knitProto } from '../../src/api/proto.js';
import { startDaemon, cleanupDaemon, ipJson, podFactory, promisified, runcAttachReq, type Daemon } from '../helpers/daemon.js';

const P = 'tstp';
const opts = { prefix: P, subnet: '10.169.1.0/24' };
let d: Daemon | undefined;
const pods = podFactory(P);

test.after.always(async () => {
  await cleanupDaemon(d, opts, pods.ids);
  pods.removeAll();
});

test.serial('SIGTERM ends the daemon while a client holds its channel and a Watch stream; the sandbox stays attached', async (t) => {
  d = await startDaemon(opts);
  const a = pods.pod(1);
  await d.call('Attach', runcAttachReq(a.id, a.path));

  // A second client, like kubelet's: it keeps its channel and an open Watch the whole time.
  const { Knit } = knitProto();
  const holder = new Knit(`unix://${d.socket}`, grpc.credentials.createInsecure());
  t.teardown(() => holder.close());
  await promisified(holder)('NodeStatus', {});
  const stream = (holder as any).Watch({}) as grpc.ClientReadableStream<unknown>;
  const streamEnded = new Promise<grpc.ServiceError | undefined>((resolve) => {
    stream.on('error', (e: grpc.ServiceError) => resolve(e));
    stream.on('end', () => resolve(undefined));
  });
  stream.on('data', () => undefined);
  await new Promise<void>((resolve) => stream.once('metadata', () => resolve()));

  d.child.kill('SIGTERM');
  // Bounded wait only so a regression fails here instead of hanging the suite: the daemon's own
  // stop deadline is 10 s, so 30 s says "never" rather than "slow".
  const exit = await Promise.race([d.exited, new Promise<'hung'>((r) => setTimeout(() => r('hung'), 30_000))]);
  t.not(exit, 'hung', 'the daemon is still running 30 s after SIGTERM');
  t.true(d.logs.some((l) => l.includes('knit stopped')), 'it stopped through its own shutdown, not the deadline');
  await streamEnded; // the held Watch stream was ended by the daemon (else this never resolves)

  // Stopping leaves sandboxes attached: the pod end is still in its netns, with its address.
  const eth0 = ipJson(['addr', 'show', 'eth0'], a.ns)[0];
  t.true(eth0.addr_info.some((x: { local: string }) => x.local.startsWith('10.169.1.')), JSON.stringify(eth0.addr_info));

  d = await d.restart();
  const listed = await d.call('List', {});
  t.true(JSON.stringify(listed).includes(a.id), 'the restarted daemon still has the sandbox');
});
