// A Kata pod through knit-cni: the shim is exec'd as containerd's CRI plugin execs it, with the
// pod annotations (`io.kubernetes.cri.pod-annotations`) selecting Kata tcfilter. knit makes the
// pod veth, tap0_kata and the tc redirects; a real QEMU guest (TCG) boots on that tap by name
// from the sandbox netns, as Kata's shim does, answers the node's ping and serves HTTP; the
// runtime's DEL leaves nothing in the netns or on the host.
import test from 'ava';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { Cleanup } from '../fixtures/cleanup.js';
import { GUEST_HTTP_PORT } from '../fixtures/qemu.js';
import { startDaemon, cleanupDaemon, makeNetns, removeNetns, eventually, hostLinks, pingFrom, type Daemon } from '../helpers/daemon.js';
import { ip, tc, type Json } from '../helpers/observe.js';
import { launchVm, vmHandoff } from '../helpers/vm-launcher.js';
import { uniquePrefix } from '../helpers/names.js';

const P = uniquePrefix('skat');
const SHIM = path.resolve('build', 'native', 'knit-cni');
const opts = { prefix: P, subnet: '10.185.2.0/24' };

function shim(command: string, id: string, netns: string, config: object) {
  const r = spawnSync(SHIM, [], {
    input: JSON.stringify(config),
    encoding: 'utf8',
    env: {
      PATH: process.env.PATH, CNI_COMMAND: command, CNI_CONTAINERID: id, CNI_NETNS: netns, CNI_IFNAME: 'eth0', CNI_PATH: '/usr/lib/cni',
      CNI_ARGS: `K8S_POD_NAMESPACE=default;K8S_POD_NAME=${P}kata;K8S_POD_INFRA_CONTAINER_ID=${id};K8S_POD_UID=uid-${id}`,
    },
  });
  return { code: r.status, out: r.stdout.trim() ? JSON.parse(r.stdout) : undefined, raw: r.stdout };
}

const leftovers = (ns: string, id: string) => ({
  links: ip(ns, 'link', 'show').map((l: Json) => l.ifname).filter((n: string) => n !== 'lo'),
  qdiscs: tc(ns, 'qdisc', 'show').filter((q: Json) => q.dev !== 'lo').map((q: Json) => `${q.kind} on ${q.dev}`),
  host: hostLinks().filter((l) => l.ifalias?.includes(`sandbox=${id};`)).map((l) => l.ifname),
});

test.serial('a pod whose annotations select Kata tcfilter, added by knit-cni: QEMU boots on the tap knit made, answers a ping and HTTP; DEL leaves nothing', async (t) => {
  const cleanup = new Cleanup();
  t.teardown(() => cleanup.run());
  const ns = `${P}vm`;
  const id = `${P}sandbox`;
  let d: Daemon | undefined;
  cleanup.defer('stop daemon', () => cleanupDaemon(d, opts, [id]));
  d = await startDaemon(opts);
  makeNetns(ns);
  cleanup.defer(`remove netns ${ns}`, () => removeNetns(ns));
  const conf = {
    cniVersion: '1.0.0', name: `${P}cni`, type: 'knit', network: `${P}net`,
    socket: path.join(d.dir, 'cni.sock'), deleteQueue: path.join(d.dir, 'cni-delete-queue'),
    // What containerd's CRI plugin injects for the capability.
    runtimeConfig: { 'io.kubernetes.cri.pod-annotations': { 'knit.dev/runtime': 'kata', 'knit.dev/binding': '{"mode":"tcfilter"}', 'io.kubernetes.cri.sandbox-id': id } },
  };

  const add = shim('ADD', id, `/run/netns/${ns}`, conf);
  t.is(add.code, 0, add.raw);
  const guestIp = add.out.ips[0].address.split('/')[0];
  t.regex(add.out.ips[0].address, /^10\.185\.2\.\d+\/24$/);
  // The hand-off a Kata shim reads: from knit's record (knit query), the tap it boots on.
  const q = await d.call('Query', { sandbox_id: id });
  t.is(q.sandbox.request.runtime, 'KATA');
  t.is(q.sandbox.request.pod_name, `${P}kata`);
  const { sandboxId, handoff: h } = vmHandoff(q.sandbox.result);
  t.like(h, { runtime: 'kata', model: 'tcfilter', device: 'tap', name: 'tap0_kata', netns: `/run/netns/${ns}` });
  t.is(h.guest.ips[0].address.split('/')[0], guestIp, 'the CNI result and the hand-off name one address');
  // The kernel: the tap and eth0's ingress redirect to it.
  t.true(ip(ns, 'link', 'show').some((l: Json) => l.ifname === 'tap0_kata' && l.linkinfo?.info_kind === 'tun'));
  t.true(tc(ns, 'filter', 'show', 'dev', 'eth0', 'ingress').some((f: Json) => JSON.stringify(f).includes('tap0_kata')), 'eth0 ingress redirected to tap0_kata');

  const { guest } = await launchVm({ sandboxId, ifname: 'eth0', handoff: h, by: 'name', name: `${P}g` });
  cleanup.defer('stop guest', () => guest.stop());
  await guest.waitFor(/KNIT-READY/);
  t.notRegex(guest.serial(), /KNIT-ERROR/);
  t.true([1, 2, 3, 4, 5].some(() => pingFrom(undefined, guestIp)), `the node could not ping the guest at ${guestIp}`);
  // Only the guest serves HTTP: this proves the guest, not the pod veth, answered.
  const res = await fetch(`http://${guestIp}:${GUEST_HTTP_PORT}/`, { signal: AbortSignal.timeout(10_000) });
  t.is((await res.text()).trim(), `knit-guest ${guestIp}`);

  // Kata stops the VM, then the runtime's DEL.
  await guest.stop();
  const del = shim('DEL', id, `/run/netns/${ns}`, conf);
  t.is(del.code, 0, del.raw);
  await t.throwsAsync(d.call('Query', { sandbox_id: id }));
  const nothing = { links: [], qdiscs: [], host: [] };
  await eventually(() => JSON.stringify(leftovers(ns, id)) === JSON.stringify(nothing), 'the Kata sandbox emptied').catch(() => undefined);
  t.deepEqual(leftovers(ns, id), nothing, 'no tap, veth, ingress qdisc or host end left');
  const status = await d.call('NodeStatus', {});
  t.is(Number(status.networks.find((n: Json) => n.name === `${P}net`).pools[0].used), 0, 'no address held');
});
