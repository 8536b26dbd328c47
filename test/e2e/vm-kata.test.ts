// The README's promise for Kata: a real knit daemon attaches a sandbox with runtime kata
// (tcfilter: pod veth + tap0_kata + tc redirects), and a real QEMU guest (TCG) boots on that
// tap the way Kata's shim would — by name from inside the sandbox netns, or with the queue fds
// knit's hand-off socket sends — and talks to the host and to a runc pod on the same network.
// Detach leaves nothing. The macvtap model too: QEMU takes the macvtap's character device,
// opened once per queue as Kata's Go runtime opens it. Prefixes ev1-, ev2-, ev5-; subnets
// 10.232.1.0/24, 10.232.2.0/24, 10.232.5.0/24.
import test, { type ExecutionContext } from 'ava';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { Cleanup } from '../fixtures/cleanup.js';
import { startContainer, type Container } from '../fixtures/runc.js';
import { GUEST_HTTP_PORT, type Guest } from '../fixtures/qemu.js';
import { startDaemon, cleanupDaemon, makeNetns, removeNetns, eventually, hostLinks, pingFrom, CLI, type Daemon } from '../helpers/daemon.js';
import { ip, tc, type Json } from '../helpers/observe.js';
import { charDevNumbers, launchVm, type LaunchOptions, requestTapFds, vmHandoff, PYTHON_FD_CLIENT, SYSTEM_PYTHON } from '../helpers/vm-launcher.js';

/** The guest answers once /init has configured it; allow a few lost first packets. */
function hostPings(addr: string): boolean {
  for (let i = 0; i < 5; i++) if (pingFrom(undefined, addr)) return true;
  return false;
}

/** Tap names QEMU's open /dev/net/tun fds are attached to, per the kernel (fdinfo "iff:"). */
function tapsHeldBy(pid: number): string[] {
  const out: string[] = [];
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`) !== '/dev/net/tun') continue;
      const m = /^iff:\s*(\S+)/m.exec(readFileSync(`/proc/${pid}/fdinfo/${fd}`, 'utf8'));
      if (m) out.push(m[1]);
    } catch {
      /* fd closed meanwhile */
    }
  }
  return out.sort();
}

async function guestHttp(addr: string): Promise<string> {
  const res = await fetch(`http://${addr}:${GUEST_HTTP_PORT}/`, { signal: AbortSignal.timeout(10_000) });
  return (await res.text()).trim();
}

const qemuArgv = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');

/** What is left of a sandbox: links and non-lo qdiscs in its netns, host links tagged with it. */
function leftovers(ns: string, sandboxIds: string[]): { links: string[]; qdiscs: string[]; host: string[] } {
  return {
    links: ip(ns, 'link', 'show').map((l: Json) => l.ifname).filter((n: string) => n !== 'lo'),
    qdiscs: tc(ns, 'qdisc', 'show').filter((q: Json) => q.dev !== 'lo').map((q: Json) => `${q.kind} on ${q.dev}`),
    host: hostLinks().filter((l) => sandboxIds.some((id) => l.ifalias?.includes(`sandbox=${id};`))).map((l) => l.ifname),
  };
}

const nothingLeft = { links: [], qdiscs: [], host: [] };

/** A daemon on `subnet`, the VM sandbox's netns, and a runc pod with a real container on the same
 * network; teardown removes them all. */
interface Sandbox { ns: string; id: string }

async function daemonAndPod(t: ExecutionContext, prefix: string, subnet: string) {
  const cleanup = new Cleanup();
  t.teardown(() => cleanup.run());
  const opts = { prefix, subnet };
  const vm: Sandbox = { ns: `${prefix}-vm`, id: `${prefix}-vm` };
  const pod: Sandbox = { ns: `${prefix}-pod`, id: `${prefix}-pod` };
  let d: Daemon | undefined;
  cleanup.defer(`stop daemon ${prefix}`, () => cleanupDaemon(d, opts, [vm.id, pod.id]));
  d = await startDaemon(opts);
  for (const s of [vm, pod]) {
    makeNetns(s.ns);
    cleanup.defer(`remove netns ${s.ns}`, () => removeNetns(s.ns));
  }
  const podRes = (await d.call('Attach', { sandbox_id: pod.id, netns_path: `/run/netns/${pod.ns}`, runtime: 'RUNC', interfaces: [{ name: 'eth0' }] })).result;
  const podIp: string = podRes.ips[0].address.split('/')[0];
  const container = await startContainer({ id: `${prefix}-c-${process.pid}`, netnsPath: `/run/netns/${pod.ns}` });
  cleanup.defer('stop container', () => container.stop());
  return { cleanup, d, vm, pod, podIp, container };
}

