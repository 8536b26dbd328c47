// knit-cni exec'd exactly as a container runtime execs a CNI plugin (env + config on stdin),
// against a real daemon: every verb, results per cniVersion, errors as CNI error JSON, the
// daemon starting (the ADD waits for it), the daemon down (code 11, DEL queued durably and
// carried out at the next start). Checked with
// `ip -j -d`, ping, and knit's own records.
import test from 'ava';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { startDaemon, cleanupDaemon, ipJson, pingFrom, hostLinks, podFactory, eventually, type Daemon } from '../helpers/daemon.js';
import { uniquePrefix } from '../helpers/names.js';
import { knitShimConf } from '../helpers/cni.js';

const P = uniquePrefix('cshm');
const SUBNET = '10.171.1.0/24';
const opts = { prefix: P, subnet: SUBNET };
const SHIM = path.resolve('build', 'native', 'knit-cni');
let d: Daemon | undefined;
const { pod, netnsNames, ids, removeAll } = podFactory(P);

test.before(async () => {
  d = await startDaemon(opts);
});

test.after.always(async () => {
  await cleanupDaemon(d, opts, ids);
  removeAll();
});

const conf = (extra: object = {}) => knitShimConf(P, d!.dir, extra);

type ShimEnv = { id?: string; netns?: string; ifname?: string; args?: string };

const shimEnv = (command: string, env: ShimEnv) => ({
  PATH: process.env.PATH,
  CNI_COMMAND: command,
  CNI_CONTAINERID: env.id ?? '',
  CNI_NETNS: env.netns ?? '',
  CNI_IFNAME: env.ifname ?? 'eth0',
  CNI_ARGS: env.args ?? '',
  CNI_PATH: '/usr/lib/cni',
});

function shim(command: string, env: ShimEnv, config: object) {
  const r = spawnSync(SHIM, [], { input: JSON.stringify(config), encoding: 'utf8', env: shimEnv(command, env) });
  return { code: r.status, out: r.stdout ? (r.stdout.trim() ? JSON.parse(r.stdout) : undefined) : undefined, raw: r.stdout };
}

const knitLinksOf = (id: string) => hostLinks().filter((l) => l.ifalias?.includes(`sandbox=${id};`));
/** Detach answers once the devices are harmless; the reaper deletes them just after. */
const linksGone = (...ids: string[]) => eventually(() => ids.every((id) => knitLinksOf(id).length === 0), `links of ${ids.join(', ')} deleted`);

test.serial('the shim is a static executable', (t) => {
  const r = spawnSync('file', [SHIM], { encoding: 'utf8' });
  t.regex(r.stdout, /statically linked/);
});

