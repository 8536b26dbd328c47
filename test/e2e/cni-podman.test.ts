// podman 4.3, unmodified, on its CNI backend (its own CONTAINERS_CONF, storage and network
// config dir) runs containers on a knit network through knit-cni installed by `knit
// install-cni`. Each container pings its gateway and the other one; knit lists it; the kernel
// shows it (`ip -j -d`); `podman rm` leaves nothing (links, pool addresses, records, cache files).
// `podman run -p` reaches knit's host ports: another machine (a netns wired to the node) gets
// the container's answer through the host port.
import test from 'ava';
import { removeIfCreated } from '../fixtures/cleanup.js';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startDaemon, cleanupDaemon, hostLinks, eventually, CLI, type Daemon } from '../helpers/daemon.js';
import { uniquePrefix } from '../helpers/names.js';
import { ensureBusyboxRootfs } from '../fixtures/runc.js';
import { forward, remoteClient } from '../helpers/host-port-traffic.js';

const P = uniquePrefix('cpod');
const SUBNET = '10.171.3.0/24';
const GATEWAY = '10.171.3.1';
const opts = { prefix: P, subnet: SUBNET };
const CNI_NET = `${P}cni`;
const IMAGE = `localhost/${P}bb:1`;
let d: Daemon | undefined;
let env: NodeJS.ProcessEnv = {};
let dirs: { bin: string; conf: string; root: string; runroot: string } | undefined;

// containers/image keeps a blob-info cache under /var/lib/containers whatever storage it is
// given, podman's CNI backend keeps libcni's result cache in /var/lib/cni, and podman runs runc
// with runc's own state root, /run/runc. podman's locks are files in its private tmp_dir
// (lock_type "file"): its default, the shared memory segment /dev/shm/libpod_lock, would outlive
// the test and be shared with the host's own podman.
const removeHostCache = removeIfCreated([
  '/var/lib/containers', '/var/lib/containers/cache', '/var/lib/containers/cache/blob-info-cache-v1.boltdb', '/var/lib/cni', '/var/lib/cni/results', '/run/runc',
]);
const podmanArgs = () => ['--root', dirs!.root, '--runroot', dirs!.runroot, '--network-config-dir', dirs!.conf];
function podman(...args: string[]) {
  const r = spawnSync('podman', [...podmanArgs(), ...args], { env, encoding: 'utf8', timeout: 90_000 });
  return { code: r.status, out: r.stdout.trim(), err: r.stderr };
}
const run = (...args: string[]) => podman('run', '--ulimit', 'nofile=1024:1024', '--ulimit', 'nproc=1024:1024', '--network', CNI_NET, ...args);
const knit = (...args: string[]) => execFileSync(process.execPath, [CLI, ...args, '--socket', d!.socket], { encoding: 'utf8' });

test.before(async () => {
  d = await startDaemon(opts);
  dirs = { bin: path.join(d.dir, 'cni-bin'), conf: path.join(d.dir, 'net.d'), root: path.join(d.dir, 'podman-root'), runroot: path.join(d.dir, 'podman-run') };
  execFileSync(process.execPath, [CLI, 'install-cni', '--bin-dir', dirs.bin, '--conf-dir', dirs.conf, '--config', d.configPath, '--network', `${P}net`, '--cni-network', CNI_NET]);
  const conf = path.join(d.dir, 'containers.conf');
  writeFileSync(
    conf,
    `[network]\nnetwork_backend = "cni"\ncni_plugin_dirs = ["${dirs.bin}", "/usr/lib/cni"]\nnetwork_config_dir = "${dirs.conf}"\n[engine]\nlock_type = "file"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\ntmp_dir = "${path.join(d.dir, 'podman-tmp')}"\n`,
  );
  env = { ...process.env, CONTAINERS_CONF: conf };
  const tar = path.join(d.dir, 'rootfs.tar');
  execFileSync('tar', ['-C', await ensureBusyboxRootfs(), '-cf', tar, '.']);
  const imp = podman('import', tar, IMAGE);
  if (imp.code !== 0) throw new Error(`podman import: ${imp.err}`);
});

test.after.always(async () => {
  if (dirs && d) {
    podman('rm', '-a', '-f', '-t', '0');
    podman('rmi', '-a', '-f');
    spawnSync('umount', ['-R', path.join(dirs.root, 'overlay')]);
    spawnSync(process.execPath, [CLI, 'uninstall-cni', '--bin-dir', dirs.bin, '--conf-dir', dirs.conf]);
  }
  removeHostCache();
  await cleanupDaemon(d, opts);
});

