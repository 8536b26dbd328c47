// knit's image, run the way deploy/daemonset.yaml runs it: podman with host network and PID, the
// exact capabilities of the manifest (never --privileged), the socket/run/state dirs, /run/netns
// (rshared) and /sys mounted. Its init step (`knit install-cni`) installs into test-private CNI
// dirs; a runc container on the host is attached through that installed knit-cni, exec'd as a
// runtime execs it, and a pod through gRPC. Then an upgrade and a rollback: version A is
// replaced by B (A with a bumped package.json) and back while two pods ping each other, and a
// record of a newer format stops the older knit with a clear message.
import test from 'ava';
import { removeIfCreated } from '../fixtures/cleanup.js';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import {
  cleanupDaemon, daemonConfig, eventually, ipJson, knitLinksFor, pingFrom, podFactory, promisified, runcAttachReq, type Call,
} from '../helpers/daemon.js';
import { startContainer, type Container } from '../fixtures/runc.js';
import { uniquePrefix } from '../helpers/names.js';
import * as grpc from '@grpc/grpc-js';
import { knitProto } from '../../src/api/proto.js';
import { SANDBOX_RECORD_VERSION } from '../../src/core/record.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const P = uniquePrefix('uimg');
const opts = { prefix: P, subnet: '10.186.1.0/24' };
const imageA = `localhost/knit-${P.replace(/-+$/, '')}:a`;
const imageB = `localhost/knit-${P.replace(/-+$/, '')}:b`;
const pods = podFactory(P);
const ULIMITS = ['--ulimit', 'nofile=1024:1024', '--ulimit', 'nproc=1024:1024'];
const containers: string[] = [];
const runcs: Container[] = [];
const clients: grpc.Client[] = [];
let dir = '';
let configPath = '';
let versionA = '';
const versionB = '99.0.0-upgrade';

// podman and buildah (build-image.sh's too) on private storage and network config, through
// the files both read: the host's /var/lib/containers, /run/containers and /etc/cni/net.d (where
// their CNI backend takes a lock file even for --network host) are left as they were. File
// locks in the private tmp_dir: podman's default, a shared memory segment /dev/shm/libpod_lock,
// would outlive the test and be shared with the host's own podman.
const containersDir = mkdtempSync(path.join(os.tmpdir(), `knit-${P}-containers-`));
const podmanNetDir = path.join(containersDir, 'net.d');
const storageRoot = path.join(containersDir, 'storage');
writeFileSync(path.join(containersDir, 'storage.conf'), `[storage]\ndriver = "overlay"\ngraphroot = "${storageRoot}"\nrunroot = "${path.join(containersDir, 'run')}"\n`);
writeFileSync(
  path.join(containersDir, 'containers.conf'),
  `[network]\nnetwork_backend = "cni"\nnetwork_config_dir = "${podmanNetDir}"\n[engine]\nlock_type = "file"\ntmp_dir = "${path.join(containersDir, 'tmp')}"\n`,
);
const containersEnv = {
  ...process.env,
  CONTAINERS_STORAGE_CONF: path.join(containersDir, 'storage.conf'),
  CONTAINERS_CONF: path.join(containersDir, 'containers.conf'),
};
// containers/image keeps a blob-info cache under /var/lib/containers whatever storage it is
// given, and podman runs runc with runc's own state root, /run/runc.
const removeHostCache = removeIfCreated(['/var/lib/containers', '/var/lib/containers/cache', '/var/lib/containers/cache/blob-info-cache-v1.boltdb', '/run/runc']);
const PODMAN_GLOBAL = ['--network-config-dir', podmanNetDir];
const podman = (args: string[]) => execFileSync('podman', [...PODMAN_GLOBAL, ...args], { encoding: 'utf8', env: containersEnv }).trim();

/** The knit container's capabilities, read from the manifest so test and DaemonSet cannot drift. */
function manifestCaps(): string[] {
  const ds = parseYaml(readFileSync(path.join(root, 'deploy', 'daemonset.yaml'), 'utf8'));
  const knit = ds.spec.template.spec.containers.find((c: any) => c.name === 'knit');
  if (knit.securityContext.privileged) throw new Error('the DaemonSet runs knit privileged: this test checks exact capabilities');
  return knit.securityContext.capabilities.add;
}

