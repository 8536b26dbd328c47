// containerd 1.6, unmodified: `ctr run --cni` (go-cni inside ctr) starts containers on a knit
// network through knit-cni. containerd runs on private dirs and socket; ctr runs in a private
// mount namespace where /etc/cni/net.d and /opt/cni/bin (go-cni's fixed defaults) are this
// test's dirs, so the host's CNI config is neither read nor changed. Checked with ping, `ip -j
// -d`, knit's records; after the containers exit nothing of them is left.
import test from 'ava';
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startDaemon, cleanupDaemon, hostLinks, eventually, CLI, type Daemon } from '../helpers/daemon.js';
import { uniquePrefix } from '../helpers/names.js';
import { ensureBusyboxRootfs } from '../fixtures/runc.js';
import { removeIfCreated } from '../fixtures/cleanup.js';

const P = uniquePrefix('cctr');
const NS = P.replace(/-$/, '');
const SUBNET = '10.171.5.0/24';
const GATEWAY = '10.171.5.1';
const opts = { prefix: P, subnet: SUBNET };
const IMAGE = `localhost/${NS}bb:1`;
let d: Daemon | undefined;
let containerd: ChildProcess | undefined;
let dir = '';
const sock = () => path.join(dir, 'containerd.sock');

/** ctr as a runtime user runs it, with go-cni's dirs bound to this test's. */
function ctrArgv(...args: string[]): string[] {
  const mounts = [
    'mount -t tmpfs none /etc/cni && mkdir -p /etc/cni/net.d && mount --bind "$1" /etc/cni/net.d',
    'mount -t tmpfs none /opt && mkdir -p /opt/cni/bin && mount --bind "$2" /opt/cni/bin',
    'shift 2 && exec ctr "$@"',
  ].join(' && ');
  return ['unshare', '-m', '--propagation', 'private', 'sh', '-c', mounts, 'sh', path.join(dir, 'net.d'), path.join(dir, 'cni-bin'), '-a', sock(), '-n', NS, ...args];
}
/** `ctr run` with its IO fifos and runc's state in this test's dir, not /run/containerd's. */
const ctrRun = () => ['run', '--fifo-dir', path.join(dir, 'fifo'), '--runc-root', path.join(dir, 'runc')];
// containerd 1.6 puts shim sockets in /run/containerd/s whatever its config says, and go-cni
// in ctr keeps libcni's cache in /var/lib/cni.
const removeHostDirs = removeIfCreated(['/run/containerd', '/run/containerd/s', '/var/lib/cni', '/var/lib/cni/results']);
const ctr = (...args: string[]) => {
  const [cmd, ...rest] = ctrArgv(...args);
  const r = spawnSync(cmd!, rest, { encoding: 'utf8', timeout: 90_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
};
const knitList = () => JSON.parse(execFileSync(process.execPath, [CLI, 'list', '--json', '--socket', d!.socket], { encoding: 'utf8' }));
const sandboxes = (): any[] => {
  const l = knitList();
  return Array.isArray(l) ? l : (l.sandboxes ?? []);
};

test.before(async () => {
  d = await startDaemon(opts);
  dir = d.dir;
  execFileSync(process.execPath, [CLI, 'install-cni', '--bin-dir', path.join(dir, 'cni-bin'), '--conf-dir', path.join(dir, 'net.d'), '--config', d.configPath, '--cni-network', `${P}cni`]);
  mkdirSync(path.join(dir, 'ctrd-root'));
  writeFileSync(
    path.join(dir, 'containerd.toml'),
    `version = 2\nroot = "${dir}/ctrd-root"\nstate = "${dir}/ctrd-state"\ndisabled_plugins = ["io.containerd.grpc.v1.cri"]\n[plugins."io.containerd.internal.v1.opt"]\n  path = "${dir}/opt"\n[grpc]\n  address = "${sock()}"\n[ttrpc]\n  address = "${sock()}.ttrpc"\n`,
  );
  containerd = spawn('containerd', ['--config', path.join(dir, 'containerd.toml')], { stdio: 'ignore' });
  await eventually(() => spawnSync('ctr', ['-a', sock(), 'version']).status === 0, 'containerd answers');
  // An OCI image of the busybox rootfs, made locally with umoci (no registry).
  const img = path.join(dir, 'img');
  execFileSync('umoci', ['init', '--layout', img]);
  execFileSync('umoci', ['new', '--image', `${img}:bb`]);
  execFileSync('umoci', ['unpack', '--rootless', '--image', `${img}:bb`, path.join(dir, 'bundle')]);
  execFileSync('cp', ['-a', `${await ensureBusyboxRootfs()}/.`, path.join(dir, 'bundle', 'rootfs')]);
  execFileSync('umoci', ['repack', '--image', `${img}:bb`, path.join(dir, 'bundle')]);
  execFileSync('tar', ['-C', img, '-cf', `${img}.tar`, '.']);
  const imp = spawnSync('ctr', ['-a', sock(), '-n', NS, 'images', 'import', '--index-name', IMAGE, `${img}.tar`], { encoding: 'utf8' });
  if (imp.status !== 0) throw new Error(`ctr images import: ${imp.stderr}`);
});

test.after.always(async () => {
  if (containerd) {
    for (const c of ['a', 'b']) {
      spawnSync('ctr', ['-a', sock(), '-n', NS, 'task', 'kill', '-s', 'KILL', c]);
      spawnSync('ctr', ['-a', sock(), '-n', NS, 'container', 'rm', c]);
    }
    containerd.kill('SIGTERM');
    await new Promise((r) => containerd!.once('exit', r));
    const mounts = execFileSync('findmnt', ['-rn', '-o', 'TARGET'], { encoding: 'utf8' }).split('\n').filter((m) => m.startsWith(dir));
    for (const m of mounts.reverse()) spawnSync('umount', ['-l', m]);
  }
  removeHostDirs();
  await cleanupDaemon(d, opts);
});

test.serial('ctr run --cni: two containers on the knit network ping the gateway and each other; knit lists them; they leave nothing', async (t) => {
  const [cmd, ...rest] = ctrArgv(...ctrRun(), '--rm', '--cni', IMAGE, 'a', 'sleep', '120');
  const a = spawn(cmd!, rest, { stdio: 'ignore' });
  const aExit = new Promise((r) => a.once('exit', r));
  const rec = await eventually(() => sandboxes().find((s) => s.request.sandbox_id === `${NS}-a` && s.state === 'ATTACHED'), 'container a attached');
  t.regex(rec.request.netns_path, /^\/proc\/\d+\/ns\/net$/, 'ctr passes /proc/<pid>/ns/net');
  const ipA = rec.result.ips[0].address.split('/')[0];
  t.true(ipA.startsWith('10.171.5.'));
  const [eth0] = JSON.parse(execFileSync('nsenter', [`--net=${rec.request.netns_path}`, 'ip', '-j', '-d', 'addr', 'show', 'dev', 'eth0'], { encoding: 'utf8' }));
  t.true(eth0.addr_info.some((x: any) => x.local === ipA));
  t.true(hostLinks().some((l) => l.ifalias?.includes(`sandbox=${NS}-a;`) && l.master === `${P}br`));

  const b = ctr(...ctrRun(), '--rm', '--cni', IMAGE, 'b', 'sh', '-c', `ping -c1 -W2 ${GATEWAY} && ping -c1 -W2 ${ipA}`);
  t.is(b.code, 0, b.out + b.err);

  spawnSync('ctr', ['-a', sock(), '-n', NS, 'task', 'kill', '-s', 'KILL', 'a']);
  await aExit;
  t.deepEqual(sandboxes().map((s) => s.request.sandbox_id), [], 'DEL (with an empty CNI_NETNS) removed the records');
  await eventually(() => hostLinks().every((l) => !l.ifalias?.includes(`knit-${P}:sandbox=`)), 'knit links deleted');
  t.pass();
});