test.serial('podman runs two containers on the knit network through knit-cni; they ping the gateway and each other; rm leaves nothing', async (t) => {
  const a = run('-d', '--name', `${P}a`, IMAGE, 'sleep', '300');
  t.is(a.code, 0, a.err);
  const id = a.out;
  const sandboxes = JSON.parse(knit('list', '--json')).sandboxes ?? JSON.parse(knit('list', '--json'));
  const rec = (Array.isArray(sandboxes) ? sandboxes : []).find((s: any) => s.request.sandbox_id === id);
  t.truthy(rec, `knit lists ${id}`);
  t.is(rec.request.labels['knit.dev/cni-network'], CNI_NET);
  t.is(rec.request.pod_name, `${P}a`, 'podman passes K8S_POD_NAME');
  const ipA = rec.result.ips[0].address.split('/')[0];
  t.true(ipA.startsWith('10.171.3.'));

  // The kernel: the container's netns has eth0 with knit's address; its host end is on the bridge.
  const sandboxKey = podman('inspect', '-f', '{{.NetworkSettings.SandboxKey}}', id).out;
  const links = JSON.parse(execFileSync('nsenter', [`--net=${sandboxKey}`, 'ip', '-j', '-d', 'addr', 'show', 'dev', 'eth0'], { encoding: 'utf8' }));
  t.true(links[0].addr_info.some((x: any) => x.local === ipA));
  const host = hostLinks().filter((l) => l.ifalias?.includes(`sandbox=${id};`));
  t.is(host.length, 1);
  t.is(host[0]!.master, `${P}br`);

  const b = run('--rm', '--name', `${P}b`, IMAGE, 'sh', '-c', `ping -c1 -W2 ${GATEWAY} && ping -c1 -W2 ${ipA}`);
  t.is(b.code, 0, `${b.out}\n${b.err}`);

  t.is(podman('rm', '-f', '-t', '0', id).code, 0);
  const list = JSON.parse(knit('list', '--json'));
  t.false(JSON.stringify(list).includes(id), 'record gone');
  await eventually(() => hostLinks().every((l) => !l.ifalias?.includes(`knit-${P}:sandbox=`)), 'knit links of the containers deleted');
  const status = JSON.parse(knit('status', '--json'));
  const pool = status.networks.find((n: any) => n.name === `${P}net`).pools[0];
  t.is(Number(pool.used), 0, 'no address held in the pool');
  // libcni's cache of results for this network is removed by the DEL podman ran.
  const cache = '/var/lib/cni/results';
  t.deepEqual(existsSync(cache) ? readdirSync(cache).filter((f) => f.startsWith(CNI_NET)) : [], []);
});

test.serial('podman -p: the client\'s portMappings reach knit\'s Attach; a TCP connection to the host port from another machine is answered by the container; rm leaves no host-port table', async (t) => {
  const R = uniquePrefix('spod');
  const remote = remoteClient(R, '10.185.9', 'fd00:185:9::');
  t.teardown(() => remote.remove());
  forward(d!.bridge); // the container's answers to another machine leave by the bridge
  const HOST_PORT = 18185;
  const page = `hello from ${P}web`;
  const web = run('-d', '--name', `${P}web`, '-p', `${HOST_PORT}:8080/tcp`, IMAGE, 'sh', '-c', `mkdir -p /www && echo '${page}' > /www/index.html && exec httpd -f -p 8080 -h /www`);
  t.is(web.code, 0, web.err);
  const id = web.out;
  const rec = JSON.parse(knit('query', id, '--json'));
  const sandbox = rec.sandbox ?? rec;
  t.deepEqual(
    sandbox.request.port_mappings.map((m: any) => [m.protocol, Number(m.container_port), Number(m.host_port)]),
    [['TCP', 8080, HOST_PORT]],
    'podman\'s -p reached the Attach',
  );
  // The kernel: knit's host-port table DNATs the port to the container.
  const tables = () => JSON.parse(execFileSync('/usr/sbin/nft', ['-j', 'list', 'tables'], { encoding: 'utf8' })).nftables.filter((x: any) => x.table?.name.startsWith(`hostports-knit-${P}`));
  t.is(tables().length, 1);
  const get = () =>
    spawnSync('ip', ['netns', 'exec', remote.ns, '/usr/bin/python3', '-c', `import urllib.request;print(urllib.request.urlopen("http://${remote.node4}:${HOST_PORT}/", timeout=5).read().decode().strip())`], { encoding: 'utf8' });
  const answer = await eventually(() => { const r = get(); return r.status === 0 && r.stdout.trim(); }, 'httpd in the container answers through the host port', 20_000).catch(() => get().stderr);
  t.is(answer, page);
  t.is(podman('rm', '-f', '-t', '0', id).code, 0);
  t.deepEqual(tables(), [], 'the host-port table is gone with the container');
  t.not(get().status, 0, 'the host port no longer answers');
});
