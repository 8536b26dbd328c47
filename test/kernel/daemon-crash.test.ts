// kill -9 at every step of an attach and of a detach; the next start must complete or roll
// back, leaving nothing: no device, no address held, no record, and the sandbox attachable.
import test from 'ava';
import {
  startDaemon, cleanupDaemon, makeNetns, removeNetns, ipJson, eventually, hostLinks, type Daemon,
} from '../helpers/daemon.js';
import { crashAndRestart } from '../helpers/crash.js';

const P = 'kcr';
const opts = { prefix: P, subnet: '10.231.2.0/24' };
const NS = `${P}-pod`;
const ID = `${P}-sb`;
let d: Daemon | undefined;
let nsPath = '';

const req = () => ({ sandbox_id: ID, netns_path: nsPath, runtime: 'RUNC', interfaces: [{ name: 'eth0' }] });

test.before(() => {
  nsPath = makeNetns(NS);
});

test.after.always(async () => {
  await cleanupDaemon(d, opts, [ID]);
  removeNetns(NS);
});

const sandboxDevices = () => hostLinks().filter((l) => l.ifalias?.includes(`sandbox=${ID};`)).map((l) => l.ifname);

async function assertClean(t: any, daemon: Daemon, when: string) {
  await eventually(() => sandboxDevices().length === 0, `no host device of ${ID} (${when})`);
  t.deepEqual(ipJson(['link', 'show'], NS).map((l: any) => l.ifname), ['lo'], `pod netns empty (${when})`);
  const s = await daemon.call('NodeStatus', {});
  t.is(Number(s.networks[0].pools[0].used), 0, `no address held (${when})`);
  t.is((await daemon.call('List', {})).sandboxes.length, 0, `no record (${when})`);
}

test.serial('kill -9 before each attach step (and after the last): restart rolls back everything', async (t) => {
  d = await startDaemon(opts);
  const plan = await d.call('Plan', { attach: req() });
  const steps = plan.steps.length;
  t.true(steps >= 4, `plan has ${steps} steps`);
  await d.stop();
  for (let n = 0; n <= steps; n++) {
    const armed = await d.restart({ KNIT_FAILPOINT: `attach:${n}` });
    d = await crashAndRestart(armed, () => armed.call('Attach', req()));
    await assertClean(t, d, `crash before attach step ${n}`);
    await d.stop();
  }
  // And the sandbox still attaches afterwards: names and addresses were all given back.
  d = await d.restart();
  const { result } = await d.call('Attach', req());
  t.regex(result.ips[0].address, /^10\.231\.2\./);
  await d.call('Detach', { sandbox_id: ID });
  await assertClean(t, d, 'after a normal detach');
  await d.stop();
});

test.serial('kill -9 before each detach action (and after the last): restart finishes the detach', async (t) => {
  d = await d!.restart();
  for (let n = 0; ; n++) {
    await d.call('Attach', req());
    await d.stop();
    const armed = await d.restart({ KNIT_FAILPOINT: `detach:${n}` });
    let died = false;
    void armed.exited.then((e) => (died = e.signal === 'SIGKILL'));
    await armed.call('Detach', { sandbox_id: ID }).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 100));
    if (!died) {
      // n is past the last action: the detach completed without reaching the failpoint.
      await assertClean(t, armed, `detach with failpoint ${n} beyond the last action`);
      t.true(n >= 2, `detach has ${n} inverse actions`);
      d = armed;
      break;
    }
    armed.close();
    d = await armed.restart();
    await assertClean(t, d, `crash before detach action ${n}`);
  }
});