/** Boots the guest as the shim would; resolves once /init has configured the NIC with the
 * hand-off's MAC and MTU. */
async function bootUntilReady(t: ExecutionContext, cleanup: Cleanup, o: LaunchOptions): Promise<Guest> {
  const started = Date.now();
  const { guest } = await launchVm(o);
  cleanup.defer(`stop guest ${o.name}`, () => guest.stop());
  await guest.waitFor(/KNIT-READY/);
  t.log(`launch to KNIT-READY: ${Date.now() - started} ms`);
  t.regex(guest.serial(), new RegExp(`KNIT-LINK eth0 mac=${o.handoff.mac} mtu=${o.handoff.mtu}`));
  t.notRegex(guest.serial(), /KNIT-ERROR/);
  return guest;
}

/** The guest's pings to the runc pod (its serial says) and the pod's HTTP GET to the guest's httpd. */
async function guestAndPodTalk(t: ExecutionContext, guest: Guest, container: Container, guestIp: string, podIp: string): Promise<void> {
  const [, verdict] = (await guest.waitFor(/KNIT-PING-(OK|FAIL) /)) as RegExpMatchArray;
  t.is(verdict, 'OK', `guest could not ping runc pod ${podIp}:\n${guest.serial().slice(-1500)}`);
  // nc, not wget: busybox wget exits with SIGSEGV in the bare container rootfs (static glibc
  // without NSS files, we believe).
  const fromPod = await container.exec(['sh', '-c', `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 5 ${guestIp} ${GUEST_HTTP_PORT}`]);
  t.regex(fromPod.stdout, new RegExp(`\\r\\n\\r\\nknit-guest ${guestIp.replace(/\./g, '\\.')}\\n$`), `runc pod could not reach the guest's httpd: code ${fromPod.code} ${fromPod.stderr}`);
}

/** The shim stops the VM and the runtime detaches; the pod goes away too. Nothing of either is
 * left: no tap or macvtap, veth, ingress qdisc or host end. */
async function stopAndDetach(t: ExecutionContext, s: { d: Daemon; guest: Guest; container: Container; vm: Sandbox; pod: Sandbox }): Promise<void> {
  const { vm, pod } = s;
  await s.guest.stop();
  await s.container.stop();
  for (const sb of [vm, pod]) await s.d.call('Detach', { sandbox_id: sb.id });
  await eventually(() => JSON.stringify(leftovers(vm.ns, [vm.id, pod.id])) === JSON.stringify(nothingLeft) || undefined, 'VM sandbox emptied').catch(() => undefined);
  t.deepEqual(leftovers(vm.ns, [vm.id, pod.id]), nothingLeft, 'nothing of the VM sandbox');
  t.deepEqual(leftovers(pod.ns, [pod.id]), nothingLeft, 'nothing of the runc pod');
}

test.serial('kata tcfilter, tap by name: QEMU in the sandbox netns on tap0_kata; host pings the guest, the guest pings a runc pod; detach leaves nothing', async (t) => {
  // B: a runc pod on the same network, with a real container in it.
  const { cleanup, d, vm, pod, podIp, container } = await daemonAndPod(t, 'ev1', '10.232.1.0/24');

  // A, exactly as the README shows it: `knit attach --runtime kata ... --json`.
  const cli = execFileSync(process.execPath, [
    CLI, 'attach', '--socket', d.socket, '--id', vm.id, '--netns', `/run/netns/${vm.ns}`,
    '--runtime', 'kata', '--if', 'eth0,binding.mode=tcfilter', '--json',
  ], { encoding: 'utf8' });
  const { sandboxId, handoff: h } = vmHandoff(JSON.parse(cli));
  t.like(h, { runtime: 'kata', model: 'tcfilter', device: 'tap', name: 'tap0_kata', netns: `/run/netns/${vm.ns}`, queues: 1, flags: 'IFF_TAP|IFF_NO_PI|IFF_VNET_HDR', persist: true });
  const guestIp = h.guest.ips[0].address.split('/')[0];
  t.regex(h.guest.ips[0].address, /^10\.232\.1\.\d+\/24$/);
  t.deepEqual(h.guest.routes.find((r) => r.dst === '0.0.0.0/0'), { dst: '0.0.0.0/0', gateway: '10.232.1.1' });
  // The guest takes the pod veth's MAC (the network behind the veth expects it).
  t.is(ip(vm.ns, 'link', 'show', 'dev', 'eth0')[0].address, h.mac);

  const started = Date.now();
  const guest = await bootUntilReady(t, cleanup, { sandboxId, ifname: 'eth0', handoff: h, by: 'name', name: 'ev1', ping: [podIp] });
  // Independent observers: QEMU was told the name only, and the kernel says its fd is on the tap.
  t.true(qemuArgv(guest.pid).some((a) => a.startsWith(`tap,id=n0,ifname=${h.name},`)));
  t.deepEqual(tapsHeldBy(guest.pid), [h.name]);

  t.true(hostPings(guestIp), `host could not ping the guest at ${guestIp}`);
  // The pod veth holds the same address: only the guest serves HTTP, so this proves who answered.
  t.is(await guestHttp(guestIp), `knit-guest ${guestIp}`);
  await guestAndPodTalk(t, guest, container, guestIp, podIp);
  t.log(`launch to all pings answered: ${Date.now() - started} ms`);

  await stopAndDetach(t, { d, guest, container, vm, pod });
});

