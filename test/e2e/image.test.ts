// knit's image, run the way deploy/daemonset.yaml runs it: podman with host network and PID,
// privileged, the socket/run/state dirs, /run/netns (rshared) and /sys mounted. Its init step
// (`knit install-cni`) installs into test-private CNI dirs; a pod netns on the host is then
// attached through gRPC from the host, reaches its gateway, and detaches leaving nothing.
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  cleanupDaemon, daemonConfig, eventually, ipJson, knitLinksFor, pingFrom, podFactory, promisified, runcAttachReq,
} from '../helpers/daemon.js';
import { uniquePrefix } from '../helpers/names.js';
import * as grpc from '@grpc/grpc-js';
import { knitProto } from '../../src/api/proto.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const P = uniquePrefix('dimg');
const opts = { prefix: P, subnet: '10.173.2.0/24' };
const image = `localhost/knit-${P.replace(/-+$/, "")}:test`;
const pods = podFactory(P);
const ULIMITS = ['--ulimit', 'nofile=1024:1024', '--ulimit', 'nproc=1024:1024'];
let dir = '';
const containers: string[] = [];

test.after.always(async () => {
  for (const c of containers) execFileSync('podman', [...PODMAN_GLOBAL, 'rm', '-f', '-t', '5', c], { stdio: 'ignore' });
  try {
    execFileSync('podman', [...PODMAN_GLOBAL, 'rmi', '-f', image], { stdio: 'ignore' });
  } catch {
    /* never built */
  }
  await cleanupDaemon(undefined, opts, pods.ids);
  pods.removeAll();
  if (dir) rmSync(dir, { recursive: true, force: true });
  rmSync(podmanNetDir, { recursive: true, force: true });
});

// podman's CNI backend takes a lock file in its network config dir even for --network host:
// point it at a private dir so /etc/cni/net.d is left as it was.
const podmanNetDir = mkdtempSync(path.join(os.tmpdir(), `knit-${P}-podnet-`));
const PODMAN_GLOBAL = ['--network-config-dir', podmanNetDir];

/** podman run flags of deploy/daemonset.yaml's pod: host namespaces, privileged, host paths. */
function daemonSetRun(name: string, mounts: string[]): string[] {
  containers.push(name);
  return ['run', '--name', name, ...ULIMITS, '--network', 'host', '--pid', 'host', '--privileged',
    '-v', `${dir}:${dir}`, '-v', '/run/netns:/run/netns:rshared', '-v', '/sys:/sys', ...mounts.flatMap((m) => ['-v', m]), image];
}

test.serial('the image installs knit-cni, serves gRPC on the host socket, and attaches a host pod', async (t) => {
  execFileSync(path.join(root, 'scripts', 'build-image.sh'), [image], { stdio: ['ignore', 'ignore', 'inherit'], timeout: 600_000 });
  dir = mkdtempSync(path.join(os.tmpdir(), `knit-${P}-`));
  const cniBin = path.join(dir, 'cni-bin');
  const cniConf = path.join(dir, 'cni-conf');
  mkdirSync(cniBin);
  mkdirSync(cniConf);
  const configPath = path.join(dir, 'config.json');
  writeFileSync(configPath, JSON.stringify({ ...daemonConfig(opts, dir), cniSocket: path.join(dir, 'cni.sock') }));

  // The init container.
  execFileSync('podman', [...PODMAN_GLOBAL, ...daemonSetRun(`${P}-init`, []).slice(0, -1), '--rm', image,
    'knit', 'install-cni', '--config', configPath, '--bin-dir', cniBin, '--conf-dir', cniConf, '--network', `${P}net`]);
  containers.pop();
  t.deepEqual(readdirSync(cniBin), ['knit'], 'knit-cni installed under its CNI type name');
  t.is(readdirSync(cniConf).length, 1);

  // The daemon container.
  execFileSync('podman', [...PODMAN_GLOBAL, ...daemonSetRun(`${P}-knit`, []).slice(0, -1), '-d', image, 'knit', 'serve', '--config', configPath]);
  const client = new (knitProto().Knit as any)(`unix://${path.join(dir, 'knit.sock')}`, grpc.credentials.createInsecure());
  const call = promisified(client);
  await eventually(() => existsSync(path.join(dir, 'knit.sock')), 'the daemon socket', 30_000);
  try {
    const pod = pods.pod(1);
    const { result } = await call('Attach', runcAttachReq(pod.id, pod.path));
    t.regex(result.ips[0].address, /^10\.173\.2\./);
    t.true(pingFrom(pod.ns, result.ips[0].gateway), 'the pod reaches its gateway on the bridge the image made');
    await call('Detach', { sandbox_id: pod.id });
    await eventually(() => knitLinksFor({ bridge: `${P}br` }, [pod.id]).every((l) => l === `${P}br`), 'pod host end removed');
    t.deepEqual(ipJson(['link', 'show'], pod.ns).map((l: any) => l.ifname), ['lo']);
  } finally {
    client.close();
  }
});
