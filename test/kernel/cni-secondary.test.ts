// knit in Multus's place, with no Multus: knit-cni exec'd as containerd execs it for a pod's
// eth0, the pod's k8s.v1.cni.cncf.io/networks annotation in runtimeConfig (containerd's
// io.kubernetes.cri.pod-annotations), and the NetworkAttachmentDefinitions given literally in
// the daemon's secondaryNetworks config. The daemon runs in its own "host" netns. Checked with
// ip -j, ping, host-local's lease files, the plugins' own log of what they were given, and
// knit's records: the networks' interfaces, names and routes; the CNI_ARGS, capability args and
// args.cni each chain got; DEL with no NAD and no cache file after a restart; a failing network
// taking the pod back whole; kill -9 between two networks of one pod; the refusals.
import test from 'ava';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, chmodSync, mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startDaemon, cleanupDaemon, ipJson, pingFrom, podFactory, eventually, type Daemon } from '../helpers/daemon.js';
import { uniquePrefix } from '../helpers/names.js';
import { cacheEntries, knitShimConf, leases } from '../helpers/cni.js';
import { fileNameOf } from '../../src/store/index.js';

const P = uniquePrefix('msec');
const HOST = `${P}h`;
const SHIM = path.resolve('build', 'native', 'knit-cni');
const dir = mkdtempSync(path.join(os.tmpdir(), `knit-${P}`));
const dataDir = path.join(dir, 'ipam');
const pluginDir = path.join(dir, 'plugins');
const confDir = path.join(dir, 'conf.d');
const pods = podFactory(P.slice(0, -1));
const STORAGE = `${P.slice(0, -1)}st`; // knit's own second network
const MASTER = `${P}m0`; // macvlan's lower device in the host netns

