// Bandwidth limits after a kill -9: the daemon dies before each bandwidth step of an attach
// (tbf on the host end, the ifb, its tbf, the ingress qdisc, the redirect) and before each
// inverse of a detach; the next start rolls the attach back or finishes the detach, and no
// ifb, qdisc or other device of the sandbox is left. An ifb whose record was lost goes at start.
import test, { type ExecutionContext } from 'ava';
import { readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { startDaemon, cleanupDaemon, eventually, hostLinks, podFactory, runcAttachReq, type Daemon } from '../helpers/daemon.js';
import { crashAndRestart, crashBeforeEachDetachInverse, assertNothingLeft } from '../helpers/crash.js';
import { ifbName } from '../../runtimes/common/bandwidth.js';

const P = 'kbwc';
const opts = { prefix: P, subnet: '10.193.2.0/24' };
const { pod, ids, removeAll } = podFactory(P);
let d: Daemon | undefined;

const req = (id: string, ns: string) =>
  runcAttachReq(id, ns, { extra: { interfaces: [{ name: 'eth0', bandwidth: { ingress_rate: '20000000', egress_rate: '10000000' } }] } });

async function assertNoShaping(t: ExecutionContext, daemon: Daemon, id: string, ns: string, when: string) {
  await assertNothingLeft(t, daemon, id, ns, when);
  t.false(hostLinks().some((l) => l.ifname === ifbName(id, 'eth0')), `no ifb (${when})`);
}

test.after.always(async () => {
  await cleanupDaemon(d, opts, ids);
  removeAll();
});

test.serial('kill -9 before each bandwidth step of an attach, and before each inverse of a detach: the next start leaves nothing', async (t) => {
  t.timeout(480_000); // some twenty kill -9 and restarts, each a fresh daemon start
  const p = pod(1);
  d = await startDaemon(opts);
  const { steps } = await d.call('Plan', { attach: req(p.id, p.path) });
  const bandwidth = steps.map((s: any, i: number) => (/tbf|ifb|ingress qdisc|redirect what/.test(s.description) ? i : -1)).filter((i: number) => i >= 0);
  t.is(bandwidth.length, 5, steps.map((s: any) => s.description).join('\n'));
  await d.stop();
  // Before each bandwidth step, and after the last one (before the step that follows).
  for (const n of [...bandwidth, bandwidth.at(-1)! + 1]) {
    const armed = await d.restart({ KNIT_FAILPOINT: `attach:${n}` });
    d = await crashAndRestart(armed, () => armed.call('Attach', req(p.id, p.path)));
    await assertNoShaping(t, d, p.id, p.ns, `crash before attach step ${n}`);
    await d.stop();
  }
  // The detach's inverses run in reverse: the bandwidth ones, then the veth's retire.
  const { d: after, crashes } = await crashBeforeEachDetachInverse(
    d,
    p.id,
    async (daemon) => {
      await daemon.call('Attach', req(p.id, p.path));
      t.true(hostLinks().some((l) => l.ifname === ifbName(p.id, 'eth0')));
    },
    (daemon, when) => assertNoShaping(t, daemon, p.id, p.ns, when),
  );
  d = after;
  t.true(crashes > bandwidth.length, `a crash before each of the ${bandwidth.length} bandwidth inverses and the veth's (${crashes} crashes)`);
  d = await d.restart();
});

test.serial('an ifb whose record is lost is swept at the next start', async (t) => {
  const p = pod(2);
  d ??= await startDaemon(opts);
  await d.call('Attach', req(p.id, p.path));
  t.true(hostLinks().some((l) => l.ifname === ifbName(p.id, 'eth0')));
  await d.stop();
  const recordDir = path.join(d.dir, 'run', 'sandboxes');
  for (const f of readdirSync(recordDir)) rmSync(path.join(recordDir, f));
  d = await d.restart();
  const ifb = ifbName(p.id, 'eth0');
  t.true(d.logs.some((l) => l.includes(ifb)), 'start-up repair said it swept the ifb');
  await eventually(() => !hostLinks().some((l) => l.ifalias?.includes(`sandbox=${p.id};`)), 'the ifb and the host end are gone');
});
