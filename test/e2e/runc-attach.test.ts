// The README's promise for runc: knit attaches two pod netns, real runc containers start in
// them, one pings its gateway and the other pod; after detach nothing of either is left.
import test from 'ava';
import { startContainer, type Container } from '../fixtures/runc.js';
import {
  startDaemon, cleanupDaemon, makeNetns, removeNetns, eventually, hostLinks, ipJson, type Daemon,
} from '../helpers/daemon.js';

const P = 'erc';
const opts = { prefix: P, subnet: '10.231.5.0/24' };
let d: Daemon | undefined;
const containers: Container[] = [];
const pods = [0, 1].map((i) => ({ ns: `${P}-pod${i}`, id: `${P}-sb${i}`, path: '' }));

test.before(async () => {
  d = await startDaemon(opts);
  for (const p of pods) p.path = makeNetns(p.ns);
});

test.after.always(async () => {
  for (const c of containers) await c.stop();
  await cleanupDaemon(d, opts, pods.map((p) => p.id));
  for (const p of pods) removeNetns(p.ns);
});

test('runc containers in knit-attached netns ping their gateway and each other; detach leaves nothing', async (t) => {
  const results: any[] = [];
  for (const p of pods) {
    results.push((await d!.call('Attach', { sandbox_id: p.id, netns_path: p.path, runtime: 'RUNC', interfaces: [{ name: 'eth0' }] })).result);
  }
  const ipOf = (i: number) => results[i].ips[0].address.split('/')[0];
  for (const [i, p] of pods.entries()) containers.push(await startContainer({ id: `${P}-c${i}-${process.pid}`, netnsPath: p.path }));

  const inside = await containers[0].exec(['ip', '-o', 'addr', 'show', 'eth0']);
  t.regex(inside.stdout, new RegExp(`inet ${ipOf(0).replace(/\./g, '\\.')}/24`), 'the container sees the address knit gave');
  const gw = await containers[0].exec(['ping', '-c', '2', '-W', '2', '10.231.5.1']);
  t.is(gw.code, 0, `ping gateway: ${gw.stdout}${gw.stderr}`);
  const peer = await containers[0].exec(['ping', '-c', '2', '-W', '2', ipOf(1)]);
  t.is(peer.code, 0, `ping the other pod: ${peer.stdout}${peer.stderr}`);

  for (const c of containers.splice(0)) await c.stop();
  for (const p of pods) await d!.call('Detach', { sandbox_id: p.id });
  await eventually(() => !hostLinks().some((l) => pods.some((p) => l.ifalias?.includes(`sandbox=${p.id};`))), 'host ends reaped');
  for (const p of pods) t.deepEqual(ipJson(['link', 'show'], p.ns).map((l: any) => l.ifname), ['lo']);
  t.is((await d!.call('List', {})).sandboxes.length, 0);
});
