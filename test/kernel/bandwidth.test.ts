// Bandwidth limits on knit's own network, through the real daemon: a tbf root qdisc on the
// host end shapes what reaches the pod, and what the pod sends is redirected to a tagged ifb
// whose tbf shapes it; the pod cannot touch either. Checked with iperf3 between two pods on
// the bridge (the achieved rate is near the limit, and far above it without one), with
// `tc -j` and `ip -j -d`, with knit Check, for annotations, for Kata tcfilter and KubeVirt
// masquerade sandboxes, for a hot-plugged interface, and after Detach: nothing is left.
import test, { type ExecutionContext } from 'ava';
import * as grpc from '@grpc/grpc-js';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { startDaemon, cleanupDaemon, hostLinks, podFactory, runcAttachReq, eventually, type Daemon } from '../helpers/daemon.js';
import { iperf } from '../helpers/iperf.js';
import { tc } from '../helpers/observe.js';
import { hostIfName } from '../../src/base/names.js';
import { ifbName } from '../../runtimes/common/bandwidth.js';

const P = 'kbw';
const opts = { prefix: P, subnet: '10.193.1.0/24' };
const { pod, ids, removeAll } = podFactory(P);
const perf = iperf();
const LIMIT = 20_000_000; // bit/s
const PORT = 15201;
let d: Daemon | undefined;

test.before(async () => {
  d = await startDaemon(opts);
});

test.after.always(async () => {
  perf.close();
  await cleanupDaemon(d, opts, ids);
  removeAll();
});

const tagged = (id: string) => hostLinks().filter((l) => l.ifalias?.includes(`sandbox=${id};`));
const tbfOn = (dev: string) => tc(undefined, 'qdisc', 'show', 'dev', dev).find((q: any) => q.kind === 'tbf');
const podIp = (result: any) => (result.ips[0].address as string).split('/')[0]!;
const limited = (ingress: number, egress: number) => ({ ingress_rate: String(ingress), egress_rate: String(egress) });

/** The shaping knit put on the host for interface `ifname` of sandbox `id`, seen by tc and ip. */
function assertShaped(t: ExecutionContext, id: string, ifname: string, hostDev: string, ingress: number | undefined, egress: number | undefined) {
  if (ingress) t.like(tbfOn(hostDev), { handle: '1:', root: true, options: { rate: ingress / 8 } }, `tbf on ${hostDev}`);
  else t.is(tbfOn(hostDev), undefined);
  const ifb = ifbName(id, ifname);
  const dev = hostLinks().find((l) => l.ifname === ifb) as any;
  if (!egress) return t.is(dev, undefined);
  t.like(dev, { linkinfo: { info_kind: 'ifb' }, operstate: 'UNKNOWN' });
  t.true(dev.ifalias.endsWith(`:sandbox=${id};if=${ifname}`), dev.ifalias);
  t.like(tbfOn(ifb), { handle: '1:', root: true, options: { rate: egress / 8 } }, `tbf on ${ifb}`);
  const redirect = tc(undefined, 'filter', 'show', 'dev', hostDev, 'ingress').find((f: any) => f.options?.actions);
  t.like(redirect?.options.actions[0], { kind: 'mirred', mirred_action: 'redirect', direction: 'egress', to_dev: ifb });
}

function recordVersion(id: string): number {
  const dir = path.join(d!.dir, 'run', 'sandboxes');
  const docs = readdirSync(dir).filter((f) => !f.startsWith('.')).map((f) => JSON.parse(readFileSync(path.join(dir, f), 'utf8')));
  return docs.find((r) => r.sandboxId === id).version;
}

