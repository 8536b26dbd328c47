// A pod that is gone holds nothing (issue 9): a sandbox whose netns is deleted behind knit's back
// (no Detach, no CNI DEL) is detached by knit itself, through the normal inverses, while it runs
// or at its next start, for runc, Kata and KubeVirt sandboxes. Its address is free again (a
// static attach of exactly that address succeeds), no host link carries its tag, the metric,
// the log line and a Watch event say so. A netns that is only pinned elsewhere (a second bind,
// the first removed) or kept by a process is not gone; a new netns at the same path, or under the
// gone one's reused inode, is another namespace. A pool that runs dry sweeps at once, the timer
// finds what nothing else prompts, and a kill -9 during a reap is finished by the next start.
import test, { type ExecutionContext } from 'ava';
import * as grpc from '@grpc/grpc-js';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { identifyNetns } from '../../src/net/netns.js';
import { knitProto } from '../../src/api/proto.js';
import {
  cleanupDaemon, eventually, freePort, hostLinks, ipJson, podFactory, startDaemon, type Daemon, type DaemonOptions, metricValue,
} from '../helpers/daemon.js';
import { uniquePrefix } from '../helpers/names.js';

const REAPED = 'knit_sandboxes_reaped_total{reason="netns-gone"}';

interface Setup { d: Daemon; opts: DaemonOptions; pods: ReturnType<typeof podFactory>; metrics(): Promise<number>; sweeps(trigger: string): Promise<number>; watch: any[] }

/** A daemon of the test's own (prefix, subnet, metrics port, a Watch stream), all removed in teardown. */
async function setup(t: ExecutionContext, tag: string, subnet: string, config: Record<string, unknown>): Promise<Setup> {
  const prefix = uniquePrefix(tag).slice(0, -1);
  const port = await freePort();
  const opts: DaemonOptions = { prefix, subnet, config: { metricsAddress: `127.0.0.1:${port}`, kata: { danDir: danDirOf(prefix) }, ...config } };
  const pods = podFactory(prefix);
  const s = { opts, pods, watch: [] as any[] } as Setup;
  let client: grpc.Client | undefined;
  t.teardown(async () => {
    client?.close();
    await cleanupDaemon(s.d, opts, pods.ids);
    pods.removeAll();
  });
  s.d = await startDaemon(opts);
  const metric = (series: string, absent: number) => metricValue(port, series, absent);
  s.metrics = () => metric(REAPED, NaN);
  s.sweeps = (trigger) => metric(`knit_gone_netns_sweeps_total{trigger="${trigger}"}`, 0);
  client = new (knitProto().Knit)(`unix://${s.d.socket}`, grpc.credentials.createInsecure());
  const stream = (client as any).Watch({ sandbox_id: '' }) as grpc.ClientReadableStream<any>;
  stream.on('data', (e: any) => s.watch.push(e));
  stream.on('error', () => undefined); // CANCELLED at the end
  await new Promise<void>((resolve) => stream.once('metadata', () => resolve()));
  t.teardown(() => stream.cancel());
  return s;
}

const RUNTIMES = [
  { name: 'runc', runtime: 'RUNC', binding: undefined },
  { name: 'Kata tcfilter', runtime: 'KATA', binding: { mode: 'tcfilter' } },
  { name: 'KubeVirt masquerade', runtime: 'KUBEVIRT', binding: { binding: 'masquerade' } },
] as const;

const attachReq = (rt: (typeof RUNTIMES)[number], id: string, path: string, ips?: string[]) => ({
  sandbox_id: id, pod_name: id, pod_namespace: 'gone', pod_uid: `uid-${id}`, netns_path: path, runtime: rt.runtime,
  interfaces: [{ name: 'eth0', ...(rt.binding && { binding: rt.binding }), ...(ips && { ips }) }],
});

const tagged = (id: string) => hostLinks().filter((l) => l.ifalias?.includes(`sandbox=${id};`)).map((l) => l.ifname);
const listed = async (d: Daemon) => (await d.call('List', {})).sandboxes.map((s: any) => s.request.sandbox_id);
const used = async (d: Daemon) => (await d.call('NodeStatus', {})).networks.flatMap((n: any) => n.pools).reduce((a: number, p: any) => a + Number(p.used), 0);
const reapLogs = (d: Daemon) =>
  d.logs.flatMap((l) => { try { return [JSON.parse(l)]; } catch { return []; } }).filter((l) => l.msg === 'sandbox detached: its network namespace is gone');