test.serial('VERSION answers without the daemon; supported versions include 1.1.0 and 0.3.1', (t) => {
  const r = shim('VERSION', {}, { cniVersion: '1.0.0', socket: '/nonexistent/x.sock' });
  t.is(r.code, 0);
  t.deepEqual(r.out.supportedVersions, ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']);
});

test.serial('ADD attaches with the pod name from CNI_ARGS; the pod pings its gateway and the record shows; CHECK, STATUS pass; DEL leaves nothing', async (t) => {
  const p = pod(1);
  const add = shim('ADD', { id: p.id, netns: p.path, args: `IgnoreUnknown=1;K8S_POD_NAME=web;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=web;K8S_POD_UID=u1` }, conf());
  t.is(add.code, 0, add.raw);
  t.is(add.out.cniVersion, '1.0.0');
  const podIf = add.out.interfaces.findIndex((i: any) => i.sandbox === p.path);
  t.is(add.out.interfaces[podIf].name, 'eth0');
  t.regex(add.out.ips[0].address, /^10\.171\.1\.\d+\/24$/);
  t.is(add.out.ips[0].interface, podIf);
  t.false('version' in add.out.ips[0], '1.0.0 ips carry no version');
  const [eth0] = ipJson(['addr', 'show', 'dev', 'eth0'], p.ns);
  t.true(eth0.addr_info.some((a: any) => `${a.local}/${a.prefixlen}` === add.out.ips[0].address));
  t.is(eth0.address, add.out.interfaces[podIf].mac);
  t.true(pingFrom(p.ns, '10.171.1.1'));
  const q = await d!.call('Query', { sandbox_id: p.id });
  t.is(q.sandbox.request.pod_name, 'web');
  t.is(q.sandbox.request.pod_namespace, 'ns1');
  t.is(q.sandbox.request.labels['knit.dev/cni-network'], `${P}cni`);

  t.is(shim('CHECK', { id: p.id, netns: p.path }, conf({ prevResult: add.out })).code, 0);
  t.is(shim('STATUS', {}, conf()).code, 0);
  // A repeated ADD answers the same addresses.
  t.is(shim('ADD', { id: p.id, netns: p.path }, conf()).out.ips[0].address, add.out.ips[0].address);

  t.is(shim('DEL', { id: p.id, netns: p.path }, conf()).code, 0);
  await t.throwsAsync(d!.call('Query', { sandbox_id: p.id }));
  await linksGone(p.id);
  t.deepEqual(ipJson(['link', 'show'], p.ns).map((l: any) => l.ifname), ['lo']);
  // DEL again, and DEL with the netns gone, succeed.
  t.is(shim('DEL', { id: p.id, netns: '' }, conf()).code, 0);
});

test.serial('results follow the cniVersion asked: 0.4.0 ips carry "version", 1.1.0 interfaces carry mtu; cniVersions picks the newest known', (t) => {
  const p = pod(2);
  const old = shim('ADD', { id: p.id, netns: p.path }, conf({ cniVersion: '0.4.0' }));
  t.is(old.code, 0, old.raw);
  t.is(old.out.cniVersion, '0.4.0');
  t.is(old.out.ips[0].version, '4');
  t.is(shim('DEL', { id: p.id, netns: p.path }, conf()).code, 0);
  const p3 = pod(3);
  const neu = shim('ADD', { id: p3.id, netns: p3.path }, conf({ cniVersion: undefined, cniVersions: ['1.0.0', '1.1.0', '9.9.9'] }));
  t.is(neu.code, 0, neu.raw);
  t.is(neu.out.cniVersion, '1.1.0');
  t.true(neu.out.interfaces.some((i: any) => i.mtu === 1500));
  t.is(shim('DEL', { id: p3.id, netns: p3.path }, conf()).code, 0);
});

test.serial('errors are CNI error JSON with the code that fits and the field named', (t) => {
  const p = pod(4);
  const badVersion = shim('ADD', { id: p.id, netns: p.path }, conf({ cniVersion: '0.1.0' }));
  t.is(badVersion.code, 1);
  t.is(badVersion.out.code, 1);
  const badMac = shim('ADD', { id: p.id, netns: p.path }, conf({ runtimeConfig: { mac: 'zz' } }));
  t.is(badMac.out.code, 7);
  t.regex(badMac.out.msg, /runtimeConfig\.mac/);
  const bw = shim('ADD', { id: p.id, netns: p.path }, conf({ runtimeConfig: { bandwidth: { ingressRate: 'fast' } } }));
  t.is(bw.out.code, 7, bw.raw);
  t.regex(bw.out.msg, /runtimeConfig\.bandwidth\.ingressRate/);
  const badRuntime = shim('ADD', { id: p.id, netns: p.path }, conf({ runtimeConfig: { 'io.kubernetes.cri.pod-annotations': { 'knit.dev/runtime': 'lxc' } } }));
  t.is(badRuntime.out.code, 7);
  t.regex(badRuntime.out.msg, /knit\.dev\/runtime/);
  const noNetns = shim('CHECK', { id: `${P}none`, netns: p.path }, conf());
  t.is(noNetns.out.code, 3);
  // Nothing was made by the refused calls.
  t.deepEqual(knitLinksOf(p.id), []);
});

test.serial('runtimeConfig.bandwidth reaches the interface\'s bandwidth, in the same units, and is shaped on the host end', async (t) => {
  const p = pod(10);
  const add = shim('ADD', { id: p.id, netns: p.path }, conf({ runtimeConfig: { bandwidth: { ingressRate: 8000000, ingressBurst: 800000, egressRate: 4000000, egressBurst: 400000 } } }));
  t.is(add.code, 0, add.raw);
  const q = await d!.call('Query', { sandbox_id: p.id });
  const bw = q.sandbox.request.interfaces[0].bandwidth;
  t.deepEqual([bw.ingress_rate, bw.ingress_burst, bw.egress_rate, bw.egress_burst].map(Number), [8000000, 800000, 4000000, 400000]);
  const hostEnd = q.sandbox.result.interfaces.find((i: any) => !i.sandbox).name;
  const tbf = JSON.parse(execFileSync('tc', ['-j', 'qdisc', 'show', 'dev', hostEnd], { encoding: 'utf8' })).find((x: any) => x.kind === 'tbf');
  t.is(tbf?.options.rate, 8000000 / 8, 'the ingress limit is a tbf on the host end');
  t.is(shim('DEL', { id: p.id, netns: p.path }, conf()).code, 0);
  await linksGone(p.id);
});

test.serial('pod annotations select Kata tcfilter: knit makes the tap and the tc redirect in the pod netns (no guest booted here)', async (t) => {
  const p = pod(11);
  const annotations = { 'knit.dev/runtime': 'kata', 'knit.dev/binding': '{"mode":"tcfilter"}' };
  const add = shim('ADD', { id: p.id, netns: p.path }, conf({ runtimeConfig: { 'io.kubernetes.cri.pod-annotations': annotations } }));
  t.is(add.code, 0, add.raw);
  const q = await d!.call('Query', { sandbox_id: p.id });
  t.is(q.sandbox.request.runtime, 'KATA');
  t.is(q.sandbox.request.annotations['knit.dev/runtime'], 'kata');
  const links = ipJson(['link', 'show'], p.ns);
  t.true(links.some((l: any) => l.linkinfo?.info_kind === 'tun'), 'a tap in the pod netns');
  const filters = JSON.parse(spawnSync('ip', ['netns', 'exec', p.ns, 'tc', '-j', 'filter', 'show', 'dev', 'eth0', 'ingress'], { encoding: 'utf8' }).stdout || '[]');
  t.true(filters.some((f: any) => JSON.stringify(f).includes('mirred')), 'eth0 ingress redirected to the tap');
  t.is(shim('DEL', { id: p.id, netns: p.path }, conf()).code, 0);
  await linksGone(p.id);
});

test.serial('GC removes this network\'s sandboxes missing from the valid list, under either key', async (t) => {
  const a = pod(5);
  const b = pod(6);
  t.is(shim('ADD', { id: a.id, netns: a.path }, conf()).code, 0);
  t.is(shim('ADD', { id: b.id, netns: b.path }, conf()).code, 0);
  const gc = shim('GC', {}, conf({ cniVersion: '1.1.0', 'cni.dev/valid-attachments': [{ containerID: a.id, ifname: 'eth0' }] }));
  t.is(gc.code, 0, gc.raw);
  await t.throwsAsync(d!.call('Query', { sandbox_id: b.id }));
  t.truthy(await d!.call('Query', { sandbox_id: a.id }));
  t.is(shim('GC', {}, conf({ cniVersion: '1.1.0', 'cni.dev/attachments': [] })).code, 0);
  await t.throwsAsync(d!.call('Query', { sandbox_id: a.id }));
  await linksGone(a.id, b.id);
  t.pass();
});

test.serial('daemon down: STATUS fails with 50 (plugin not available) and ADD with 11 (try again), naming the socket; DEL is queued durably and done at the next start', async (t) => {
  const p = pod(7);
  const add = shim('ADD', { id: p.id, netns: p.path }, conf());
  t.is(add.code, 0, add.raw);
  await d!.stop();
  const status = shim('STATUS', {}, conf());
  t.is(status.out.code, 50);
  t.true(status.out.msg.includes(conf().socket));
  const p8 = pod(8);
  const refused = shim('ADD', { id: p8.id, netns: p8.path }, conf({ daemonWaitSeconds: 1 }));
  t.is(refused.out.code, 11, refused.raw);
  t.true(refused.out.msg.includes(`${conf().socket}: No such file or directory (waited 1 s for it)`), refused.out.msg);
  const del = shim('DEL', { id: p.id, netns: p.path }, conf());
  t.is(del.code, 0, del.raw);
  const queue = conf().deleteQueue;
  t.is(readdirSync(queue).filter((n) => n.endsWith('.json')).length, 1);
  t.true(knitLinksOf(p.id).length > 0, 'still attached while the daemon is down');
  d = await d!.restart();
  t.deepEqual(readdirSync(queue), [], d.logs.filter((l) => l.includes('CNI')).join('\n'));
  await t.throwsAsync(d.call('Query', { sandbox_id: p.id }));
  await linksGone(p.id);
  t.is(shim('STATUS', {}, conf()).code, 0);
  t.false(existsSync(path.join(queue, 'x')));
});

test.serial('daemon starting: an ADD that comes before the daemon listens waits in the shim and gets its network once the daemon serves, with no retry', async (t) => {
  await d!.stop();
  const p = pod(12);
  const child = spawn(SHIM, [], { env: shimEnv('ADD', { id: p.id, netns: p.path }), stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (b) => (out += b));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  child.stdin.end(JSON.stringify(conf()));
  try {
    await new Promise((r) => setTimeout(r, 300));
    t.is(child.exitCode, null, `the shim answered while the daemon was down: ${out}`);
    d = await d!.restart();
    t.is(await exited, 0, out);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
  }
  const result = JSON.parse(out);
  t.regex(result.ips[0].address, /^10\.171\.1\.\d+\/24$/);
  t.true(pingFrom(p.ns, '10.171.1.1'));
  t.is((await d!.call('Query', { sandbox_id: p.id })).sandbox.request.sandbox_id, p.id);
  t.is(shim('DEL', { id: p.id, netns: p.path }, conf()).code, 0);
  await linksGone(p.id);
});

test.serial('daemon killed with -9 mid-ADD: the shim answers 11, the runtime\'s DEL is queued, the next start leaves nothing', async (t) => {
  await d!.stop();
  d = await d!.restart({ KNIT_FAILPOINT: 'attach:2' });
  const p = pod(9);
  const add = shim('ADD', { id: p.id, netns: p.path }, conf());
  t.is(add.out.code, 11, add.raw);
  t.regex(add.out.msg, /gave no answer/);
  await d.exited;
  t.true(knitLinksOf(p.id).length > 0, 'the half-done attach left devices for the repair');
  // What a runtime does after a failed ADD.
  t.is(shim('DEL', { id: p.id, netns: p.path }, conf()).code, 0);
  d = await d.restart({});
  await t.throwsAsync(d.call('Query', { sandbox_id: p.id }));
  await linksGone(p.id);
  const status = await d.call('NodeStatus', {});
  t.is(Number(status.networks.find((n: any) => n.name === `${P}net`).pools[0].used), 0, 'no address held');
  t.deepEqual(readdirSync(conf().deleteQueue), []);
  t.deepEqual(ipJson(['link', 'show'], p.ns).map((l: any) => l.ifname), ['lo']);
});
