// Kata macvtap pods side by side: each macvtap's character device /dev/tap<ifindex> must be its
// own. The node is named host-wide after an ifindex that is unique only inside one netns, so
// two pods' macvtaps made with the kernel's own pick (the same small index in each fresh netns)
// share one name, and the kernel makes the node for the first only: a launcher opening it for
// the second pod would reach the first pod's device. knit picks the index (8192 up, as Kata's
// Go runtime does), and the test checks with stat(1) and each netns's sysfs that every node is
// there and belongs to its own macvtap.
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cleanupDaemon, eventually, ipJson, podFactory, startDaemon, type Daemon } from '../helpers/daemon.js';
import { uniquePrefix } from '../helpers/names.js';

const P = uniquePrefix('kmvt').slice(0, -1);
const opts = { prefix: P, subnet: '10.188.10.0/24' };
const pods = podFactory(P);
let d: Daemon | undefined;

test.after.always(async () => {
  await cleanupDaemon(d, opts, pods.ids);
  pods.removeAll();
});

/** major:minor of a device node, as stat(1) prints them (hex), in sysfs's decimal form. */
function nodeNumbers(path: string): string {
  const [major, minor] = execFileSync('stat', ['-c', '%t:%T', path], { encoding: 'utf8' }).trim().split(':');
  return `${parseInt(major, 16)}:${parseInt(minor, 16)}`;
}

test.serial("two Kata macvtap pods: each macvtap has an ifindex of its own from 8192 up, and /dev/tap<ifindex> is that macvtap's node", async (t) => {
  d = await startDaemon(opts);
  const made: { pod: { ns: string; path: string; id: string }; index: number }[] = [];
  for (const n of [1, 2]) {
    const pod = pods.pod(n);
    await d.call('Attach', {
      sandbox_id: pod.id, netns_path: pod.path, runtime: 'KATA', interfaces: [{ name: 'eth0', binding: { mode: 'macvtap' } }],
    });
    const [mv] = ipJson(['link', 'show', 'tap0_kata'], pod.ns);
    made.push({ pod, index: mv.ifindex as number });
  }
  const [a, b] = made;
  t.true(a.index >= 8192 && b.index >= 8192, `ifindexes ${a.index}, ${b.index}`);
  t.not(a.index, b.index);
  for (const { pod, index } of made) {
    t.true(existsSync(`/dev/tap${index}`), `/dev/tap${index} exists`);
    const own = execFileSync('ip', ['netns', 'exec', pod.ns, 'cat', `/sys/class/net/tap0_kata/macvtap/tap${index}/dev`], { encoding: 'utf8' }).trim();
    t.is(nodeNumbers(`/dev/tap${index}`), own, `/dev/tap${index} is ${pod.ns}'s macvtap`);
  }
  // The hand-off tells the launcher which node: its ifindex is the device's.
  const handoff = (await d.call('Query', { sandbox_id: a.pod.id })).sandbox.result.interfaces.find((i: { kind: string }) => i.kind === 'macvtap');
  t.truthy(handoff, 'the macvtap is in the result');

  for (const { pod } of made) await d.call('Detach', { sandbox_id: pod.id });
  await eventually(() => made.every(({ index }) => !existsSync(`/dev/tap${index}`)), 'the nodes go with the macvtaps');
});
