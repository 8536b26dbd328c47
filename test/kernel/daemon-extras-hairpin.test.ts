// hairpin on a bridge network (the default) turns hairpin mode on for each pod's bridge port (so
// a pod can reach itself through a service address); a network with hairpin: false leaves the
// port alone. Checked with `ip -d link` and `bridge link`, not through knit.
import test from 'ava';
import { execFileSync } from 'node:child_process';
import {
  startDaemon, cleanupDaemon, removeNetns, ipJson, pingFrom, removeLinkQuietly, podFactory, type Daemon,
} from '../helpers/daemon.js';

const P = 'khp';
const PLAIN_BRIDGE = `${P}br2`;
const OFF_BRIDGE = `${P}br3`;
// config.networks replaces the harness's single network: the first says hairpin, the second
// leaves it to the default, the third turns it off.
const opts = {
  prefix: P,
  subnet: '10.234.7.0/24',
  config: {
    networks: [
      { name: `${P}net`, mode: 'bridge', bridge: `${P}br`, hairpin: true, ipv4: { subnet: '10.234.7.0/24' } },
      { name: `${P}plain`, mode: 'bridge', bridge: PLAIN_BRIDGE, ipv4: { subnet: '10.234.9.0/24' } },
      { name: `${P}off`, mode: 'bridge', bridge: OFF_BRIDGE, hairpin: false, ipv4: { subnet: '10.234.10.0/24' } },
    ],
  },
};
let d: Daemon | undefined;
const { pod, netnsNames, ids } = podFactory(P);

const attachReq = (id: string, netns: string, network: string) => ({
  sandbox_id: id, pod_name: id, pod_namespace: 'hp', pod_uid: `uid-${id}`, netns_path: netns, runtime: 'RUNC',
  interfaces: [{ name: 'eth0', network }],
});

/** Hairpin mode of a bridge port as `bridge -j -d link` reports it. */
function bridgeHairpin(dev: string): boolean {
  const ports = JSON.parse(execFileSync('bridge', ['-j', '-d', 'link', 'show', 'dev', dev], { encoding: 'utf8' }) || '[]');
  return ports[0]?.hairpin === true;
}

test.before(async () => {
  for (const b of [PLAIN_BRIDGE, OFF_BRIDGE]) removeLinkQuietly(b); // leftovers of an interrupted run
  d = await startDaemon(opts);
});

test.after.always(async () => {
  await cleanupDaemon(d, opts, ids);
  for (const b of [PLAIN_BRIDGE, OFF_BRIDGE]) removeLinkQuietly(b);
  for (const n of netnsNames) removeNetns(n);
});

test.serial('a pod on a hairpin network gets a bridge port with hairpin on', async (t) => {
  const p = pod(1);
  const { result } = await d!.call('Attach', attachReq(p.id, p.path, `${P}net`));
  const hostEnd = result.interfaces.find((i: any) => !i.sandbox).name;
  const [link] = ipJson(['link', 'show', 'dev', hostEnd]);
  t.is(link.master, `${P}br`);
  t.is(link.linkinfo.info_slave_kind, 'bridge');
  t.true(link.linkinfo.info_slave_data.hairpin, 'ip -d link: hairpin on');
  t.true(bridgeHairpin(hostEnd), 'bridge link: hairpin on');
  t.true(pingFrom(p.ns, '10.234.7.1'), 'the pod still reaches its gateway');
  await d!.call('Detach', { sandbox_id: p.id });
});

test.serial('a pod on a network that does not mention hairpin gets it on: the default', async (t) => {
  const p = pod(3);
  const { result } = await d!.call('Attach', attachReq(p.id, p.path, `${P}plain`));
  const hostEnd = result.interfaces.find((i: any) => !i.sandbox).name;
  const [link] = ipJson(['link', 'show', 'dev', hostEnd]);
  t.is(link.master, PLAIN_BRIDGE);
  t.true(link.linkinfo.info_slave_data.hairpin, 'ip -d link: hairpin on');
  t.true(bridgeHairpin(hostEnd), 'bridge link: hairpin on');
  await d!.call('Detach', { sandbox_id: p.id });
});

test.serial('a pod on a network with hairpin: false gets a bridge port with hairpin off', async (t) => {
  const p = pod(2);
  const { result } = await d!.call('Attach', attachReq(p.id, p.path, `${P}off`));
  const hostEnd = result.interfaces.find((i: any) => !i.sandbox).name;
  const [link] = ipJson(['link', 'show', 'dev', hostEnd]);
  t.is(link.master, OFF_BRIDGE);
  t.false(link.linkinfo.info_slave_data.hairpin, 'ip -d link: hairpin off');
  t.false(bridgeHairpin(hostEnd), 'bridge link: hairpin off');
  await d!.call('Detach', { sandbox_id: p.id });
});
