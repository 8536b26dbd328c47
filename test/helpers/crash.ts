// kill -9 at a failpoint, then restart: shared by the crash tests of every runtime.
import type { ExecutionContext } from 'ava';
import { execFileSync } from 'node:child_process';
import { eventually, hostLinks, ipJson, type Daemon } from './daemon.js';

/** Runs `rpc` on a daemon armed with a failpoint, expects it to die by SIGKILL, restarts it. */
export async function crashAndRestart(armed: Daemon, rpc: () => Promise<unknown>): Promise<Daemon> {
  let answer = 'it answered';
  await rpc().catch((err: Error) => (answer = `it answered ${err.message}`));
  // An rpc refused before its first step never reaches the failpoint: say so, do not hang.
  let timer: NodeJS.Timeout | undefined;
  const notKilled = new Promise<'alive'>((resolve) => (timer = setTimeout(() => resolve('alive'), 30_000)));
  const exit = await Promise.race([armed.exited, notKilled]);
  clearTimeout(timer);
  if (exit === 'alive') {
    await armed.stop();
    throw new Error(`daemon was not killed at the failpoint (${answer})`);
  }
  if (exit.signal !== 'SIGKILL') throw new Error(`daemon should have been killed at the failpoint, exited ${JSON.stringify(exit)}`);
  armed.close();
  return armed.restart();
}

/** Nothing of sandbox `id` is left: no host device, only lo in its netns, no nft table there,
 * no address held, no record. */
export async function assertNothingLeft(t: ExecutionContext, d: Daemon, id: string, ns: string, when: string): Promise<void> {
  await eventually(() => !hostLinks().some((l) => l.ifalias?.includes(`sandbox=${id};`)), `no host device of ${id} (${when})`);
  t.deepEqual(ipJson(['link', 'show'], ns).map((l: any) => l.ifname), ['lo'], `pod netns holds only lo (${when})`);
  const tables = JSON.parse(execFileSync('ip', ['netns', 'exec', ns, '/usr/sbin/nft', '-j', 'list', 'tables'], { encoding: 'utf8' })).nftables.filter((x: any) => x.table);
  t.deepEqual(tables, [], `no nft table in the pod netns (${when})`);
  const s = await d.call('NodeStatus', {});
  t.true(s.networks.every((n: any) => n.pools.every((p: any) => Number(p.used) === 0)), `no address held (${when})`);
  t.is((await d.call('List', {})).sandboxes.length, 0, `no record (${when})`);
}

/**
 * kill -9 before each inverse of a detach, in turn, until the failpoint lies past the last one
 * (then the detach simply answers): how many inverse actions a plan has is the strategy's
 * business (a step may retire in two actions, or have none). Each round starts from a fresh
 * daemon with the sandbox attached by `attach`, and `check` runs after each repair (and after
 * the detach that answered). Resolves with the daemon, stopped, and the number of crashes.
 */
export async function crashBeforeEachDetachInverse(
  start: Daemon,
  sandboxId: string,
  attach: (d: Daemon) => Promise<void>,
  check: (d: Daemon, when: string) => Promise<void>,
): Promise<{ d: Daemon; crashes: number }> {
  let d = start;
  for (let n = 0; ; n++) {
    d = await d.restart();
    await attach(d);
    await d.stop();
    const armed = await d.restart({ KNIT_FAILPOINT: `detach:${n}` });
    try {
      d = await crashAndRestart(armed, () => armed.call('Detach', { sandbox_id: sandboxId }));
    } catch (err) {
      if (!/not killed at the failpoint \(it answered\)$/.test((err as Error).message)) throw err;
      d = await armed.restart();
      await check(d, `a detach with its failpoint past inverse ${n - 1}`);
      await d.stop();
      return { d, crashes: n };
    }
    await check(d, `crash before detach inverse ${n}`);
    await d.stop();
  }
}
