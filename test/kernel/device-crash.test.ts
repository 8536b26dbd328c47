// kill -9 at every step of a device Attach and at every inverse of its Detach; the next start
// repairs from the journal and the VF is back exactly as it was: name, MAC, MTU, up state,
// ifindex, in the host netns; the pod netns empty; no record. No SR-IOV hardware here: a veth
// end stands in for the VF's netdev and the PCI side is a simulated sysfs (device-standin.ts).
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { toStruct } from '../../src/api/struct.js';
import { startDaemon, cleanupDaemon, makeNetns, removeNetns, ipJson, type Daemon } from '../helpers/daemon.js';
import { makeStandIn, vfState, type StandIn } from './device-standin.js';

const P = 'kdc';
const POD = `${P}-pod`;
const ID = `${P}-sb`;
let d: Daemon | undefined;
let s: StandIn;
let podPath = '';
const opts = { prefix: P, subnet: '10.237.9.0/24', config: {} as Record<string, unknown> };

const req = () => ({
  sandbox_id: ID,
  netns_path: podPath,
  runtime: 'RUNC',
  interfaces: [{
    name: 'net1', mac: '02:5a:00:00:00:c1', mtu: 1300,
    device: { bdf: s.vfs[0].bdf, parameters: toStruct({ addresses: ['192.0.2.20/24'], routes: [{ dst: '198.51.100.0/24', gw: '192.0.2.1' }] }) },
  }],
});

const cleanups: (() => unknown)[] = [];

test.before(async () => {
  s = await makeStandIn({ teardown: (fn) => void cleanups.push(fn) }, P);
  opts.config = { sysfsRoot: s.node.root };
  podPath = makeNetns(POD);
});

test.after.always(async () => {
  await cleanupDaemon(d, opts, [ID]);
  removeNetns(POD);
  for (const fn of cleanups.reverse()) await fn();
});

async function assertRestored(t: ExecutionContext, daemon: Daemon, before: unknown, when: string) {
  t.deepEqual(vfState(s.vfs[0].name), before, `VF back as it was (${when})`);
  t.deepEqual(ipJson(['link', 'show'], POD).map((l: any) => l.ifname), ['lo'], `pod netns empty (${when})`);
  t.is((await daemon.call('List', {})).sandboxes.length, 0, `no record (${when})`);
}

async function crashAndRestart(armed: Daemon, rpc: () => Promise<unknown>): Promise<Daemon> {
  await rpc().catch(() => undefined);
  const exit = await armed.exited;
  if (exit.signal !== 'SIGKILL') throw new Error(`daemon should have been killed at the failpoint, exited ${JSON.stringify(exit)}`);
  armed.close();
  return armed.restart();
}

test.serial('kill -9 before each step of a device attach (and after the last): restart rolls it back (simulated VF: a veth end stands in for its netdev)', async (t) => {
  const before = vfState(s.vfs[0].name);
  d = await startDaemon(opts);
  const plan = await d.call('Plan', { attach: req() });
  const steps = plan.steps.length;
  t.is(steps, 7, 'claim, move, arrived, MAC+MTU, address, up, route');
  await d.stop();
  for (let n = 0; n <= steps; n++) {
    const armed = await d.restart({ KNIT_FAILPOINT: `attach:${n}` });
    d = await crashAndRestart(armed, () => armed.call('Attach', req()));
    await assertRestored(t, d, before, `crash before attach step ${n}`);
    await d.stop();
  }
  d = await d.restart();
  await d.call('Attach', req());
  await d.call('Detach', { sandbox_id: ID });
  await assertRestored(t, d, before, 'a normal attach and detach afterwards');
  await d.stop();
});

test.serial('kill -9 before each inverse of a device detach (and after the last): restart finishes it (simulated VF)', async (t) => {
  const before = vfState(s.vfs[0].name);
  d = await d!.restart();
  const plan = await d.call('Plan', { attach: req() });
  const inverses = plan.steps.filter((x: any) => x.undo).length;
  t.is(inverses, 2, 'move back from the pod, then return it by PCI address');
  for (let n = 0; n <= inverses; n++) {
    await d.call('Attach', req());
    await d.stop();
    const armed = await d.restart({ KNIT_FAILPOINT: `detach:${n}` });
    d = await crashAndRestart(armed, () => armed.call('Detach', { sandbox_id: ID }));
    await assertRestored(t, d, before, `crash before detach inverse ${n}`);
  }
});