/** A plugin that logs the config and CNI_ARGS it got, and passes prevResult on (ADD) or fails. */
function logPlugin(name: string, failAdd = false): void {
  mkdirSync(pluginDir, { recursive: true });
  const file = path.join(pluginDir, name);
  writeFileSync(file, `#!/bin/sh
conf=$(cat)
case "$CNI_COMMAND" in
VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["0.3.1","0.4.0","1.0.0"]}'; exit 0;;
ADD) printf '%s\\n' "{\\"args\\": \\"$CNI_ARGS\\", \\"ifname\\": \\"$CNI_IFNAME\\", \\"conf\\": $conf}" >> ${dir}/${name}.log
  ${failAdd ? `echo '{"cniVersion":"1.0.0","code":100,"msg":"refused on purpose"}'; exit 1;;` : `echo "$conf" | python3 -c 'import json,sys; c=json.load(sys.stdin); r=c["prevResult"]; r["cniVersion"]=c["cniVersion"]; print(json.dumps(r))'; exit 0;;`}
*) exit 0;;
esac
`);
  chmodSync(file, 0o755);
}
const pluginLog = (name: string): any[] => {
  try {
    return readFileSync(path.join(dir, `${name}.log`), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  } catch {
    return [];
  }
};

const hostLocal = (subnet: string, gateway: string) => ({ type: 'host-local', dataDir, ranges: [[{ subnet, gateway }]] });
const definitions = {
  // A bridge chain (bridge + the logging plugin), conflist form.
  'default/blue': { cniVersion: '1.0.0', name: 'blue-net', plugins: [{ type: 'bridge', bridge: `${P}b1`, isGateway: true, ipam: hostLocal('10.187.61.0/24', '10.187.61.1') }, { type: `${P}log`, capabilities: { mac: true, ips: true } }] },
  // A single macvlan config with no name (Multus fills in the definition's), on an older cniVersion (0.4.0: CHECK is defined from it on).
  'default/red': { cniVersion: '0.4.0', type: 'macvlan', master: MASTER, mode: 'bridge', ipam: hostLocal('10.187.62.0/24', '10.187.62.1') },
  // knit's own network by name: a knit config naming it, and a definition with no config.
  'default/storage': { cniVersion: '1.0.0', type: 'knit', network: STORAGE },
  [`default/${STORAGE}`]: '',
  // A definition whose chain fails at its second plugin, and one in another namespace.
  'default/broken': { cniVersion: '1.0.0', name: 'broken', plugins: [{ type: 'bridge', bridge: `${P}b9`, ipam: hostLocal('10.187.69.0/24', '10.187.69.1') }, { type: `${P}fail` }] },
  'other/gold': { cniVersion: '1.0.0', name: 'gold', plugins: [{ type: 'bridge', bridge: `${P}b3`, ipam: hostLocal('10.187.63.0/24', '10.187.63.1') }] },
  // No config: a file of confDir by its name.
  'default/green': '',
};
const opts = {
  prefix: P.slice(0, -1), subnet: '10.187.60.0/24', netns: HOST,
  extraNetworks: [{ name: STORAGE, mode: 'bridge', bridge: `${P}sb`, ipv4: { subnet: '10.187.64.0/24' } }],
  config: { secondaryNetworks: { definitions, pluginDirs: [pluginDir, '/usr/lib/cni'], confDir, namespace: 'kube-system' } },
};
let d: Daemon | undefined;
/** The NADs' result cache: knit's, under its stateDir (the default). */
const cacheDir = () => path.join(d!.dir, 'state', 'cni-cache');

test.before(async () => {
  execFileSync('ip', ['netns', 'add', HOST]);
  execFileSync('ip', ['-n', HOST, 'link', 'set', 'lo', 'up']);
  execFileSync('ip', ['-n', HOST, 'link', 'add', MASTER, 'type', 'veth', 'peer', 'name', `${P}m1`]);
  // Both ends up: a macvlan passes traffic only while its lower device has carrier.
  for (const l of [MASTER, `${P}m1`]) execFileSync('ip', ['-n', HOST, 'link', 'set', l, 'up']);
  logPlugin(`${P}log`);
  logPlugin(`${P}fail`, true);
  mkdirSync(confDir, { recursive: true });
  writeFileSync(path.join(confDir, '20-green.conf'), JSON.stringify({ cniVersion: '1.0.0', name: 'green', type: 'bridge', bridge: `${P}b4`, ipam: hostLocal('10.187.65.0/24', '10.187.65.1') }));
  d = await startDaemon(opts);
});

test.after.always(async () => {
  await cleanupDaemon(d, opts, pods.ids);
  pods.removeAll();
  execFileSync('ip', ['netns', 'del', HOST], { stdio: 'ignore' });
  rmSync(dir, { recursive: true, force: true });
});

/** knit-cni exec'd as containerd's CRI plugin execs it for a pod's eth0. */
function shim(command: string, p: { id: string; path: string }, annotations: Record<string, string> | undefined, podName = 'web', podNamespace = 'default', runtimeConfig: object = {}) {
  const conf = knitShimConf(opts.prefix, d!.dir, annotations ? { runtimeConfig: { 'io.kubernetes.cri.pod-annotations': annotations, ...runtimeConfig } } : {});
  const r = spawnSync(SHIM, [], {
    input: JSON.stringify(conf), encoding: 'utf8',
    env: {
      PATH: process.env.PATH, CNI_COMMAND: command, CNI_CONTAINERID: p.id, CNI_NETNS: p.path, CNI_IFNAME: 'eth0', CNI_PATH: '/usr/lib/cni',
      CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${podNamespace};K8S_POD_NAME=${podName};K8S_POD_INFRA_CONTAINER_ID=${p.id};K8S_POD_UID=uid-${p.id}`,
    },
  });
  return { code: r.status, out: r.stdout.trim() ? JSON.parse(r.stdout) : undefined, raw: r.stdout };
}
const NETWORKS = 'k8s.v1.cni.cncf.io/networks';

const links = (ns: string) => ipJson(['-d', 'addr', 'show'], ns).filter((l: any) => l.ifname !== 'lo');
const v4 = (l: any) => l.addr_info.filter((a: any) => a.family === 'inet').map((a: any) => `${a.local}/${a.prefixlen}`);
const defaults = (ns: string) => ipJson(['route', 'show', 'default'], ns).map((r: any) => `${r.dev} via ${r.gateway}`);
const recordOf = (id: string) => JSON.parse(readFileSync(path.join(d!.dir, 'run', 'sandboxes', fileNameOf(id)), 'utf8'));

test.serial('the text annotation gives net1 (a bridge chain), macnet (macvlan) and net3 (knit\'s own network by a knit definition) after eth0; the ADD answers eth0 alone; DEL leaves nothing', async (t) => {
  const p = pods.pod(1);
  const add = shim('ADD', p, { [NETWORKS]: 'blue, red@macnet, storage' });
  t.is(add.code, 0, add.raw);
  // The answer is the primary network's result alone, as Multus answers the cluster network's.
  t.deepEqual(add.out.interfaces.filter((i: any) => i.sandbox).map((i: any) => i.name), ['eth0']);
  t.regex(add.out.ips[0].address, /^10\.187\.60\./);

  const byName = new Map(links(p.ns).map((l: any) => [l.ifname, l]));
  t.deepEqual([...byName.keys()].sort(), ['eth0', 'macnet', 'net1', 'net3']);
  t.regex(v4(byName.get('net1'))[0], /^10\.187\.61\.\d+\/24$/);
  t.is(byName.get('macnet').linkinfo.info_kind, 'macvlan');
  t.regex(v4(byName.get('macnet'))[0], /^10\.187\.62\.\d+\/24$/);
  t.regex(v4(byName.get('net3'))[0], /^10\.187\.64\.\d+\/24$/);
  // One default route, eth0's; each network reached through its own interface.
  t.deepEqual(defaults(p.ns), ['eth0 via 10.187.60.1']);
  t.true(pingFrom(p.ns, '10.187.61.1'), 'the blue bridge answers through net1');
  t.true(pingFrom(p.ns, '10.187.64.1'), 'knit\'s storage bridge answers through net3');
  t.true(pingFrom(p.ns, '10.187.60.1'), 'knit\'s primary bridge through eth0');
  t.is(leases(dataDir, 'blue-net').length, 1);
  t.is(leases(dataDir, 'red').length, 1, 'the unnamed macvlan config ran under the definition\'s name');

  // What the chain got: Multus's CNI_ARGS (its five, then each of the runtime's that fills none
  // of them: all of containerd's), the list's name.
  const [logged] = pluginLog(`${P}log`);
  t.is(logged.ifname, 'net1');
  const k8s = `K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID=${p.id};K8S_POD_UID=uid-${p.id}`;
  t.is(logged.args, `IgnoreUnknown=true;${k8s};IgnoreUnknown=1;${k8s}`);
  t.is(logged.conf.name, 'blue-net');

  // The record holds what ran: the definition's chain and CNI_ARGS, whatever becomes of it.
  const rec = recordOf(p.id);
  const net1 = rec.request.interfaces.find((i: any) => i.name === 'net1');
  t.is(net1.attachment.name, 'default/blue');
  t.deepEqual(JSON.parse(net1.attachment.chain.conflist).plugins.map((x: any) => x.type), ['bridge', `${P}log`]);
  t.deepEqual(rec.request.interfaces.find((i: any) => i.name === 'net3'), { name: 'net3', network: STORAGE, attachment: { name: 'default/storage' } });
  t.is(rec.request.labels['knit.dev/pod-networks'], 'annotation', 'marked as made from the annotation: hot-plug follows only such pods');
  const check = await d!.call('Check', { sandbox_id: p.id });
  t.true(check.ok, check.differences.join('; '));

  const del = shim('DEL', p, undefined);
  t.is(del.code, 0, del.raw);
  await eventually(() => links(p.ns).length === 0, 'pod emptied');
  t.deepEqual(leases(dataDir, 'blue-net'), []);
  t.deepEqual(leases(dataDir, 'red'), []);
  t.deepEqual(cacheEntries(cacheDir()).filter((f) => f.includes(p.id)), [], 'no cache entry left');
  t.false(ipJson(['link', 'show'], HOST).some((l: any) => l.ifalias?.includes(p.id)), 'no host device of the pod left');
});

test.serial('the JSON annotation: interface names, mac and ips as CNI_ARGS and capability args, cni-args merged into args.cni, default-route moving the pod\'s default route; an empty definition is knit\'s network of its name, another a file of confDir', async (t) => {
  const p = pods.pod(2);
  const annotation = JSON.stringify([
    { name: 'blue', interface: 'blue0', mac: '02:00:00:aa:bb:01', ips: ['10.187.61.77'], 'cni-args': { logicNetworkName: 'vm-net', extra: 7 }, 'default-route': ['10.187.61.1'] },
    { name: STORAGE },
    { name: 'green', namespace: 'default' },
  ]);
  const add = shim('ADD', p, { [NETWORKS]: annotation });
  t.is(add.code, 0, add.raw);
  const byName = new Map(links(p.ns).map((l: any) => [l.ifname, l]));
  t.deepEqual([...byName.keys()].sort(), ['blue0', 'eth0', 'net2', 'net3']);
  t.regex(v4(byName.get('net2'))[0], /^10\.187\.64\./, 'a definition with no config named after a knit network is that network');
  t.regex(v4(byName.get('net3'))[0], /^10\.187\.65\./, 'green is the file of confDir whose name is green');
  // default-route: the only default route is blue0's, via the gateway asked.
  t.deepEqual(defaults(p.ns), ['blue0 via 10.187.61.1']);
  const [logged] = pluginLog(`${P}log`).filter((l) => l.ifname === 'blue0');
  t.true(logged.args.endsWith(';MAC=02:00:00:aa:bb:01;IP=10.187.61.77'), logged.args);
  t.deepEqual(logged.conf.runtimeConfig, { mac: '02:00:00:aa:bb:01', ips: ['10.187.61.77'] }, 'the capabilities the plugin declares, and only those');
  t.deepEqual(v4(byName.get('blue0')), ['10.187.61.77/24'], 'host-local took the address from CNI_ARGS IP, as under Multus');
  t.deepEqual(logged.conf.args, { cni: { logicNetworkName: 'vm-net', extra: 7 } });
  const check = await d!.call('Check', { sandbox_id: p.id });
  t.true(check.ok, check.differences.join('; '));
  t.is(shim('DEL', p, undefined).code, 0);
  await eventually(() => links(p.ns).length === 0, 'pod emptied');
  t.deepEqual(leases(dataDir, 'blue-net'), []);
});

test.serial('DEL needs neither the definition nor libcni\'s cache file: after a restart with the definitions gone and the cache wiped, DEL gives back every lease and device', async (t) => {
  const p = pods.pod(3);
  t.is(shim('ADD', p, { [NETWORKS]: 'blue,red' }).code, 0);
  t.is(leases(dataDir, 'blue-net').length, 1);
  await d!.stop();
  writeFileSync(d!.configPath, JSON.stringify({ ...JSON.parse(readFileSync(d!.configPath, 'utf8')), secondaryNetworks: { ...opts.config.secondaryNetworks, definitions: {} } }));
  for (const f of cacheEntries(cacheDir())) rmSync(path.join(cacheDir(), 'results', f));
  d = await d!.restart();
  const del = shim('DEL', p, undefined);
  t.is(del.code, 0, del.raw);
  await eventually(() => links(p.ns).length === 0, 'pod emptied');
  t.deepEqual(leases(dataDir, 'blue-net'), []);
  t.deepEqual(leases(dataDir, 'red'), []);
  await d!.stop();
  writeFileSync(d!.configPath, JSON.stringify({ ...JSON.parse(readFileSync(d!.configPath, 'utf8')), secondaryNetworks: opts.config.secondaryNetworks }));
  d = await d!.restart();
});

test.serial('after a reboot (knit\'s records gone with the tmpfs, the plugins\' leases and the cache on disk) the next start gives back every chain no record holds; the runtime\'s DEL for the old pod then finds nothing to do', async (t) => {
  const gone = pods.pod(11); // its netns goes with the "reboot"
  const kept = pods.pod(12); // records lost, the pod still there
  t.is(shim('ADD', gone, { [NETWORKS]: 'blue,red' }).code, 0);
  t.is(shim('ADD', kept, { [NETWORKS]: 'blue' }).code, 0);
  t.is(leases(dataDir, 'blue-net').length, 2);
  t.is(leases(dataDir, 'red').length, 1);
  await d!.stop();
  rmSync(path.join(d!.dir, 'run'), { recursive: true, force: true });
  execFileSync('ip', ['netns', 'del', gone.ns]);
  d = await d!.restart();
  t.deepEqual(leases(dataDir, 'blue-net'), [], 'both pods\' blue leases given back');
  t.deepEqual(leases(dataDir, 'red'), []);
  t.deepEqual(cacheEntries(cacheDir()).filter((f) => f.includes(gone.id) || f.includes(kept.id)), [], 'their cache entries gone');
  t.false(links(kept.ns).some((l: any) => l.ifname === 'net1'), 'the live pod\'s chain interface was taken out with its lease');
  const del = shim('DEL', gone, undefined);
  t.is(del.code, 0, del.raw);
  t.is(shim('DEL', kept, undefined).code, 0);
  execFileSync('ip', ['netns', 'add', gone.ns]); // for the file's teardown
});

test.serial('a network whose chain fails takes the pod back whole: the ADD fails naming it, and nothing of eth0 or the networks before it is left', async (t) => {
  const p = pods.pod(4);
  const add = shim('ADD', p, { [NETWORKS]: 'blue, broken' });
  t.is(add.code, 1);
  t.regex(add.out.msg, /refused on purpose/);
  t.regex(add.out.msg, /default\/broken/);
  // The rollback retires devices and the reaper deletes them just after the answer.
  await eventually(() => links(p.ns).length === 0, 'pod emptied');
  t.deepEqual(leases(dataDir, 'blue-net'), []);
  t.deepEqual(leases(dataDir, 'broken'), [], 'the failed chain was DEL\'d too');
  const q = await d!.call('Query', { sandbox_id: p.id }).catch((e: any) => e);
  t.is(q.code, 5, 'no record');
});

test.serial('what is refused, naming the annotation entry: a definition that does not exist (try again later), a malformed annotation, a capability a knit NAD does not declare, default-route with host ports, namespace isolation', async (t) => {
  const p = pods.pod(5);
  const missing = shim('ADD', p, { [NETWORKS]: 'blue, nosuch' });
  t.is(missing.code, 1);
  t.is(missing.out.code, 11, missing.raw);
  t.regex(missing.out.msg, /annotations\["k8s\.v1\.cni\.cncf\.io\/networks"\]\[1\]: no NetworkAttachmentDefinition default\/nosuch/);
  const bad = shim('ADD', p, { [NETWORKS]: '[{"name": "blue", "mac": "nope"}]' });
  t.is(bad.out.code, 7);
  t.regex(bad.out.msg, /\[0\]\.mac: "nope" is not a MAC address/);
  // knit's own plugin takes only what its config declares as a capability (libcni would drop it).
  const undeclared = shim('ADD', p, { [NETWORKS]: '[{"name": "storage", "mac": "02:00:00:00:00:05"}]' });
  t.is(undeclared.out.code, 2, undeclared.raw);
  t.regex(undeclared.out.msg, /default\/storage \(knit\) declares no "mac" capability/);
  // default-route would take the pod's host ports off its primary interface.
  const ports = shim('ADD', p, { [NETWORKS]: '[{"name": "blue", "default-route": ["10.187.61.1"]}]' }, 'web', 'default', { portMappings: [{ hostPort: 18187, containerPort: 80, protocol: 'tcp' }] });
  t.is(ports.out.code, 2, ports.raw);
  t.regex(ports.out.msg, /runtimeConfig\.portMappings: annotations\["k8s\.v1\.cni\.cncf\.io\/networks"\]\[0\] moves the pod's default route/);
  t.deepEqual(links(p.ns), [], 'nothing was made');
  t.deepEqual(leases(dataDir, 'blue-net'), []);
  // With namespace isolation a pod of "default" may not use other/gold.
  await d!.stop();
  writeFileSync(d!.configPath, JSON.stringify({ ...JSON.parse(readFileSync(d!.configPath, 'utf8')), secondaryNetworks: { ...opts.config.secondaryNetworks, namespaceIsolation: true } }));
  d = await d!.restart();
  const isolated = shim('ADD', p, { [NETWORKS]: 'other/gold' });
  t.is(isolated.code, 1);
  t.regex(isolated.out.msg, /namespace isolation: pod in namespace default may not use network other\/gold/);
  t.deepEqual(links(p.ns), []);
  await d!.stop();
  writeFileSync(d!.configPath, JSON.stringify({ ...JSON.parse(readFileSync(d!.configPath, 'utf8')), secondaryNetworks: opts.config.secondaryNetworks }));
  d = await d!.restart();
});

test.serial('kill -9 between two networks of one pod: the next start takes the half-made pod back (the first network\'s lease too), and the runtime\'s retried ADD makes it whole', async (t) => {
  const p = pods.pod(6);
  // Where the second network's steps start in the plan of such a pod.
  const probe = pods.pod(7);
  t.is(shim('ADD', probe, { [NETWORKS]: 'blue,red' }).code, 0);
  const at = recordOf(probe.id).steps.findIndex((s: any) => s.iface === 'net2');
  t.true(at > 0);
  t.is(shim('DEL', probe, undefined).code, 0);
  await eventually(() => links(probe.ns).length === 0, 'probe emptied');

  await d!.stop();
  const armed = await d!.restart({ KNIT_FAILPOINT: `attach:${at}` });
  const crashed = shim('ADD', p, { [NETWORKS]: 'blue,red' });
  t.is(crashed.out?.code, 11, crashed.raw);
  await armed.exited;
  t.is(leases(dataDir, 'blue-net').length, 1, 'blue was made before the kill');
  d = await armed.restart();
  await eventually(() => links(p.ns).length === 0, 'the half-made pod taken back at start-up');
  t.deepEqual(leases(dataDir, 'blue-net'), []);
  const retried = shim('ADD', p, { [NETWORKS]: 'blue,red' });
  t.is(retried.code, 0, retried.raw);
  t.deepEqual(links(p.ns).map((l: any) => l.ifname).sort(), ['eth0', 'net1', 'net2']);
  t.is(shim('DEL', p, undefined).code, 0);
  await eventually(() => links(p.ns).length === 0, 'pod emptied');
  t.deepEqual([...leases(dataDir, 'blue-net'), ...leases(dataDir, 'red')], []);
});

test.serial('defaultNetworks come first for every pod but those of systemNamespaces; readinessIndicatorFile holds ADDs (11) and STATUS (50) back until it exists', async (t) => {
  const ready = path.join(dir, 'default-network-ready');
  await d!.stop();
  writeFileSync(d!.configPath, JSON.stringify({
    ...JSON.parse(readFileSync(d!.configPath, 'utf8')),
    secondaryNetworks: { ...opts.config.secondaryNetworks, definitions: { ...definitions, 'kube-system/sidecar': definitions['default/blue'] }, defaultNetworks: ['sidecar'], readinessIndicatorFile: ready },
  }));
  d = await d!.restart();
  const p = pods.pod(9);
  const waiting = shim('ADD', p, { [NETWORKS]: 'red' });
  t.is(waiting.out.code, 11, waiting.raw);
  t.regex(waiting.out.msg, /default-network-ready \(readinessIndicatorFile\) does not exist/);
  const status = shim('STATUS', p, undefined);
  t.is(status.out.code, 50, status.raw);
  t.deepEqual(links(p.ns), [], 'nothing made while not ready');
  writeFileSync(ready, '');
  const add = shim('ADD', p, { [NETWORKS]: 'red' });
  t.is(add.code, 0, add.raw);
  // The configured network first (net1, from kube-system), then the annotation's (net2).
  const byName = new Map(links(p.ns).map((l: any) => [l.ifname, l]));
  t.deepEqual([...byName.keys()].sort(), ['eth0', 'net1', 'net2']);
  t.regex(v4(byName.get('net1'))[0], /^10\.187\.61\./);
  t.is(byName.get('net2').linkinfo.info_kind, 'macvlan');
  t.is(recordOf(p.id).request.interfaces[1].attachment.name, 'kube-system/sidecar');
  t.is(shim('DEL', p, undefined).code, 0);
  // A pod of kube-system (a system namespace) does not get it.
  const sys = pods.pod(10);
  const sysAdd = shim('ADD', sys, { [NETWORKS]: 'default/red' }, 'coredns', 'kube-system');
  t.is(sysAdd.code, 0, sysAdd.raw);
  t.deepEqual(links(sys.ns).map((l: any) => l.ifname).sort(), ['eth0', 'net1']);
  t.is(links(sys.ns).find((l: any) => l.ifname === 'net1').linkinfo.info_kind, 'macvlan');
  t.is(shim('DEL', sys, undefined, 'coredns', 'kube-system').code, 0);
  await eventually(() => links(p.ns).length === 0 && links(sys.ns).length === 0, 'pods emptied');
  await d!.stop();
  writeFileSync(d!.configPath, JSON.stringify({ ...JSON.parse(readFileSync(d!.configPath, 'utf8')), secondaryNetworks: opts.config.secondaryNetworks }));
  d = await d!.restart();
});

test.serial('v1.multus-cni.io/default-network: the pod\'s primary interface is that NAD\'s network (found in secondaryNetworks.namespace), and the ADD answers it', async (t) => {
  await d!.stop();
  writeFileSync(d!.configPath, JSON.stringify({
    ...JSON.parse(readFileSync(d!.configPath, 'utf8')),
    secondaryNetworks: { ...opts.config.secondaryNetworks, definitions: { ...definitions, 'kube-system/cluster-b': definitions['default/blue'] } },
  }));
  d = await d!.restart();
  const p = pods.pod(13);
  const add = shim('ADD', p, { 'v1.multus-cni.io/default-network': 'cluster-b', [NETWORKS]: 'red' });
  t.is(add.code, 0, add.raw);
  t.regex(add.out.ips[0].address, /^10\.187\.61\./, 'the runtime gets the default network\'s address');
  const byName = new Map(links(p.ns).map((l: any) => [l.ifname, l]));
  t.deepEqual([...byName.keys()].sort(), ['eth0', 'net1']);
  t.regex(v4(byName.get('eth0'))[0], /^10\.187\.61\./, 'eth0 is the bridge chain\'s');
  // The routes are the chain's: this IPAM gives none, and knit adds none on a NAD's network.
  t.deepEqual(defaults(p.ns), []);
  t.is(recordOf(p.id).request.interfaces[0].attachment.name, 'kube-system/cluster-b');
  t.is(shim('DEL', p, undefined).code, 0);
  await eventually(() => links(p.ns).length === 0, 'pod emptied');
  t.deepEqual(leases(dataDir, 'blue-net'), []);
  await d!.stop();
  writeFileSync(d!.configPath, JSON.stringify({ ...JSON.parse(readFileSync(d!.configPath, 'utf8')), secondaryNetworks: opts.config.secondaryNetworks }));
  d = await d!.restart();
});

test.serial('a pod with no annotation gets eth0 alone, as before', async (t) => {
  const p = pods.pod(8);
  const add = shim('ADD', p, {});
  t.is(add.code, 0, add.raw);
  t.deepEqual(links(p.ns).map((l: any) => l.ifname), ['eth0']);
  t.is(shim('DEL', p, undefined).code, 0);
});
