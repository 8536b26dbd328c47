// The README's promise for KubeVirt: a real knit daemon attaches a virt-launcher pod netns
// with runtime kubevirt, and a real QEMU guest (TCG) opens tap0 by name from inside that netns,
// as libvirt does with <target dev='tap0' managed='no'/>. Masquerade: the guest takes 10.0.2.2
// by DHCP from knit, behind k6t-eth0, and the pod IP's declared port reaches it by DNAT. Bridge: the guest owns the
// pod IP on the pod's L2 segment. Detach leaves nothing. KubeVirt's binding NAD on a pod whose
// eth0 knit-cni made (issue 34): the guest on tap0 takes eth0's address by DHCP and reaches the
// gateway and another pod. Prefixes ev3-, ev4-, ev6-; subnets 10.232.3.0/24, 10.232.4.0/24,
// 10.232.6.0/24.
import test from 'ava';
import { execFileSync, spawnSync } from 'node:child_process';
import path from 'node:path';
import { Cleanup } from '../fixtures/cleanup.js';
import { GUEST_HTTP_PORT } from '../fixtures/qemu.js';
import { startDaemon, cleanupDaemon, makeNetns, removeNetns, eventually, hostLinks, pingFrom, CLI, type Daemon } from '../helpers/daemon.js';
import { ip, tunOwner, type Json } from '../helpers/observe.js';
import { launchVm, vmHandoff } from '../helpers/vm-launcher.js';
import { knitShimConf } from '../helpers/cni.js';

/** nft(8) by absolute path: under npm, PATH starts with node_modules/.bin, where an unrelated
 * `nft` lives. */
const NFT = '/usr/sbin/nft';

function nftRuleset(ns: string): Json[] {
  return JSON.parse(execFileSync('ip', ['netns', 'exec', ns, NFT, '-j', 'list', 'ruleset'], { encoding: 'utf8' })).nftables;
}

async function httpGet(addr: string): Promise<string> {
  const res = await fetch(`http://${addr}:${GUEST_HTTP_PORT}/`, { signal: AbortSignal.timeout(10_000) });
  return (await res.text()).trim();
}

function hostPings(addr: string): boolean {
  for (let i = 0; i < 5; i++) if (pingFrom(undefined, addr)) return true;
  return false;
}

/** Links, nft tables and host links of the sandbox that are still there. */
function leftovers(ns: string, sandboxId: string): { links: string[]; nft: string[]; host: string[] } {
  return {
    links: ip(ns, 'link', 'show').map((l: Json) => l.ifname).filter((n: string) => n !== 'lo'),
    nft: nftRuleset(ns).filter((x) => x.table).map((x) => `${x.table.family} ${x.table.name}`),
    host: hostLinks().filter((l) => l.ifalias?.includes(`sandbox=${sandboxId};`)).map((l) => l.ifname),
  };
}
const nothingLeft = { links: [], nft: [], host: [] };

async function setup(t: { teardown(fn: () => Promise<void>): void }, prefix: string, subnet: string) {
  const cleanup = new Cleanup();
  t.teardown(() => cleanup.run());
  const opts = { prefix, subnet };
  const sb = { ns: `${prefix}-vm`, id: `${prefix}-vm`, path: `/run/netns/${prefix}-vm` };
  let d: Daemon | undefined;
  cleanup.defer(`stop daemon ${prefix}`, () => cleanupDaemon(d, opts, [sb.id]));
  d = await startDaemon(opts);
  makeNetns(sb.ns);
  cleanup.defer(`remove netns ${sb.ns}`, () => removeNetns(sb.ns));
  return { cleanup, d, sb };
}

