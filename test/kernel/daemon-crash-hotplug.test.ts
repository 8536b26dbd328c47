// kill -9 before every step of an AddInterface and before every inverse of a RemoveInterface,
// for runc, Kata tcfilter and KubeVirt bridge: the next start takes the half-added interface
// back (or finishes the removal). The sandbox is left exactly as it was with eth0 alone: the
// same devices in its netns, nothing of net1 on the host, net1's address back in the pool, a
// record that Check finds true, and eth0 still carrying traffic.
import test from 'ava';
import type { ExecutionContext } from 'ava';
import {
  startDaemon, cleanupDaemon, makeNetns, removeNetns, ipJson, pingFrom, eventually, hostLinks, removeLinkQuietly, type Daemon,
} from '../helpers/daemon.js';
import { crashAndRestart } from '../helpers/crash.js';

const cases = [
  { tag: 'mch1', runtime: 'RUNC', binding: {}, net: 20 },
  { tag: 'mch2', runtime: 'KATA', binding: { mode: 'tcfilter' }, net: 22 },
  { tag: 'mch3', runtime: 'KUBEVIRT', binding: { binding: 'bridge' }, net: 24 },
];

for (const c of cases) {
  const B = `${c.tag}b`;
  const opts = {
    prefix: c.tag,
    subnet: `10.174.${c.net}.0/24`,
    extraNetworks: [{ name: B, mode: 'bridge', bridge: `${c.tag}bbr`, ipv4: { subnet: `10.174.${c.net + 1}.0/24` } }],
  };
  const NS = `${c.tag}-pod`;
  const ID = `${c.tag}-sb`;
  const attachReq = (path: string) => ({ sandbox_id: ID, netns_path: path, runtime: c.runtime, interfaces: [{ name: 'eth0', binding: c.binding }] });
  const addReq = { sandbox_id: ID, interface: { name: 'net1', network: B, binding: c.binding } };
  const podLinks = () => ipJson(['link', 'show'], NS).map((l: any) => l.ifname).sort();

  /** The sandbox as it was before net1: same pod devices, nothing of net1 anywhere. */
  async function assertOnlyEth0(t: ExecutionContext, d: Daemon, before: string[], when: string) {
    await eventually(() => !hostLinks().some((l) => l.ifalias?.includes(`sandbox=${ID};if=net1`)), `no host device of net1 (${when})`);
    await eventually(() => podLinks().length === before.length, `pod netns back to ${before.join(',')} (${when})`);
    t.deepEqual(podLinks(), before, `pod devices (${when})`);
    const s = await d.call('NodeStatus', {});
    t.is(Number(s.networks.find((n: any) => n.name === B).pools[0].used), 0, `net1's address is free (${when})`);
    const q = await d.call('Query', { sandbox_id: ID });
    t.is(q.sandbox.state, 'ATTACHED', when);
    t.deepEqual(q.sandbox.request.interfaces.map((i: any) => i.name), ['eth0'], `record (${when})`);
    t.true(q.live.ok, `${when}: ${q.live.differences.join('; ')}`);
    if (c.runtime === 'RUNC') t.true(pingFrom(NS, `10.174.${c.net}.1`), `eth0 still reaches its gateway (${when})`);
  }

  /** A daemon with the sandbox attached on eth0 alone, and its pod devices. The test swaps
   * env.d on every restart; teardown stops whichever daemon is current. */
  async function setUp(t: ExecutionContext): Promise<{ d: Daemon; before: string[] }> {
    const path = makeNetns(NS);
    const env = { before: [] as string[] } as { d: Daemon; before: string[] };
    t.teardown(async () => {
      await cleanupDaemon(env.d, opts, [ID]);
      removeLinkQuietly(`${c.tag}bbr`);
      removeNetns(NS);
    });
    env.d = await startDaemon(opts);
    await env.d.call('Attach', attachReq(path));
    env.before = podLinks();
    return env;
  }

  async function detachAll(t: ExecutionContext, d: Daemon) {
    await d.call('Detach', { sandbox_id: ID });
    await eventually(() => !hostLinks().some((l) => l.ifalias?.includes(`sandbox=${ID};`)), 'every device reaped');
    t.deepEqual(podLinks(), ['lo']);
  }

  test.serial(`${c.runtime}: kill -9 before every AddInterface step; restart takes net1 back and leaves the sandbox as it was`, async (t) => {
    const env = await setUp(t);
    const steps = (await env.d.call('Plan', { add_interface: addReq })).steps.length;
    t.true(steps >= 4, `the add has ${steps} steps`);
    await env.d.stop();
    for (let n = 0; n <= steps; n++) {
      const armed: Daemon = await env.d.restart({ KNIT_FAILPOINT: `addif:${n}` });
      env.d = armed;
      env.d = await crashAndRestart(armed, () => armed.call('AddInterface', addReq));
      await assertOnlyEth0(t, env.d, env.before, `crash before add step ${n}`);
      await env.d.stop();
    }
    env.d = await env.d.restart();
    await detachAll(t, env.d);
  });

  test.serial(`${c.runtime}: kill -9 before every RemoveInterface inverse; restart finishes the removal`, async (t) => {
    const env = await setUp(t);
    for (let n = 0; ; n++) {
      await env.d.call('AddInterface', addReq);
      await env.d.stop();
      const armed: Daemon = await env.d.restart({ KNIT_FAILPOINT: `removeif:${n}` });
      env.d = armed;
      let died = false;
      void armed.exited.then((e) => (died = e.signal === 'SIGKILL'));
      await armed.call('RemoveInterface', { sandbox_id: ID, name: 'net1' }).catch(() => undefined);
      await new Promise((r) => setTimeout(r, 100));
      if (!died) {
        t.true(n >= 2, `the removal has ${n} inverse actions`);
        await assertOnlyEth0(t, armed, env.before, `failpoint ${n} is past the last inverse`);
        break;
      }
      armed.close();
      env.d = await armed.restart();
      await assertOnlyEth0(t, env.d, env.before, `crash before remove inverse ${n}`);
    }
    await detachAll(t, env.d);
  });
}
