// kill -9 before every step of a Kata tcfilter and a KubeVirt masquerade attach, and before
// every inverse of their detach: the next start rolls back or finishes, leaving no tap, qdisc,
// bridge, nft table, veth, address or record.
import test from 'ava';
import { startDaemon, cleanupDaemon, makeNetns, removeNetns, type Daemon } from '../helpers/daemon.js';
import { assertNothingLeft, crashAndRestart } from '../helpers/crash.js';

const cases = [
  { tag: 'kcv1', runtime: 'KATA', binding: { mode: 'tcfilter' }, subnet: '10.231.10.0/24' },
  { tag: 'kcv2', runtime: 'KUBEVIRT', binding: { binding: 'masquerade', ports: 'tcp:8080' }, subnet: '10.231.11.0/24' },
];

for (const c of cases) {
  const opts = { prefix: c.tag, subnet: c.subnet };
  const NS = `${c.tag}-pod`;
  const ID = `${c.tag}-sb`;
  const req = (path: string) => ({ sandbox_id: ID, netns_path: path, runtime: c.runtime, interfaces: [{ name: 'eth0', binding: c.binding }] });

  test.serial(`${c.runtime} ${Object.values(c.binding)[0]}: kill -9 at every attach step and detach inverse; restart leaves nothing`, async (t) => {
    const path = makeNetns(NS);
    let d: Daemon | undefined;
    t.teardown(async () => {
      await cleanupDaemon(d, opts, [ID]);
      removeNetns(NS);
    });
    d = await startDaemon(opts);
    const steps = (await d.call('Plan', { attach: req(path) })).steps.length;
    t.true(steps > 5, `plan has ${steps} steps`);
    await d.stop();
    for (let n = 0; n <= steps; n++) {
      const armed: Daemon = await d.restart({ KNIT_FAILPOINT: `attach:${n}` });
      d = await crashAndRestart(armed, () => armed.call('Attach', req(path)));
      await assertNothingLeft(t, d, ID, NS, `crash before attach step ${n}`);
      await d.stop();
    }
    d = await d.restart();
    for (let n = 0; ; n++) {
      await d.call('Attach', req(path));
      await d.stop();
      const armed: Daemon = await d.restart({ KNIT_FAILPOINT: `detach:${n}` });
      let died = false;
      void armed.exited.then((e) => (died = e.signal === 'SIGKILL'));
      await armed.call('Detach', { sandbox_id: ID }).catch(() => undefined);
      await new Promise((r) => setTimeout(r, 100));
      if (!died) {
        await assertNothingLeft(t, armed, ID, NS, `failpoint ${n} is past the last inverse`);
        d = armed;
        break;
      }
      armed.close();
      d = await armed.restart();
      await assertNothingLeft(t, d, ID, NS, `crash before detach inverse ${n}`);
    }
  });
}
