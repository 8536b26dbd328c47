// The Kubernetes path with no kubelet: a private containerd 1.6 (its own root, state and socket)
// with its CRI plugin reading a test dir that holds knit-cni and the conflist `knit install-cni`
// wrote; a CRI client of our own (test/helpers/cri-client.ts) does what kubelet does for a pod:
// RunPodSandbox with annotations and a hostPort, PodSandboxStatus, StopPodSandbox,
// RemovePodSandbox. The pause image is busybox `sleep`, packed with umoci and imported with ctr
// (no registry is reachable).
import test from 'ava';
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startDaemon, cleanupDaemon, hostLinks, eventually, pingFrom, CLI, type Daemon } from '../helpers/daemon.js';
import { uniquePrefix } from '../helpers/names.js';
import { criClient, type CriCall } from '../helpers/cri-client.js';
import { ensureBusyboxRootfs } from '../fixtures/runc.js';
import { removeIfCreated } from '../fixtures/cleanup.js';

const P = uniquePrefix('scri');
const opts = { prefix: P, subnet: '10.185.3.0/24' };
const PAUSE = `localhost/${P}pause:1`;
const HOST_PORT = 18186;
let d: Daemon | undefined;
let dir = '';
let containerd: ChildProcess | undefined;
let cri: { call: CriCall; close(): void } | undefined;
const sandboxes: string[] = [];
let containerdLog = () => '';

const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const ctr = (...args: string[]) => sh('ctr', '--address', path.join(dir, 'containerd.sock'), '-n', 'k8s.io', ...args);

/** busybox `sleep` as an OCI image archive (umoci), the sandbox ("pause") image. */
async function pauseImage(): Promise<string> {
  const layout = path.join(dir, 'pause-layout');
  const bundle = path.join(dir, 'pause-bundle');
  sh('umoci', 'init', '--layout', layout);
  sh('umoci', 'new', '--image', `${layout}:1`);
  sh('umoci', 'unpack', '--rootless', '--image', `${layout}:1`, bundle);
  sh('cp', '-a', `${await ensureBusyboxRootfs()}/.`, path.join(bundle, 'rootfs'));
  sh('umoci', 'repack', '--image', `${layout}:1`, bundle);
  sh('umoci', 'config', '--image', `${layout}:1`, '--config.entrypoint', '/bin/sleep', '--config.cmd', '1000000');
  const tar = path.join(dir, 'pause.tar');
  sh('tar', '-C', layout, '-cf', tar, '.');
  return tar;
}

// containerd 1.6 puts shim sockets in /run/containerd/s whatever its config says, and its CRI
// plugin keeps libcni's cache in /var/lib/cni.
const removeHostDirs = removeIfCreated(['/run/containerd', '/run/containerd/s', '/var/lib/cni', '/var/lib/cni/results']);

function containerdConfig(): string {
  return `version = 2
root = "${dir}/root"
state = "${dir}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[plugins."io.containerd.internal.v1.opt"]
  path = "${dir}/opt"
[grpc]
  address = "${dir}/containerd.sock"
[ttrpc]
  address = "${dir}/containerd.sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE}"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # Without these two, runc cannot start the pause container in this sandbox ("can't get final
  # child's PID from pipe"): the CRI default asks for an AppArmor profile and oom_score_adj -998.
  disable_apparmor = true
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "${dir}/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${dir}/cni-bin"
    conf_dir = "${dir}/net.d"
    max_conf_num = 1
`;
}