test.serial('runc: both directions held near the limit by tbf on the host end and on a tagged ifb, far above without; Check sees drift; Detach removes all', async (t) => {
  const server = pod(1);
  const { result: sr } = await d!.call('Attach', runcAttachReq(server.id, server.path));
  await perf.serve(server.ns, PORT);
  const free = pod(2);
  await d!.call('Attach', runcAttachReq(free.id, free.path));
  const p = pod(3);
  const { result } = await d!.call('Attach', runcAttachReq(p.id, p.path, { extra: { interfaces: [{ name: 'eth0', bandwidth: limited(LIMIT, LIMIT) }] } }));
  const hostEnd = hostIfName(p.id, 'eth0');
  t.is(result.interfaces.find((i: any) => !i.sandbox).name, hostEnd);
  assertShaped(t, p.id, 'eth0', hostEnd, LIMIT, LIMIT);
  t.deepEqual(tc(p.ns, 'qdisc', 'show').filter((q: any) => q.kind === 'tbf' || q.kind === 'ingress'), [], 'nothing in the pod to undo');
  t.is(recordVersion(p.id), 3, 'a plan with bandwidth steps is written as format 3');
  t.is(recordVersion(free.id), 1, 'one without stays format 1');

  const to = podIp(sr);
  const egress = perf.rate(p.ns, to, PORT);
  const ingress = perf.rate(p.ns, to, PORT, true);
  t.log(`limited pod: egress ${(egress / 1e6).toFixed(1)} Mbit/s, ingress ${(ingress / 1e6).toFixed(1)} Mbit/s (limit ${LIMIT / 1e6})`);
  for (const [way, rate] of [['egress', egress], ['ingress', ingress]] as const) {
    t.true(rate > 0.6 * LIMIT && rate < 1.15 * LIMIT, `${way} ${rate} bit/s is not near the ${LIMIT} bit/s limit`);
  }
  const freeEgress = perf.rate(free.ns, to, PORT);
  const freeIngress = perf.rate(free.ns, to, PORT, true);
  t.log(`unlimited pod: egress ${(freeEgress / 1e6).toFixed(1)} Mbit/s, ingress ${(freeIngress / 1e6).toFixed(1)} Mbit/s`);
  t.true(freeEgress > 3 * LIMIT && freeIngress > 3 * LIMIT, 'without a limit the same path runs far above it');

  t.deepEqual((await d!.call('Check', { sandbox_id: p.id })).differences, []);
  execFileSync('tc', ['qdisc', 'del', 'dev', hostEnd, 'root']);
  execFileSync('ip', ['link', 'set', ifbName(p.id, 'eth0'), 'down']);
  const drift = await d!.call('Check', { sandbox_id: p.id });
  t.false(drift.ok);
  t.true(drift.differences.some((s: string) => s.includes(`${hostEnd} on the host has no tbf root qdisc (a limit of 20 Mbit/s)`)), drift.differences.join('; '));
  t.true(drift.differences.some((s: string) => s.includes(`ifb ${ifbName(p.id, 'eth0')} on the host is down`)), drift.differences.join('; '));

  await d!.call('Detach', { sandbox_id: p.id });
  await eventually(() => tagged(p.id).length === 0, 'host end and ifb of the limited pod removed');
  t.false(hostLinks().some((l) => l.ifname === ifbName(p.id, 'eth0')));
  for (const s of [server, free]) await d!.call('Detach', { sandbox_id: s.id });
  perf.close();
});

test.serial('annotations: kubernetes.io/egress-bandwidth and ingress-bandwidth shape the default interface', async (t) => {
  const p = pod(4);
  const annotations = { 'kubernetes.io/ingress-bandwidth': '10M', 'kubernetes.io/egress-bandwidth': '5M' };
  const { steps } = await d!.call('Plan', { attach: runcAttachReq(p.id, p.path, { extra: { annotations } }) });
  t.true(steps.some((s: any) => s.description.includes(`create ifb ${ifbName(p.id, 'eth0')}`)), 'Plan shows the ifb step');
  await d!.call('Attach', runcAttachReq(p.id, p.path, { extra: { annotations } }));
  assertShaped(t, p.id, 'eth0', hostIfName(p.id, 'eth0'), 10_000_000, 5_000_000);
  await d!.call('Detach', { sandbox_id: p.id });
  await eventually(() => tagged(p.id).length === 0, 'nothing of the pod left');
});

