// Host ports reach VM guests: a real daemon attaches a KubeVirt masquerade pod and a Kata
// tcfilter sandbox with port_mappings, a real QEMU guest (TCG) serves HTTP, and a client in a
// netns wired to the node, the node itself and 127.0.0.1 get the guest's answer through the
// host port (KubeVirt: knit's host DNAT to the pod IP, then the pod's masquerade NAT to the
// guest; Kata: the guest holds the pod IP behind tc redirects). Detach leaves no host-port table.
import test, { type ExecutionContext } from 'ava';
import { execFileSync } from 'node:child_process';
import { Cleanup } from '../fixtures/cleanup.js';
import { GUEST_HTTP_PORT } from '../fixtures/qemu.js';
import { startDaemon, cleanupDaemon, makeNetns, removeNetns, type Daemon } from '../helpers/daemon.js';
import { forward, remoteClient } from '../helpers/host-port-traffic.js';
import { launchVm, vmHandoff, SYSTEM_PYTHON } from '../helpers/vm-launcher.js';

const HP = 18380;
const tables = (instance: string) =>
  (JSON.parse(execFileSync('/usr/sbin/nft', ['-j', 'list', 'tables'], { encoding: 'utf8' })).nftables as any[])
    .filter((x) => x.table?.name.startsWith(`hostports-${instance}-`)).map((x) => x.table.name as string);

/** The guest's httpd answer, fetched from netns `ns` (undefined: the node). */
function httpGet(ns: string | undefined, host: string): string {
  const argv = [SYSTEM_PYTHON, '-c', `import urllib.request;print(urllib.request.urlopen("http://${host}:${HP}/",timeout=15).read().decode().strip())`];
  const [cmd, ...args] = ns ? ['ip', 'netns', 'exec', ns, ...argv] : argv;
  return execFileSync(cmd, args, { encoding: 'utf8' }).trim();
}

async function guestBehindHostPort(t: ExecutionContext, o: { prefix: string; subnet: string; net4: string; runtime: 'KUBEVIRT' | 'KATA'; binding: Record<string, string> }) {
  const cleanup = new Cleanup();
  t.teardown(() => cleanup.run());
  const opts = { prefix: o.prefix, subnet: o.subnet };
  const sb = { ns: `${o.prefix}-vm`, id: `${o.prefix}-vm`, path: `/run/netns/${o.prefix}-vm` };
  let d: Daemon | undefined;
  cleanup.defer(`stop daemon ${o.prefix}`, async () => {
    await cleanupDaemon(d, opts, [sb.id]);
    for (const table of tables(`knit-${o.prefix}`)) execFileSync('/usr/sbin/nft', ['delete', 'table', 'inet', table]);
  });
  d = await startDaemon(opts);
  makeNetns(sb.ns);
  cleanup.defer(`remove netns ${sb.ns}`, () => removeNetns(sb.ns));
  const remote = remoteClient(o.prefix, o.net4, `fd00:181:${o.net4.split('.')[2]}::`);
  cleanup.defer('remove the client netns', () => remote.remove());
  forward(d.bridge);

  const res = (await d.call('Attach', {
    sandbox_id: sb.id, netns_path: sb.path, runtime: o.runtime, interfaces: [{ name: 'eth0', binding: o.binding }],
    port_mappings: [{ protocol: 'TCP', container_port: GUEST_HTTP_PORT, host_port: HP }],
  })).result;
  const { sandboxId, handoff: h } = vmHandoff(res);
  t.is(tables(`knit-${o.prefix}`).length, 1, 'a host-port table');
  const guestIp = h.guest.ips[0].address.split('/')[0];

  const { guest } = await launchVm({ sandboxId, ifname: 'eth0', handoff: h, by: 'name', name: o.prefix, ping: [] });
  cleanup.defer(`stop guest ${o.prefix}`, () => guest.stop());
  await guest.waitFor(/KNIT-READY/);
  t.notRegex(guest.serial(), /KNIT-ERROR/);

  const answer = `knit-guest ${guestIp}`;
  t.is(httpGet(remote.ns, remote.node4), answer, 'from another machine');
  t.is(httpGet(undefined, remote.node4), answer, 'from the node');
  t.is(httpGet(undefined, '127.0.0.1'), answer, 'from 127.0.0.1');

  await guest.stop();
  await d.call('Detach', { sandbox_id: sandboxId });
  t.deepEqual(tables(`knit-${o.prefix}`), [], 'no host-port table after detach');
}

test.serial('kubevirt masquerade: the host port reaches the guest behind the pod\'s NAT', (t) =>
  guestBehindHostPort(t, { prefix: 'hhpk', subnet: '10.181.6.0/24', net4: '10.181.13', runtime: 'KUBEVIRT', binding: { binding: 'masquerade' } }));

test.serial('kata tcfilter: the host port reaches the guest that holds the pod IP', (t) =>
  guestBehindHostPort(t, { prefix: 'hhpt', subnet: '10.181.7.0/24', net4: '10.181.14', runtime: 'KATA', binding: { mode: 'tcfilter' } }));
