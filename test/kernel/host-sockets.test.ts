// The daemon's host netlink sockets (src/daemon/action-runner.ts): a host batch must not
// queue behind another that holds a socket (the reaper's bulk delete holds one for an RCU
// grace period), so it takes an idle socket.
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { DaemonActionRunner } from '../../src/daemon/action-runner.js';
import { link } from '../helpers/observe.js';
import { makeNetns, uniquePrefix } from '../helpers/names.js';

test('a quick host batch answers while a slow one holds another host socket', async (t) => {
  const p = uniquePrefix('khs');
  const pod = makeNetns(t, p, 'x');
  const hostEnd = `${p}h`;
  t.teardown(() => {
    try {
      execFileSync('ip', ['link', 'del', hostEnd], { stdio: 'ignore' });
    } catch {
      // not made, or gone with its pod netns
    }
  });
  const runner = new DaemonActionRunner();
  t.teardown(() => runner.close());

  const answered: string[] = [];
  // A veth create with its peer in another netns runs on a pool thread and takes milliseconds.
  const slow = runner.runOps(undefined, [{ op: 'link.add', kind: 'veth', name: hostEnd, peer: { name: `${p}x`, netns: pod.path } }]).then((r) => {
    answered.push('veth create');
    return r;
  });
  const quick = runner.runOps(undefined, [{ op: 'link.get', link: 'lo' }]).then((r) => {
    answered.push('lo lookup');
    return r;
  });
  const [[created], [lo]] = await Promise.all([slow, quick]);
  t.deepEqual(answered, ['lo lookup', 'veth create'], 'the lookup did not wait for the create');
  t.is(lo.link.name, 'lo');
  t.is(link(undefined, hostEnd)?.ifindex, created.index, 'the create took effect (ip -j link)');
  t.truthy(link(pod.name, `${p}x`), 'its peer is in the pod netns');
});