test.serial('an ingress-only limit makes no ifb; an egress-only one no tbf on the host end', async (t) => {
  const a = pod(5);
  const b = pod(6);
  await d!.call('Attach', runcAttachReq(a.id, a.path, { extra: { interfaces: [{ name: 'eth0', bandwidth: { ingress_rate: '8000000' } }] } }));
  await d!.call('Attach', runcAttachReq(b.id, b.path, { extra: { interfaces: [{ name: 'eth0', bandwidth: { egress_rate: '8000000' } }] } }));
  assertShaped(t, a.id, 'eth0', hostIfName(a.id, 'eth0'), 8_000_000, undefined);
  assertShaped(t, b.id, 'eth0', hostIfName(b.id, 'eth0'), undefined, 8_000_000);
  for (const s of [a, b]) await d!.call('Detach', { sandbox_id: s.id });
  await eventually(() => tagged(a.id).length + tagged(b.id).length === 0, 'nothing of either pod left');
});

for (const [n, runtime, binding] of [
  [7, 'KATA', { mode: 'tcfilter' }],
  [8, 'KUBEVIRT', { binding: 'masquerade' }],
] as const) {
  test.serial(`${runtime} ${Object.values(binding)[0]}: the host end of the pod veth is shaped both ways; Detach removes it all`, async (t) => {
    const p = pod(n);
    await d!.call('Attach', { sandbox_id: p.id, netns_path: p.path, runtime, interfaces: [{ name: 'eth0', binding, bandwidth: limited(30_000_000, 15_000_000) }] });
    assertShaped(t, p.id, 'eth0', hostIfName(p.id, 'eth0'), 30_000_000, 15_000_000);
    t.deepEqual((await d!.call('Check', { sandbox_id: p.id })).differences, []);
    await d!.call('Detach', { sandbox_id: p.id });
    await eventually(() => tagged(p.id).length === 0, 'nothing of the sandbox left on the host');
  });
}

test.serial('AddInterface with a limit shapes the new interface; RemoveInterface takes its ifb and qdiscs back', async (t) => {
  const p = pod(9);
  await d!.call('Attach', runcAttachReq(p.id, p.path));
  await d!.call('AddInterface', { sandbox_id: p.id, interface: { name: 'net1', bandwidth: limited(12_000_000, 6_000_000) } });
  const hostEnd = hostIfName(p.id, 'net1');
  assertShaped(t, p.id, 'net1', hostEnd, 12_000_000, 6_000_000);
  assertShaped(t, p.id, 'eth0', hostIfName(p.id, 'eth0'), undefined, undefined);
  t.is(recordVersion(p.id), 3, 'the record moved to format 3 with the limited interface');
  await d!.call('RemoveInterface', { sandbox_id: p.id, name: 'net1' });
  await eventually(() => !hostLinks().some((l) => l.ifalias?.includes(`sandbox=${p.id};if=net1`)), 'net1 host end and ifb removed');
  await d!.call('Detach', { sandbox_id: p.id });
  await eventually(() => tagged(p.id).length === 0, 'nothing of the pod left');
});

test.serial('a limit on an interface that takes a device is refused with UNIMPLEMENTED naming the field; nothing is made', async (t) => {
  const p = pod(10);
  const req = runcAttachReq(p.id, p.path, { extra: { interfaces: [{ name: 'eth0', device: { netdev: 'nosuchdev0' }, bandwidth: { ingress_rate: '1000000' } }] } });
  const err = (await t.throwsAsync(d!.call('Attach', req))) as unknown as grpc.ServiceError;
  t.is(err.code, grpc.status.UNIMPLEMENTED, err.details);
  t.is(err.metadata.get('knit-field')[0], 'interfaces[0].bandwidth');
  t.deepEqual(tagged(p.id), []);
});