test.before(() => {
  execFileSync(path.join(root, 'scripts', 'build-image.sh'), [imageA], { stdio: ['ignore', 'ignore', 'inherit'], timeout: 600_000, env: containersEnv });
  versionA = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')).version;
  // B: A with a bumped package.json (what Version reports) and label, one layer on top of A.
  const work = mkdtempSync(path.join(os.tmpdir(), `knit-${P}-b-`));
  let ctr = '';
  try {
    const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
    writeFileSync(path.join(work, 'package.json'), JSON.stringify({ ...pkg, version: versionB }, null, 2));
    const buildah = (args: string[]) => execFileSync('buildah', args, { encoding: 'utf8', env: containersEnv }).trim();
    ctr = buildah(['from', '--cni-config-dir', podmanNetDir, imageA]);
    buildah(['copy', ctr, path.join(work, 'package.json'), '/opt/knit/package.json']);
    buildah(['config', '--label', `org.opencontainers.image.version=${versionB}`, ctr]);
    buildah(['commit', '--quiet', '--rm', ctr, imageB]);
    ctr = '';
  } finally {
    if (ctr) execFileSync('buildah', ['rm', ctr], { stdio: 'ignore', env: containersEnv });
    rmSync(work, { recursive: true, force: true });
  }
  dir = mkdtempSync(path.join(os.tmpdir(), `knit-${P}-`));
  configPath = path.join(dir, 'config.json');
  writeFileSync(configPath, JSON.stringify(daemonConfig(opts, dir)));
});

test.after.always(async () => {
  for (const c of clients) c.close();
  for (const r of runcs) await r.stop();
  for (const c of containers) execFileSync('podman', [...PODMAN_GLOBAL, 'rm', '-f', '-t', '5', c], { stdio: 'ignore', env: containersEnv });
  for (const image of [imageB, imageA]) {
    try {
      execFileSync('podman', [...PODMAN_GLOBAL, 'rmi', '-f', image], { stdio: 'ignore', env: containersEnv });
    } catch {
      /* never built */
    }
  }
  await cleanupDaemon(undefined, opts, pods.ids);
  pods.removeAll();
  if (dir) rmSync(dir, { recursive: true, force: true });
  spawnSync('umount', ['-R', path.join(storageRoot, 'overlay')]); // the overlay driver's private bind mount
  rmSync(containersDir, { recursive: true, force: true });
  removeHostCache();
});

/** podman run flags of deploy/daemonset.yaml's pod: host namespaces, the manifest's exact
 * capabilities, host paths. */
function daemonSetRun(name: string, image: string, extra: string[], command: string[]): string[] {
  containers.push(name);
  return ['run', '--name', name, ...ULIMITS, '--network', 'host', '--pid', 'host',
    '--cap-drop', 'all', ...manifestCaps().flatMap((c) => ['--cap-add', c]),
    '-v', `${dir}:${dir}`, '-v', '/run/netns:/run/netns:rshared', '-v', '/sys:/sys', ...extra, image, ...command];
}