/** The first reap log line, once the daemon's stdout has brought it (it can trail the reap). */
const firstReapLog = (d: Daemon) => eventually(() => reapLogs(d)[0], 'the reap log line');
const netnsDel = (name: string) => execFileSync('ip', ['netns', 'del', name]);

async function eventuallyAsync(fn: () => Promise<boolean>, what: string): Promise<void> {
  const until = Date.now() + 15_000;
  while (!(await fn())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Asserts everything a reaped sandbox `id` (which held `address`) leaves: nothing. */
/** A host device is parked (down, renamed, in the reap group) when the reap answers, and the
 * reaper deletes it a moment later: wait for that, up to eventually's bound. */
async function noTaggedHostLink(t: ExecutionContext, id: string, what = `no host link tagged ${id} (ip -d link)`) {
  await eventually(() => tagged(id).length === 0, what).catch(() => undefined);
  t.deepEqual(tagged(id), [], what);
}

async function assertReaped(t: ExecutionContext, s: Setup, rt: (typeof RUNTIMES)[number], id: string, address: string, spare: { id: string; path: string }) {
  t.false((await listed(s.d)).includes(id), `${id} is not listed`);
  await noTaggedHostLink(t, id);
  // The address is free again: exactly that address can be taken by a new sandbox.
  const again = await s.d.call('Attach', attachReq(rt, spare.id, spare.path, [address]));
  t.is(again.result.ips[0].address, address);
  if ((rt.binding as { mode?: string } | undefined)?.mode === 'host-tap') return; // the guest takes it, not the netns
  const [eth0] = ipJson(['addr', 'show', 'dev', 'eth0'], spare.path.split('/').pop());
  t.true(eth0.addr_info.some((a: any) => `${a.local}/${a.prefixlen}` === address), 'the new pod has it on eth0 (ip addr)');
}

/** The daemon's kata.danDir: a directory of the test's. */
const danDirOf = (prefix: string) => `/tmp/${prefix}-dan`;

/** Kata host-tap leaves nothing in the netns: nothing on the host dies with it. */
function kataHostTap(t: ExecutionContext, s: Setup) {
  const danDir = danDirOf(s.opts.prefix);
  mkdirSync(danDir, { recursive: true });
  t.teardown(() => rmSync(danDir, { recursive: true, force: true }));
  const hostTap = { name: 'Kata host-tap', runtime: 'KATA', binding: { mode: 'host-tap', danDir } } as unknown as (typeof RUNTIMES)[number];
  return { danDir, hostTap };
}

for (const rt of RUNTIMES) {
  test.serial(`${rt.name}: a netns deleted while knit runs is detached at once, its address freed, counted, logged and announced`, async (t) => {
    // The timer is off: what notices is the host link that dies with the netns (or the netns
    // file's removal), then the check.
    const s = await setup(t, 'ngr', '10.193.1.0/24', { goneNetnsSweepSeconds: 0 });
    const [gone, alive, spare] = [s.pods.pod(1), s.pods.pod(2), s.pods.pod(3)];
    const { result } = await s.d.call('Attach', attachReq(rt, gone.id, gone.path));
    await s.d.call('Attach', attachReq(rt, alive.id, alive.path));
    t.true(tagged(gone.id).length > 0);
    t.is(await s.metrics(), 0);

    netnsDel(gone.ns);
    await eventually(() => s.watch.find((e) => e.sandbox?.sandbox_id === gone.id && e.sandbox.type === 'detach'), 'the detach event');
    t.is(s.watch.find((e) => e.sandbox?.sandbox_id === gone.id && e.sandbox.type === 'detach').sandbox.reason, 'netns-gone');
    t.is(await s.metrics(), 1);
    // A KubeVirt tap's DHCP responder keeps a socket in the netns, which keeps the namespace and
    // its veth: there the removed netns file is the prompt (src/daemon/guest-dhcp.ts).
    const trigger = rt.runtime === 'KUBEVIRT' ? 'netns-file-gone' : 'link-gone';
    t.like(await firstReapLog(s.d), { sandboxId: gone.id, netns: gone.path, trigger });
    t.true((await s.sweeps(trigger)) >= 1, `knit_gone_netns_sweeps_total{trigger="${trigger}"}`);
    t.deepEqual(await listed(s.d), [alive.id], 'the live sandbox stays');
    t.is(await used(s.d), 1, "only the live sandbox's address is held (NodeStatus)");
    await assertReaped(t, s, rt, gone.id, result.ips[0].address, spare);
  });
}

test.serial('a burst of detaches prompts no sweep: the reaper deleting the host ends they parked is their detach, not a link gone', async (t) => {
  const s = await setup(t, 'ngb', '10.193.8.0/24', { goneNetnsSweepSeconds: 0 });
  const pods = Array.from({ length: 40 }, (_, i) => s.pods.pod(i + 1));
  await Promise.all(pods.map((p) => s.d.call('Attach', attachReq(RUNTIMES[0], p.id, p.path))));
  // All at once: the reaper's first run (25 ms after the first detach) deletes parked host ends
  // of detaches that have not finished yet.
  await Promise.all(pods.map((p) => s.d.call('Detach', { sandbox_id: p.id })));
  for (const p of pods) await noTaggedHostLink(t, p.id);
  t.is(await s.sweeps('link-gone'), 0, 'knit_gone_netns_sweeps_total{trigger="link-gone"}');
  t.is(await s.metrics(), 0, 'nothing reaped');
});

test.serial('runc, Kata and KubeVirt: netns deleted while knit is stopped are detached at its next start, before it answers', async (t) => {
  const s = await setup(t, 'ngs', '10.193.2.0/24', {});
  const pods = RUNTIMES.map((rt, i) => ({ rt, ...s.pods.pod(i + 1) }));
  const addresses: string[] = [];
  for (const p of pods) addresses.push((await s.d.call('Attach', attachReq(p.rt, p.id, p.path))).result.ips[0].address);
  await s.d.stop();
  for (const p of pods) netnsDel(p.ns);

  s.d = await s.d.restart();
  t.deepEqual(await listed(s.d), [], 'the first answer already lists none of them');
  t.is(await used(s.d), 0);
  t.is(await s.metrics(), 3);
  t.deepEqual(reapLogs(s.d).map((l) => [l.sandboxId, l.trigger]).sort(), pods.map((p) => [p.id, 'start-up']).sort());
  for (const [i, p] of pods.entries()) await assertReaped(t, s, p.rt, p.id, addresses[i], s.pods.pod(10 + i));
});

test.serial('a netns still pinned elsewhere, or kept by a process, is not gone; once nothing refers to it, it is', async (t) => {
  const s = await setup(t, 'ngm', '10.193.3.0/24', { goneNetnsSweepSeconds: 0 });
  const [moved, kept, witness] = [s.pods.pod(1), s.pods.pod(2), s.pods.pod(3)];
  for (const p of [moved, kept, witness]) await s.d.call('Attach', attachReq(RUNTIMES[0], p.id, p.path));

  // moved: a second bind mount elsewhere, then the first removed (what `ip netns del` does).
  const dir = `/tmp/${s.opts.prefix}-pin`;
  mkdirSync(dir, { recursive: true });
  const pin = `${dir}/moved`;
  writeFileSync(pin, '');
  t.teardown(() => {
    try { execFileSync('umount', [pin], { stdio: 'ignore' }); } catch { /* not mounted */ }
    rmSync(dir, { recursive: true, force: true });
  });
  execFileSync('mount', ['--bind', moved.path, pin]);
  netnsDel(moved.ns);
  t.false(existsSync(moved.path));
  // kept: a process of the test's lives in it; its pin is removed.
  const sleeper = spawn('ip', ['netns', 'exec', kept.ns, 'sleep', '600'], { stdio: 'ignore' });
  t.teardown(() => { if (sleeper.exitCode === null) sleeper.kill('SIGKILL'); });
  const netOf = (pid: number | string) => { try { return readlinkSync(`/proc/${pid}/ns/net`); } catch { return undefined; } };
  await eventually(() => netOf(sleeper.pid!) && netOf(sleeper.pid!) !== netOf('self'), 'the sleeper in the netns');
  netnsDel(kept.ns);

  // A netns that is really gone prompts a sweep, which looks at every sandbox.
  netnsDel(witness.ns);
  await eventuallyAsync(async () => !(await listed(s.d)).includes(witness.id), 'the witness reaped');
  t.deepEqual((await listed(s.d)).sort(), [kept.id, moved.id].sort(), 'the moved and the kept ones stay attached');
  t.is(await s.metrics(), 1);
  const hostEnd = tagged(moved.id)[0];
  t.truthy(hostEnd);
  // The moved netns still works: its eth0 reaches the gateway through the host end knit keeps.
  execFileSync('nsenter', [`--net=${pin}`, 'ping', '-c', '1', '-W', '2', '10.193.3.1']);

  sleeper.kill('SIGKILL');
  execFileSync('umount', [pin]);
  await eventuallyAsync(async () => (await listed(s.d)).length === 0, 'both reaped once nothing refers to them');
  t.is(await s.metrics(), 3);
  t.deepEqual([...tagged(moved.id), ...tagged(kept.id)], []);
});

test.serial('a pool that runs dry sweeps at once: the next attach gets the address of a pod whose netns is gone', async (t) => {
  // Host-tap pods, and the timer off: only the exhausted pool can notice.
  const s = await setup(t, 'ngp', '10.193.4.0/29', { goneNetnsSweepSeconds: 0 });
  const { danDir, hostTap } = kataHostTap(t, s);
  const size = Number((await s.d.call('NodeStatus', {})).networks[0].pools[0].free);
  t.true(size >= 2 && size <= 6, `a /29: ${size} addresses`);
  const pods = Array.from({ length: size }, (_, i) => s.pods.pod(i + 1));
  const addresses: string[] = [];
  for (const p of pods) addresses.push((await s.d.call('Attach', attachReq(hostTap, p.id, p.path))).result.ips[0].address);
  const extra = s.pods.pod(50);
  const full = (await t.throwsAsync(s.d.call('Attach', attachReq(hostTap, extra.id, extra.path)))) as unknown as grpc.ServiceError;
  t.is(full.code, grpc.status.RESOURCE_EXHAUSTED, 'full, and nothing gone yet');
  t.is(await s.metrics(), 0);

  const victim = pods[1];
  const tap = tagged(victim.id);
  t.is(tap.length, 1, 'its host tap');
  netnsDel(victim.ns);
  t.deepEqual(tagged(victim.id), tap, 'nothing on the host went with the netns');
  const { result } = await s.d.call('Attach', attachReq(hostTap, extra.id, extra.path));
  t.is(result.ips[0].address, addresses[1], "the gone pod's address");
  t.like(await firstReapLog(s.d), { sandboxId: victim.id, trigger: 'pool-exhausted' });
  t.is(await s.metrics(), 1);
  await noTaggedHostLink(t, victim.id, 'its host tap is gone (ip link)');
  t.false(existsSync(`${danDir}/${victim.id}.json`), 'its DAN file is gone');
  t.true(existsSync(`${danDir}/${extra.id}.json`));
});

test.serial('the timer finds what nothing else would: a Kata host-tap pod deleted behind knit', async (t) => {
  const s = await setup(t, 'ngt', '10.193.5.0/24', { goneNetnsSweepSeconds: 1 });
  const { danDir, hostTap } = kataHostTap(t, s);
  const p = s.pods.pod(1);
  const { result } = await s.d.call('Attach', attachReq(hostTap, p.id, p.path));
  netnsDel(p.ns);
  await eventuallyAsync(async () => !(await listed(s.d)).includes(p.id), 'the timer sweep');
  t.like(await firstReapLog(s.d), { sandboxId: p.id, trigger: 'timer' });
  t.false(existsSync(`${danDir}/${p.id}.json`));
  await assertReaped(t, s, hostTap, p.id, result.ips[0].address, s.pods.pod(2));
});

test.serial('kill -9 before each inverse of a reap: the next start finishes it, nothing is left', async (t) => {
  const s = await setup(t, 'ngk', '10.193.6.0/24', { goneNetnsSweepSeconds: 0 });
  const rt = RUNTIMES[1]; // Kata tcfilter: host veth, tap and redirects
  await s.d.stop();
  let kills = 0;
  for (let n = 0; ; n++) {
    const p = s.pods.pod(n + 1);
    const armed = await s.d.restart({ KNIT_FAILPOINT: `detach:${n}` });
    s.d = armed;
    await armed.call('Attach', attachReq(rt, p.id, p.path));
    let killed = false;
    void armed.exited.then((e) => (killed = e.signal === 'SIGKILL'));
    netnsDel(p.ns);
    // Either the failpoint kills it during the reap, or the reap (past the last inverse) finishes.
    await eventuallyAsync(async () => killed || !(await listed(armed).catch(() => [p.id])).includes(p.id), `the reap of ${p.id}`);
    if (killed) {
      armed.close();
      s.d = await armed.restart();
      kills++;
    }
    t.deepEqual(await listed(s.d), [], `no record (failpoint ${n})`);
    t.is(await used(s.d), 0, `no address held (failpoint ${n})`);
    await eventually(() => tagged(p.id).length === 0, `no host device of ${p.id} (failpoint ${n})`);
    await s.d.stop();
    if (!killed) break;
  }
  t.log(`killed before each of ${kills} inverse(s), then the reap ran to its end`);
  t.true(kills > 0);
});

test.serial('a new netns pinned at the same path is not the sandbox\'s: the old one is reaped, the new one is left alone', async (t) => {
  const s = await setup(t, 'ngu', '10.193.7.0/24', { goneNetnsSweepSeconds: 0 });
  const p = s.pods.pod(1);
  await s.d.call('Attach', attachReq(RUNTIMES[0], p.id, p.path));
  netnsDel(p.ns);
  execFileSync('ip', ['netns', 'add', p.ns]);
  // Someone else's device in the new namespace, named as knit's was.
  execFileSync('ip', ['-n', p.ns, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth0p']);
  await eventuallyAsync(async () => (await listed(s.d)).length === 0, 'the reap');
  t.like(await firstReapLog(s.d), { sandboxId: p.id, netns: p.path });
  t.deepEqual(ipJson(['link', 'show'], p.ns).map((l: any) => l.ifname).sort(), ['eth0', 'eth0p', 'lo'], 'the new namespace keeps its eth0');
  t.deepEqual(tagged(p.id), []);
});

test.serial('a new netns under the gone one\'s reused inode does not keep it: the kernel\'s namespace id tells them apart', async (t) => {
  if (identifyNetns('/proc/self/ns/net').id === undefined) {
    t.log('this kernel has no namespace ids (NS_GET_ID, Linux 6.18+): a reused inode keeps a gone sandbox until that netns goes too');
    t.pass();
    return;
  }
  const s = await setup(t, 'ngi', '10.193.8.0/24', {});
  const p = s.pods.pod(1);
  await s.d.call('Attach', attachReq(RUNTIMES[0], p.id, p.path));
  const ino = statSync(p.path).ino;
  await s.d.stop();
  netnsDel(p.ns);
  // The kernel hands out the lowest free inode number: make namespaces until one gets it.
  const made: string[] = [];
  t.teardown(() => made.forEach((n) => execFileSync('ip', ['netns', 'del', n], { stdio: 'ignore' })));
  let reuser: string | undefined;
  for (let i = 0; i < 40 && !reuser; i++) {
    const name = `${s.opts.prefix}-r${i}`;
    execFileSync('ip', ['netns', 'add', name]);
    made.push(name);
    if (statSync(`/run/netns/${name}`).ino === ino) reuser = name;
    else await new Promise((r) => setTimeout(r, 50)); // the gone netns's teardown frees its number
  }
  if (!reuser) return t.log(`no namespace got inode ${ino} back (other namespaces took it); nothing to check this run`), t.pass();

  s.d = await s.d.restart();
  t.deepEqual(await listed(s.d), [], 'reaped, though a live netns holds its inode');
  t.like(await firstReapLog(s.d), { sandboxId: p.id, trigger: 'start-up' });
  t.deepEqual(ipJson(['link', 'show'], reuser).map((l: any) => l.ifname), ['lo'], 'the new netns is untouched');
});