/** Runs the Python hand-off client as `uid` (with just enough privilege to reach the 0600
 * socket, so that knit's own peer-uid check is what answers). */
function pythonRequest(socket: string, req: object, uid?: number): { reply: { ok: boolean; error?: string }; iff: (string | null)[] } {
  const py = [SYSTEM_PYTHON, '-c', PYTHON_FD_CLIENT, socket, JSON.stringify(req)];
  const argv = uid === undefined ? py : ['setpriv', `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--inh-caps=+dac_override', '--ambient-caps=+dac_override', ...py];
  const r = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', timeout: 10_000 });
  if (r.status !== 0) throw new Error(`${argv.join(' ')} exited ${r.status}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

test.serial('kata tcfilter, tap by fd: two queue fds from the hand-off socket boot QEMU; wrong, reused and foreign-uid requests get no fd', async (t) => {
  const cleanup = new Cleanup();
  t.teardown(() => cleanup.run());
  const opts = { prefix: 'ev2', subnet: '10.232.2.0/24' };
  const vm = { ns: 'ev2-vm', id: 'ev2-vm' };
  let d: Daemon | undefined;
  cleanup.defer('stop daemon ev2', () => cleanupDaemon(d, opts, [vm.id]));
  d = await startDaemon(opts);
  makeNetns(vm.ns);
  cleanup.defer(`remove netns ${vm.ns}`, () => removeNetns(vm.ns));

  const res = (await d.call('Attach', {
    sandbox_id: vm.id, netns_path: `/run/netns/${vm.ns}`, runtime: 'KATA',
    interfaces: [{ name: 'eth0', binding: { mode: 'tcfilter', queues: '2' } }],
  })).result;
  const { sandboxId, handoff: h } = vmHandoff(res);
  t.like(h, { name: 'tap0_kata', queues: 2, flags: 'IFF_TAP|IFF_NO_PI|IFF_VNET_HDR|IFF_MULTI_QUEUE', fdSocket: `${d.dir}/handoff.sock` });
  t.regex(h.token!, /^[0-9a-f]{48}$/);
  const guestIp = h.guest.ips[0].address.split('/')[0];
  const req = (token: string) => ({ sandbox_id: sandboxId, interface: 'eth0', token });

  // A wrong token: an error line, no fd, and the real token still works afterwards.
  const wrong = pythonRequest(h.fdSocket!, req('00'.repeat(24)));
  t.false(wrong.reply.ok);
  t.regex(wrong.reply.error!, /no valid token for sandbox ev2-vm interface eth0/);
  t.deepEqual(wrong.iff, []);
  // A uid the daemon does not allow (allowedUids defaults to [0]) is refused before it asks.
  const foreign = pythonRequest(h.fdSocket!, req(h.token!), 65534);
  t.deepEqual(foreign, { reply: { ok: false, error: 'uid 65534 may not take tap fds' }, iff: [] });

  const started = Date.now();
  const { guest, fdReply } = await launchVm({ sandboxId, ifname: 'eth0', handoff: h, by: 'fd', name: 'ev2' });
  cleanup.defer('stop guest ev2', () => guest.stop());
  t.deepEqual(fdReply, { ok: true, name: 'tap0_kata', queues: 2, flags: h.flags });
  // The same token again gets nothing.
  const reused = await requestTapFds(h.fdSocket!, req(h.token!));
  t.false(reused.reply.ok);
  t.deepEqual(reused.fds, []);

  await guest.waitFor(/KNIT-READY/);
  t.log(`launch to KNIT-READY: ${Date.now() - started} ms`);
  t.regex(guest.serial(), new RegExp(`KNIT-LINK eth0 mac=${h.mac} mtu=${h.mtu}`));
  // QEMU got two inherited fds on tap0_kata and no name to open.
  const argv = qemuArgv(guest.pid);
  t.true(argv.includes('tap,id=n0,fds=3:4,vhost=off'), argv.join(' '));
  t.false(argv.some((a) => a.includes('ifname=')));
  t.deepEqual(tapsHeldBy(guest.pid), ['tap0_kata', 'tap0_kata']);
  t.true(hostPings(guestIp), `host could not ping the guest at ${guestIp}`);
  t.is(await guestHttp(guestIp), `knit-guest ${guestIp}`);
  t.log(`launch to host ping answered: ${Date.now() - started} ms`);

  // A Query answer mints a fresh token: a restarted launcher can ask again (Python client),
  // naming the tap itself this time.
  const q = await d.call('Query', { sandbox_id: sandboxId });
  const again = vmHandoff(q.sandbox.result).handoff;
  t.not(again.token, h.token);
  t.deepEqual(pythonRequest(h.fdSocket!, { ...req(again.token!), interface: 'tap0_kata' }), { reply: { ok: true, name: 'tap0_kata', queues: 2, flags: h.flags }, iff: ['tap0_kata', 'tap0_kata'] });

  await guest.stop();
  await d.call('Detach', { sandbox_id: sandboxId });
  await eventually(() => JSON.stringify(leftovers(vm.ns, [vm.id])) === JSON.stringify(nothingLeft) || undefined, 'sandbox emptied').catch(() => undefined);
  t.deepEqual(leftovers(vm.ns, [vm.id]), nothingLeft);
});

test.serial('kata macvtap: QEMU on tap0_kata\'s /dev/tap<ifindex>, opened once per queue (2); host and a runc pod reach the guest, it pings the pod; detach leaves nothing', async (t) => {
  const { cleanup, d, vm, pod, podIp, container } = await daemonAndPod(t, 'ev5', '10.232.5.0/24');
  const res = (await d.call('Attach', {
    sandbox_id: vm.id, netns_path: `/run/netns/${vm.ns}`, runtime: 'KATA',
    interfaces: [{ name: 'eth0', binding: { mode: 'macvtap', queues: '2' } }],
  })).result;
  const { sandboxId, handoff: h } = vmHandoff(res);
  t.like(h, { runtime: 'kata', model: 'macvtap', device: 'macvtap', name: 'tap0_kata', netns: `/run/netns/${vm.ns}`, queues: 2 });
  const guestIp = h.guest.ips[0].address.split('/')[0];
  t.regex(h.guest.ips[0].address, /^10\.232\.5\.\d+\/24$/);
  // ip -d: a bridge-mode macvtap on the pod veth, with the guest's MAC; the veth keeps no address.
  const [mv] = ip(vm.ns, 'link', 'show', 'dev', 'tap0_kata');
  t.like(mv, { address: h.mac, link: 'eth0', linkinfo: { info_kind: 'macvtap', info_data: { mode: 'bridge' } } });
  t.deepEqual(ip(vm.ns, 'addr', 'show', 'dev', 'eth0')[0].addr_info.filter((a: Json) => a.family === 'inet'), []);
  const node = `/dev/tap${mv.ifindex}`;

  const started = Date.now();
  const guest = await bootUntilReady(t, cleanup, { sandboxId, ifname: 'eth0', handoff: h, by: 'chardev', name: 'ev5', ping: [podIp] });
  // Independent observers: QEMU holds the macvtap's node twice (stat against sysfs in the pod
  // netns) and was given fds, no name.
  const argv = qemuArgv(guest.pid);
  t.true(argv.includes('tap,id=n0,fds=3:4,vhost=off'), argv.join(' '));
  t.deepEqual([3, 4].map((fd) => readlinkSync(`/proc/${guest.pid}/fd/${fd}`)), [node, node]);
  const sysfsDev = execFileSync('ip', ['netns', 'exec', vm.ns, 'cat', `/sys/class/net/tap0_kata/macvtap/tap${mv.ifindex}/dev`], { encoding: 'utf8' }).trim();
  t.is(charDevNumbers(node), sysfsDev, `${node} is ${vm.ns}'s macvtap`);

  t.true(hostPings(guestIp), `host could not ping the guest at ${guestIp}`);
  t.is(await guestHttp(guestIp), `knit-guest ${guestIp}`);
  await guestAndPodTalk(t, guest, container, guestIp, podIp);
  // The host resolved the guest's address to the guest NIC's MAC (not the pod veth's).
  t.is(ip(undefined, 'neigh', 'show', 'dev', d.bridge, 'to', guestIp)[0]?.lladdr, h.mac);
  t.log(`launch to all pings answered: ${Date.now() - started} ms`);

  await stopAndDetach(t, { d, guest, container, vm, pod });
  await eventually(() => !existsSync(node) || undefined, `${node} goes with the macvtap`).catch(() => undefined);
  t.false(existsSync(node), `${node} went with the macvtap`);
});