/** Starts `knit serve` from an image and waits until its Version answers. */
async function serve(name: string, image: string): Promise<Call> {
  podman(daemonSetRun(name, image, ['-d'], ['knit', 'serve', '--config', configPath]));
  const client = new (knitProto().Knit as any)(`unix://${path.join(dir, 'knit.sock')}`, grpc.credentials.createInsecure());
  clients.push(client);
  const call = promisified(client);
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      await call('Version', {});
      return call;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`${name} did not serve: ${String(err)}\n${podman(['logs', name])}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** Stops a knit container the way the kubelet does (SIGTERM, then its grace) and removes it. */
function replace(name: string): void {
  podman(['rm', '-f', '-t', '10', name]);
  containers.splice(containers.indexOf(name), 1);
}

/** The installed knit-cni, exec'd as a runtime execs a conflist's plugin. */
function installedShim(cniBin: string, cniConf: string, command: string, id: string, netns: string) {
  const [file] = readdirSync(cniConf);
  const list = JSON.parse(readFileSync(path.join(cniConf, file!), 'utf8'));
  const r = spawnSync(path.join(cniBin, list.plugins[0].type), [], {
    input: JSON.stringify({ cniVersion: list.cniVersion, name: list.name, ...list.plugins[0] }),
    encoding: 'utf8',
    env: { PATH: process.env.PATH, CNI_COMMAND: command, CNI_CONTAINERID: id, CNI_NETNS: netns, CNI_IFNAME: 'eth0', CNI_ARGS: '', CNI_PATH: cniBin },
  });
  return { code: r.status, out: r.stdout.trim() ? JSON.parse(r.stdout) : undefined, raw: `${r.stdout}${r.stderr}` };
}

const sandboxIds = async (call: Call) => ((await call('List', {})).sandboxes as any[]).map((s) => s.sandbox_id ?? s.request?.sandbox_id).sort();
const onlyLo = (ns: string) => ipJson(['link', 'show'], ns).map((l: any) => l.ifname);

test.serial('the image installs knit-cni; a runc container attaches through the installed shim and a pod through gRPC, with exact capabilities', async (t) => {
  const cniBin = path.join(dir, 'cni-bin');
  const cniConf = path.join(dir, 'cni-conf');
  mkdirSync(cniBin);
  mkdirSync(cniConf);

  // The init container, its host CNI dirs mounted where the DaemonSet mounts them.
  podman(daemonSetRun(`${P}-init`, imageA, ['--rm', '-v', `${cniBin}:/host/opt/cni/bin`, '-v', `${cniConf}:/host/etc/cni/net.d`],
    ['knit', 'install-cni', '--config', configPath, '--bin-dir', '/host/opt/cni/bin', '--conf-dir', '/host/etc/cni/net.d', '--network', `${P}net`]));
  containers.pop();
  t.deepEqual(readdirSync(cniBin), ['knit'], 'knit-cni installed under its CNI type name');
  t.is(readdirSync(cniConf).length, 1);

  const call = await serve(`${P}-knit`, imageA);
  // A runc container started on the host, attached as its runtime would: CNI ADD through the
  // installed shim with the installed conflist.
  const cpod = pods.pod(1);
  const ctr = await startContainer({ id: `${P}-c1-${process.pid}`, netnsPath: cpod.path });
  runcs.push(ctr);
  const add = installedShim(cniBin, cniConf, 'ADD', cpod.id, cpod.path);
  t.is(add.code, 0, add.raw);
  t.regex(add.out.ips[0].address, /^10\.186\.1\.\d+\/24$/);
  const ping = await ctr.exec(['ping', '-c', '2', '-W', '2', add.out.ips[0].gateway]);
  t.is(ping.code, 0, `the container pings its gateway: ${ping.stdout}${ping.stderr}`);

  // A pod through gRPC, as today.
  const gpod = pods.pod(2);
  const { result } = await call('Attach', runcAttachReq(gpod.id, gpod.path));
  t.regex(result.ips[0].address, /^10\.186\.1\./);
  t.true(pingFrom(gpod.ns, add.out.ips[0].address.split('/')[0]), 'the gRPC pod reaches the CNI one');

  const del = installedShim(cniBin, cniConf, 'DEL', cpod.id, cpod.path);
  t.is(del.code, 0, del.raw);
  await call('Detach', { sandbox_id: gpod.id });
  await eventually(() => knitLinksFor({ bridge: `${P}br` }, [cpod.id, gpod.id]).every((l) => l === `${P}br`), 'pod host ends removed');
  t.deepEqual(onlyLo(cpod.ns), ['lo']);
  t.deepEqual(onlyLo(gpod.ns), ['lo']);
  t.deepEqual(await sandboxIds(call), []);
  replace(`${P}-knit`);
});

/** A ping at 20/s from one pod to another; lost() counts the sequence numbers with no reply up
 * to the last one answered (the one in flight when it is stopped is not a loss). */
function steadyPing(fromNs: string, to: string) {
  const child = spawn('ip', ['netns', 'exec', fromNs, 'stdbuf', '-oL', 'ping', '-n', '-i', '0.05', '-W', '1', to], { stdio: ['ignore', 'pipe', 'ignore'] });
  const replied = new Set<number>();
  child.stdout.setEncoding('utf8').on('data', (s: string) => {
    for (const m of s.matchAll(/icmp_seq=(\d+) ttl=/g)) replied.add(Number(m[1]));
  });
  const last = () => Math.max(0, ...replied);
  return {
    last,
    lost: () => Array.from({ length: last() }, (_, i) => i + 1).filter((s) => !replied.has(s)),
    stop: () => new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.kill('SIGINT');
    }),
  };
}

/** Replaces `from` by a container of `image`, with a ping running from before the stop to after
 * the new one serves; returns the new one's call and the lost sequence numbers. */
async function swapUnderTraffic(t: any, from: string, to: string, image: string, ping: ReturnType<typeof steadyPing>) {
  const before = ping.last();
  replace(from);
  const call = await serve(to, image);
  const served = ping.last();
  await eventually(() => ping.last() >= served + 20, 'pings answered after the swap', 10_000);
  t.true(before > 0 && ping.last() > before, 'the ping ran across the swap');
  return call;
}

test.serial('upgrade A→B and rollback B→A under traffic: pods keep every packet, each knit adopts every record, detach leaves nothing', async (t) => {
  let call = await serve(`${P}-a1`, imageA);
  t.is((await call('Version', {})).version, versionA);
  const ps = [3, 4, 5].map((n) => pods.pod(n));
  const ips: string[] = [];
  for (const p of ps) ips.push((await call('Attach', runcAttachReq(p.id, p.path))).result.ips[0].address.split('/')[0]);
  const ping = steadyPing(ps[0]!.ns, ips[1]!);
  try {
    await eventually(() => ping.last() >= 5, 'the first replies');
    call = await swapUnderTraffic(t, `${P}-a1`, `${P}-b`, imageB, ping);
    t.is((await call('Version', {})).version, versionB, 'B serves');
    t.deepEqual(await sandboxIds(call), ps.map((p) => p.id).sort(), 'B adopted every record');
    await call('Detach', { sandbox_id: ps[2]!.id });
    await eventually(() => knitLinksFor({ bridge: `${P}br` }, [ps[2]!.id]).every((l) => l === `${P}br`), 'detached through B');
    t.deepEqual(onlyLo(ps[2]!.ns), ['lo']);

    call = await swapUnderTraffic(t, `${P}-b`, `${P}-a2`, imageA, ping);
    t.is((await call('Version', {})).version, versionA, 'A serves again');
    t.deepEqual(await sandboxIds(call), [ps[0]!.id, ps[1]!.id].sort(), 'A adopted every record B left');
  } finally {
    await ping.stop();
  }
  t.deepEqual(ping.lost(), [], 'no packet lost across the upgrade and the rollback');
  t.true(pingFrom(ps[1]!.ns, ips[0]!));

  // A record of a newer format: the older knit refuses to start, says why, and touches nothing.
  replace(`${P}-a2`);
  const sandboxes = path.join(dir, 'run', 'sandboxes');
  const file = readdirSync(sandboxes).find((f) => !f.startsWith('.') && readFileSync(path.join(sandboxes, f), 'utf8').includes(ps[0]!.id))!;
  const original = readFileSync(path.join(sandboxes, file), 'utf8');
  const newer = SANDBOX_RECORD_VERSION + 1;
  writeFileSync(path.join(sandboxes, file), JSON.stringify({ ...JSON.parse(original), version: newer }));
  podman(daemonSetRun(`${P}-old`, imageA, ['-d'], ['knit', 'serve', '--config', configPath]));
  // Bounded: a knit that wrongly starts must fail this test, not hang it.
  const exit = execFileSync('podman', [...PODMAN_GLOBAL, 'wait', `${P}-old`], { encoding: 'utf8', timeout: 60_000, env: containersEnv }).trim();
  t.not(exit, '0', 'the older knit does not start');
  const logs = spawnSync('podman', [...PODMAN_GLOBAL, 'logs', `${P}-old`], { encoding: 'utf8', env: containersEnv });
  t.true((logs.stdout + logs.stderr).includes(`format version ${newer}, written by a newer knit; this knit reads format version ${SANDBOX_RECORD_VERSION} at most`), logs.stdout + logs.stderr);
  replace(`${P}-old`);
  t.true(pingFrom(ps[0]!.ns, ips[1]!), 'the pods keep their traffic while knit refuses');

  writeFileSync(path.join(sandboxes, file), original);
  call = await serve(`${P}-a3`, imageA);
  for (const p of ps.slice(0, 2)) await call('Detach', { sandbox_id: p.id });
  await eventually(() => knitLinksFor({ bridge: `${P}br` }, ps.map((p) => p.id)).every((l) => l === `${P}br`), 'pod host ends removed');
  for (const p of ps) t.deepEqual(onlyLo(p.ns), ['lo']);
  replace(`${P}-a3`);
});