test.serial('kubevirt masquerade: the guest is 10.0.2.2 behind k6t-eth0; HTTP to the pod IP port 8080 reaches it by DNAT; detach leaves nothing', async (t) => {
  const { cleanup, d, sb } = await setup(t, 'ev3', '10.232.3.0/24');
  // As the README shows it: `knit attach --runtime kubevirt ... --json`.
  const cli = JSON.parse(execFileSync(process.execPath, [
    CLI, 'attach', '--socket', d.socket, '--id', sb.id, '--netns', sb.path,
    '--runtime', 'kubevirt', '--if', 'eth0,binding.binding=masquerade,binding.ports=tcp:8080', '--json',
  ], { encoding: 'utf8' }));
  const podIp = cli.ips[0].address.split('/')[0];
  t.regex(cli.ips[0].address, /^10\.232\.3\.\d+\/24$/);
  const { sandboxId, handoff: h } = vmHandoff(cli);
  t.like(h, { runtime: 'kubevirt', model: 'masquerade', device: 'tap', name: 'tap0', netns: sb.path, queues: 1, owner: 107, group: 107, podIpsOn: 'pod', bridge: 'k6t-eth0' });
  t.deepEqual(h.guest.ips, [{ address: '10.0.2.2/24', family: 4, gateway: '10.0.2.1' }]);
  t.deepEqual(h.guest.routes, [{ dst: '0.0.0.0/0', gateway: '10.0.2.1' }]);
  t.is((h.libvirt as { target: string }).target, "<target dev='tap0' managed='no'/>");

  // Independent observers: the pod keeps its IP on eth0; tap0 (owned by uid 107) is a port of
  // k6t-eth0, which holds 10.0.2.1; knit's nat table DNATs tcp/8080 to the guest.
  t.true(ip(sb.ns, 'addr', 'show', 'dev', 'eth0')[0].addr_info.some((a: Json) => a.local === podIp));
  const [tap] = ip(sb.ns, 'link', 'show', 'dev', 'tap0');
  t.is(tap.master, 'k6t-eth0');
  t.like(tap.linkinfo.info_data, { type: 'tap' });
  t.deepEqual(tunOwner(sb.ns, 'tap0'), { user: 107, group: 107 });
  t.true(ip(sb.ns, 'addr', 'show', 'dev', 'k6t-eth0')[0].addr_info.some((a: Json) => a.local === '10.0.2.1' && a.prefixlen === 24));
  const ruleset = nftRuleset(sb.ns);
  t.deepEqual(ruleset.filter((x) => x.table).map((x) => `${x.table.family} ${x.table.name}`), ['ip nat']);
  const dnat = ruleset.filter((x) => x.rule?.chain === 'KUBEVIRT_PREINBOUND').map((x) => JSON.stringify(x.rule.expr));
  t.is(dnat.length, 1);
  t.regex(dnat[0], /"dport".*8080.*"dnat":\{"addr":"10\.0\.2\.2"/);

  const started = Date.now();
  // libvirt opens the tap by name (managed='no'): so does this launcher.
  // The guest asks DHCP, as a KubeVirt guest does; knit answers on tap0 as virt-launcher's server would.
  const { guest } = await launchVm({ sandboxId, ifname: 'eth0', handoff: h, by: 'name', name: 'ev3', ping: ['10.232.3.1'], dhcp: true });
  cleanup.defer('stop guest ev3', () => guest.stop());
  await guest.waitFor(/KNIT-READY/);
  t.log(`launch to KNIT-READY: ${Date.now() - started} ms`);
  t.regex(guest.serial(), new RegExp(`KNIT-DHCP eth0 mac=${h.mac} ip=10\\.0\\.2\\.2/24 router=10\\.0\\.2\\.1 mtu=${h.mtu} `));
  t.notRegex(guest.serial(), /KNIT-ERROR/);

  // From the host, the pod IP's port 8080 is the guest's httpd (it names its own address).
  t.is(await httpGet(podIp), 'knit-guest 10.0.2.2');
  // The guest reaches the host through the masquerade (its source rewritten to the pod IP).
  const [, verdict] = (await guest.waitFor(/KNIT-PING-(OK|FAIL) /)) as RegExpMatchArray;
  t.is(verdict, 'OK', `guest could not ping the host gateway:\n${guest.serial().slice(-1500)}`);
  t.log(`launch to HTTP and ping answered: ${Date.now() - started} ms`);
  const counted = nftRuleset(sb.ns).find((x) => x.rule?.chain === 'KUBEVIRT_PREINBOUND').rule.expr.find((e: Json) => e.counter).counter;
  t.true(counted.packets >= 1, 'the DNAT rule counted the HTTP connection');

  await guest.stop();
  await d.call('Detach', { sandbox_id: sandboxId });
  await eventually(() => JSON.stringify(leftovers(sb.ns, sandboxId)) === JSON.stringify(nothingLeft) || undefined, 'sandbox emptied').catch(() => undefined);
  t.deepEqual(leftovers(sb.ns, sandboxId), nothingLeft, 'no nft table, k6t-eth0, tap0 or veth left');
});

test.serial('kubevirt bridge: the guest owns the pod IP on the pod L2 segment; the host pings it and reaches its httpd; detach leaves nothing', async (t) => {
  const { cleanup, d, sb } = await setup(t, 'ev4', '10.232.4.0/24');
  const res = (await d.call('Attach', {
    sandbox_id: sb.id, netns_path: sb.path, runtime: 'KUBEVIRT', interfaces: [{ name: 'eth0', binding: { binding: 'bridge' } }],
  })).result;
  const podIp = res.ips[0].address.split('/')[0];
  const { sandboxId, handoff: h } = vmHandoff(res);
  t.like(h, { model: 'bridge', name: 'tap0', podIpsOn: 'guest', bridge: 'k6t-eth0' });
  t.deepEqual(h.guest.ips, [{ address: res.ips[0].address, family: 4, gateway: '10.232.4.1' }]);
  // Nothing in the pod netns holds the pod IP: whatever answers on it is the guest.
  t.false(JSON.stringify(ip(sb.ns, 'addr', 'show')).includes(`"${podIp}"`));
  t.is(ip(sb.ns, 'link', 'show', 'dev', 'eth0-nic')[0].master, 'k6t-eth0');
  t.is(ip(sb.ns, 'link', 'show', 'dev', 'tap0')[0].master, 'k6t-eth0');

  const started = Date.now();
  const { guest } = await launchVm({ sandboxId, ifname: 'eth0', handoff: h, by: 'name', name: 'ev4', ping: ['10.232.4.1'] });
  cleanup.defer('stop guest ev4', () => guest.stop());
  await guest.waitFor(/KNIT-READY/);
  t.log(`launch to KNIT-READY: ${Date.now() - started} ms`);
  t.regex(guest.serial(), new RegExp(`KNIT-LINK eth0 mac=${h.mac} mtu=${h.mtu}`));
  t.true(hostPings(podIp), `host could not ping the guest at ${podIp}`);
  t.is(await httpGet(podIp), `knit-guest ${podIp}`);
  // The host learnt the pod IP at the guest NIC's MAC.
  const [neigh] = ip(undefined, 'neigh', 'show', 'to', podIp, 'dev', d.bridge);
  t.is(neigh?.lladdr, h.mac);
  const [, verdict] = (await guest.waitFor(/KNIT-PING-(OK|FAIL) /)) as RegExpMatchArray;
  t.is(verdict, 'OK', `guest could not ping its gateway:\n${guest.serial().slice(-1500)}`);
  t.log(`launch to pings answered: ${Date.now() - started} ms`);

  await guest.stop();
  await d.call('Detach', { sandbox_id: sandboxId });
  await eventually(() => JSON.stringify(leftovers(sb.ns, sandboxId)) === JSON.stringify(nothingLeft) || undefined, 'sandbox emptied').catch(() => undefined);
  t.deepEqual(leftovers(sb.ns, sandboxId), nothingLeft, 'no k6t-eth0, tap0 or eth0-nic left');
});

test.serial('kubevirt binding NAD on knit\'s own eth0 (a runc pod, as deploy/ ships it): the guest on tap0 takes eth0\'s address by DHCP and reaches its gateway and another pod; DEL net1, then eth0, leave nothing', async (t) => {
  const { cleanup, d, sb } = await setup(t, 'ev6', '10.232.6.0/24');
  const other = { ns: 'ev6-pod', id: 'ev6-pod', path: '/run/netns/ev6-pod' };
  makeNetns(other.ns);
  cleanup.defer(`remove netns ${other.ns}`, () => removeNetns(other.ns));
  const otherIp = (await d.call('Attach', { sandbox_id: other.id, netns_path: other.path, runtime: 'RUNC', interfaces: [{ name: 'eth0' }] })).result.ips[0].address.split('/')[0];
  cleanup.defer('detach the other pod', () => d.call('Detach', { sandbox_id: other.id }));

  // The kubelet's ADD (the node's conflist), then Multus's with the binding's NAD and logicNetworkName.
  const shim = (command: string, ifname: string, config: object) => {
    const r = spawnSync(path.resolve('build', 'native', 'knit-cni'), [], {
      input: JSON.stringify(config), encoding: 'utf8',
      env: {
        PATH: process.env.PATH, CNI_COMMAND: command, CNI_CONTAINERID: sb.id, CNI_NETNS: sb.path, CNI_IFNAME: ifname, CNI_PATH: '/usr/lib/cni',
        CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=virt-launcher-ev6;K8S_POD_INFRA_CONTAINER_ID=${sb.id}`,
      },
    });
    t.is(r.status, 0, `knit-cni ${command} ${ifname}: ${r.stdout}`);
    return r.stdout.trim() ? JSON.parse(r.stdout) : undefined;
  };
  const nodeConf = knitShimConf('ev6', d.dir);
  const nadConf = { cniVersion: '1.0.0', name: 'knit-tap-binding', type: 'knit', args: { cni: { logicNetworkName: 'default' } }, socket: nodeConf.socket };
  const podIp = shim('ADD', 'eth0', nodeConf).ips[0].address.split('/')[0];
  t.deepEqual(shim('ADD', 'net1', nadConf).interfaces, [{ name: 'tap0', sandbox: sb.path }]);
  const eth0 = ip(sb.ns, 'link', 'show', 'dev', 'eth0')[0];
  const q = await d.call('Query', { sandbox_id: sb.id });
  const { sandboxId, handoff: h } = vmHandoff({ sandbox_id: sb.id, interfaces: q.sandbox.result.interfaces.filter((i: Json) => i.name === 'tap0') });
  t.like(h, { model: 'tap', name: 'tap0', mac: eth0.address, mtu: eth0.mtu, owner: 107, group: 107 });
  t.deepEqual(tunOwner(sb.ns, 'tap0'), { user: 107, group: 107 });

  // The guest on tap0, by name as libvirt opens it, asks DHCP as a KubeVirt guest does.
  const { guest } = await launchVm({ sandboxId, ifname: 'net1', handoff: h, by: 'name', name: 'ev6', ping: ['10.232.6.1', otherIp], dhcp: true });
  cleanup.defer('stop guest ev6', () => guest.stop());
  await guest.waitFor(/KNIT-READY/);
  t.regex(guest.serial(), new RegExp(`KNIT-DHCP eth0 mac=${eth0.address} ip=${podIp.replace(/\./g, '\\.')}/24 router=10\\.232\\.6\\.1 mtu=${eth0.mtu} `));
  for (const addr of ['10.232.6.1', otherIp]) {
    const [, verdict] = (await guest.waitFor(new RegExp(`KNIT-PING-(OK|FAIL) ${addr.replace(/\./g, '\\.')}`))) as RegExpMatchArray;
    t.is(verdict, 'OK', `the guest could not ping ${addr}:\n${guest.serial().slice(-1500)}`);
  }
  // eth0's address is the guest's now: what answers the other pod there is the guest's httpd.
  t.true([1, 2, 3, 4, 5].some(() => pingFrom(other.ns, podIp)), 'the other pod pings the guest');

  await guest.stop();
  shim('DEL', 'net1', nadConf);
  await eventually(() => !ip(sb.ns, 'link', 'show').some((l: Json) => l.ifname === 'tap0') || undefined, 'tap0 removed').catch(() => undefined);
  t.deepEqual(ip(sb.ns, 'link', 'show').map((l: Json) => l.ifname).sort(), ['eth0', 'lo'], 'DEL net1 takes only the tap');
  t.true(pingFrom(sb.ns, '10.232.6.1'), 'eth0 carries the pod again');
  shim('DEL', 'eth0', nodeConf);
  await eventually(() => JSON.stringify(leftovers(sb.ns, sb.id)) === JSON.stringify(nothingLeft) || undefined, 'sandbox emptied').catch(() => undefined);
  t.deepEqual(leftovers(sb.ns, sb.id), nothingLeft, 'no tap0, eth0 or host end left');
});