test.before(async () => {
  d = await startDaemon(opts);
  dir = path.join(d.dir, 'cri');
  mkdirSync(dir);
  sh(process.execPath, CLI, 'install-cni', '--bin-dir', path.join(dir, 'cni-bin'), '--conf-dir', path.join(dir, 'net.d'), '--config', d.configPath, '--network', `${P}net`, '--cni-network', `${P}cni`);
  // The CRI plugin also runs the loopback plugin from its bin dir, as on any node.
  sh('cp', '/usr/lib/cni/loopback', path.join(dir, 'cni-bin', 'loopback'));
  const tar = await pauseImage();
  writeFileSync(path.join(dir, 'config.toml'), containerdConfig());
  containerd = spawn('containerd', ['--config', path.join(dir, 'config.toml')], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  containerd.stderr!.setEncoding('utf8').on('data', (s: string) => (log = (log + s).slice(-20_000)));
  await eventually(() => existsSync(path.join(dir, 'containerd.sock')), `containerd's socket (${log.slice(-500)})`, 30_000);
  containerdLog = () => log;
  cri = criClient(path.join(dir, 'containerd.sock'));
  ctr('images', 'import', '--base-name', PAUSE.replace(/:1$/, ''), tar); // the layout's tag "1" becomes PAUSE
});

test.after.always(async () => {
  for (const id of sandboxes) {
    await cri?.call('StopPodSandbox', { pod_sandbox_id: id }).catch(() => undefined);
    await cri?.call('RemovePodSandbox', { pod_sandbox_id: id }).catch(() => undefined);
  }
  cri?.close();
  if (containerd && containerd.exitCode === null) {
    const exited = new Promise((r) => containerd!.once('exit', r));
    containerd.kill('SIGTERM');
    await exited;
  }
  if (dir) {
    // The overlay snapshots and anything else containerd mounted under its root.
    const mounts = readFileSync('/proc/self/mounts', 'utf8').split('\n').map((l) => l.split(' ')[1]).filter((m) => m?.startsWith(dir)).reverse();
    for (const m of mounts) spawnSync('umount', ['-l', m]);
    spawnSync(process.execPath, [CLI, 'uninstall-cni', '--bin-dir', path.join(dir, 'cni-bin'), '--conf-dir', path.join(dir, 'net.d'), '--config', d!.configPath]);
  }
  removeHostDirs();
  await cleanupDaemon(d, opts);
});

test.serial('containerd\'s CRI plugin runs a pod sandbox through knit-cni: annotations and hostPort reach the Attach, the CRI pod IP is knit\'s, the node pings it; stop and remove leave nothing', async (t) => {
  const version = await cri!.call('Version', { version: 'v1' });
  t.is(version.runtime_name, 'containerd');
  // NetworkReady: the CRI plugin found the conflist knit installed.
  const status = await cri!.call('Status', {});
  const network = status.status.conditions.find((c: any) => c.type === 'NetworkReady');
  t.true(network?.status, JSON.stringify(status.status.conditions));

  const uid = `${P}uid`;
  const run = await cri!.call('RunPodSandbox', {
    config: {
      metadata: { name: `${P}web`, uid, namespace: `${P}ns`, attempt: 0 },
      hostname: `${P}web`,
      port_mappings: [{ protocol: 'TCP', container_port: 80, host_port: HOST_PORT }],
      labels: { app: 'web' },
      annotations: { 'knit.dev/runtime': 'runc', 'example.com/owner': `${P}team` },
    },
  }).catch((e: Error) => {
    throw new Error(`${e.message}\n${containerdLog().split('\n').filter((l) => /level=(error|warn)/.test(l)).slice(-10).join('\n')}`);
  });
  const id = run.pod_sandbox_id as string;
  sandboxes.push(id);
  t.regex(id, /^[0-9a-f]{64}$/);

  // knit's record: the pod fields from CNI_ARGS, the annotations from the capability arg.
  const q = await d!.call('Query', { sandbox_id: id });
  const req = q.sandbox.request;
  t.deepEqual([req.pod_name, req.pod_namespace, req.pod_uid, req.runtime], [`${P}web`, `${P}ns`, uid, 'RUNC']);
  t.is(req.annotations['example.com/owner'], `${P}team`);
  t.is(req.annotations['knit.dev/runtime'], 'runc');
  t.deepEqual(req.port_mappings.map((m: any) => [m.protocol, Number(m.container_port), Number(m.host_port)]), [['TCP', 80, HOST_PORT]]);
  const knitIp = q.sandbox.result.ips[0].address.split('/')[0];

  // The CRI pod IP (what kubelet would publish) is knit's.
  const s = await cri!.call('PodSandboxStatus', { pod_sandbox_id: id });
  t.is(s.status.state, 'SANDBOX_READY');
  t.is(s.status.network.ip, knitIp);
  t.regex(knitIp, /^10\.185\.3\.\d+$/);
  // The node (the knit bridge's side) pings the pod; its host end is on knit's bridge.
  t.true([1, 2, 3].some(() => pingFrom(undefined, knitIp)), `no answer from ${knitIp}`);
  const host = hostLinks().filter((l) => l.ifalias?.includes(`sandbox=${id};`));
  t.is(host.length, 1);
  t.is(host[0]!.master, `${P}br`);
  const tables = () => JSON.parse(sh('/usr/sbin/nft', '-j', 'list', 'tables')).nftables.filter((x: any) => x.table?.name.startsWith(`hostports-knit-${P}`));
  t.is(tables().length, 1, 'the hostPort is knit\'s host-port table');

  await cri!.call('StopPodSandbox', { pod_sandbox_id: id });
  await t.throwsAsync(d!.call('Query', { sandbox_id: id }), undefined, 'StopPodSandbox ran the CNI DEL');
  await cri!.call('RemovePodSandbox', { pod_sandbox_id: id });
  sandboxes.pop();
  await eventually(() => hostLinks().every((l) => !l.ifalias?.includes(`sandbox=${id};`)), 'the pod\'s host link deleted');
  t.deepEqual(tables(), []);
  const node = await d!.call('NodeStatus', {});
  t.is(Number(node.networks.find((n: any) => n.name === `${P}net`).pools[0].used), 0, 'no address held');
  t.false(ctr('containers', 'ls', '-q').includes(id), 'containerd forgot the sandbox');
});
