// knit over gRPC, client-observed: the daemon runs as a child process with a temporary config
// and socket; each attach is one Attach RPC and each detach one Detach RPC, from a grpc-js
// client ('knit') or a C-core client ('knit-c', as a Go or C caller would see knit). The clock
// runs around the call, so the transport is included: compare with the grpc / grpc-c rows.
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import type { BenchNetwork, Contender, Flavor, Sandbox, SetupContext } from '../lib/contender.js';
import { startDaemon, type Daemon } from '../lib/daemon.js';
import { cniEnv, ipBatch, spawnAsRuntime, untilReaped } from '../lib/exec.js';
import { reapGroup, setInstance } from '../../src/base/names.js';
import { knitProto } from '../../src/api/proto.js';
import { CCoreClient } from '../lib/ccore-client.js';
import { bridgeHostLocal, CNI_BIN_DIR, keepHostForwarding } from './cni.js';
import { launcherNodeFlags } from '../lib/knit-process.js';

export type ClientKind = 'grpc-js' | 'c-core';

/** How a sandbox reaches the daemon: an RPC, or knit-cni exec'd per ADD and DEL as a CNI runtime does. */
export type Path = 'rpc' | 'shim';


/** knit's own bridge network, or the same bridge + host-local as a CNI chain knit executes. */
export type NetworkKind = 'bridge' | 'cni';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const SHIM = path.join(repoRoot, 'build', 'native', 'knit-cni');

/** The network name the bench config defines. */
const NETWORK = 'bench';

/** The conflist entry a runtime execs knit-cni with, for the daemon whose scratch dir this is. */
export function shimConfig(prefix: string, scratch: string): string {
  return JSON.stringify({ cniVersion: '1.0.0', name: `${prefix}-shim`, type: 'knit', network: NETWORK, socket: path.join(scratch, 'cni.sock') });
}

type Unary = (req: object, cb: (err: grpc.ServiceError | null, res?: unknown) => void) => void;

/** knit.v1.AttachRequest (proto field names, enums as strings: src/api/proto.ts loader options). */
export function attachRequest(sb: Sandbox, flavor: Flavor): object {
  const runtime = flavor === 'kata-tcfilter' ? 'KATA' : flavor === 'kubevirt-tap' ? 'KUBEVIRT' : 'RUNC';
  const binding: Record<string, string> =
    flavor === 'kata-tcfilter' ? { mode: 'tcfilter' } : flavor === 'kubevirt-tap' ? { binding: 'tap' } : {};
  return {
    sandbox_id: sb.id,
    pod_name: sb.id,
    pod_namespace: 'bench',
    netns_path: sb.netnsPath,
    runtime,
    interfaces: [{ name: sb.ifname, network: NETWORK, binding }],
  };
}

export class KnitContender implements Contender {
  readonly name: string;
  readonly label: string;
  readonly kind = 'network';
  readonly flavors: readonly Flavor[];
  readonly maxConcurrency = 16;
  private daemon?: Daemon;
  private client?: grpc.Client;
  private net?: BenchNetwork;
  private prefix = '';
  private tag = '';
  private scratch = '';
  private reapGroup = 0;
  private ccore?: CCoreClient;
  private restoreForwarding?: () => void;

  constructor(
    private readonly clientKind: ClientKind = 'grpc-js',
    private readonly networkKind: NetworkKind = 'bridge',
    private readonly via: Path = 'rpc',
    /** false: the daemon runs on node's own V8 settings, not bin/knit's flags (what they cost). */
    private readonly launcherFlags = true,
    /** Another checkout's build to run the daemon from (`knit-alt`: a before and an after in one run). */
    private readonly altRoot?: string,
  ) {
    if (altRoot !== undefined) {
      this.name = 'knit-alt';
      this.label = `knit (gRPC), the build in ${altRoot}`;
      this.flavors = ['runc'];
      return;
    }
    if (!launcherFlags) {
      this.name = 'knit-v8default';
      this.label = 'knit (gRPC), node\'s default V8 settings instead of bin/knit\'s';
      this.flavors = ['runc'];
      return;
    }
    if (via === 'shim') {
      this.name = 'knit-shim';
      this.label = 'knit via knit-cni (exec\'d per ADD/DEL as a CNI runtime does)';
      this.flavors = ['runc'];
      return;
    }
    if (networkKind === 'cni') {
      this.name = 'knit-cni';
      this.label = 'knit (gRPC) on a CNI chain: bridge+host-local';
      this.flavors = ['runc'];
      return;
    }
    this.name = clientKind === 'c-core' ? 'knit-c' : 'knit';
    this.label = clientKind === 'c-core' ? 'knit (gRPC, C-core client)' : 'knit (gRPC)';
    this.flavors = ['runc', 'kata-tcfilter', 'kubevirt-tap'];
  }

  async setup(ctx: SetupContext): Promise<void> {
    this.net = ctx.network;
    this.prefix = ctx.prefix;
    this.tag = ctx.tag;
    this.scratch = ctx.scratch;
    if (this.networkKind === 'cni') this.restoreForwarding = keepHostForwarding();
    // the daemon runs as instance <prefix> (config below), so no other knit daemon on this
    // host (tests, the real one) sweeps or reaps its devices; its reap group follows the name
    setInstance(ctx.prefix);
    this.reapGroup = reapGroup();
    const socket = path.join(ctx.scratch, 'knit.sock');
    const configPath = path.join(ctx.scratch, 'config.json');
    writeFileSync(configPath, JSON.stringify(daemonConfig(ctx, socket, this.networkKind), null, 2));
    if (this.altRoot === '') throw new Error('knit-alt runs another checkout\'s build: set KNIT_BENCH_ALT_ROOT to it');
    if (this.altRoot !== undefined && !existsSync(path.join(this.altRoot, 'build', 'src', 'cli', 'main.js'))) throw new Error(`KNIT_BENCH_ALT_ROOT=${this.altRoot} holds no build (build/src/cli/main.js)`);
    const { cmd, args } = daemonCommand(configPath, this.launcherFlags, this.altRoot);
    this.daemon = await startDaemon({ what: 'knit daemon', cmd, args, socket, timeoutMs: 30000 });
    ctx.trackPid(this.daemon.pid, 'knit daemon');
    const { Knit } = knitProto();
    this.client = new Knit(`unix://${socket}`, grpc.credentials.createInsecure());
    await new Promise<void>((resolve, reject) =>
      this.client!.waitForReady(Date.now() + 10000, (err) => (err ? reject(new Error(`knit daemon at ${socket}: ${err.message}`)) : resolve())),
    );
    // the socket appears once the API serves; NodeStatus says whether the bench network is up
    const status = (await this.unary('NodeStatus', {})) as { ready: boolean; reason: string; message: string };
    if (!status.ready) throw new Error(`knit daemon not ready: ${status.reason}: ${status.message}`);
    if (this.clientKind === 'c-core') {
      this.ccore = new CCoreClient(socket);
      ctx.trackPid(this.ccore.pid!, 'C-core gRPC client');
    }
  }

  async attach(sb: Sandbox, flavor: Flavor): Promise<number | void> {
    if (this.via === 'shim') return this.shim('ADD', sb);
    return this.call('Attach', attachRequest(sb, flavor), sb);
  }

  async detach(sb: Sandbox): Promise<number | void> {
    if (this.via === 'shim') return this.shim('DEL', sb);
    return this.call('Detach', { sandbox_id: sb.id, netns_path: sb.netnsPath }, sb);
  }

  /** One knit-cni process, env and stdin exactly as a runtime passes them. */
  private async shim(command: 'ADD' | 'DEL', sb: Sandbox): Promise<void> {
    const r = await spawnAsRuntime(SHIM, cniEnv(command, sb, CNI_BIN_DIR), shimConfig(this.prefix, this.scratch));
    if (r.code !== 0) throw new Error(`knit-cni ${command} ${sb.id}: exit ${r.code}: ${(r.stdout || r.stderr).trim()}`);
  }

  private async call(method: string, req: object, sb: Sandbox): Promise<number | void> {
    if (!this.ccore) {
      await this.unary(method, req, sb);
      return;
    }
    const def = (this.client!.constructor as unknown as grpc.ServiceClientConstructor).service[method];
    return this.ccore.call(def.path, def.requestSerialize(req));
  }

  /** Detach only moves devices into knit's reap group; wait until the reaper deleted ours. */
  settle(): Promise<void> {
    return untilReaped(this.reapGroup, (l) => !!l.ifalias?.includes(`sandbox=${this.prefix}-`));
  }

  daemonPid(): number | undefined {
    return this.daemon?.pid;
  }

  async teardown(): Promise<void> {
    await this.ccore?.close();
    this.client?.close();
    await this.daemon?.stop();
    // the daemon made the bridge from its config; like CNI it leaves it when stopping
    if (this.net) await ipBatch([`link del ${this.net.bridge}`], undefined, true);
    this.restoreForwarding?.();
    rmSync(benchRunDir({ scratch: this.scratch, prefix: this.prefix, tag: this.tag }), { recursive: true, force: true });
  }

  private unary(method: string, req: object, sb?: Sandbox): Promise<unknown> {
    const fn = (this.client as unknown as Record<string, Unary>)[method];
    return new Promise((resolve, reject) =>
      fn.call(this.client, req, (err, res) =>
        err ? reject(new Error(`knit ${method}${sb ? ` ${sb.id}` : ''}: ${grpc.status[err.code]}: ${err.details}`)) : resolve(res),
      ),
    );
  }
}

/** Where the daemon keeps its sandbox records. knit's default runDir is /run/knit, and /run is a
 * tmpfs on a systemd node; this VM's /run sits on its disk, so the bench puts the records on
 * /dev/shm (a tmpfs) to measure what a node sees. KNIT_BENCH_RUNDIR=disk measures the disk. */
export function benchRunDir(ctx: { scratch: string; prefix: string; tag: string }): string {
  // One per daemon: the contenders' daemons and the boot phase's run side by side.
  return process.env.KNIT_BENCH_RUNDIR === 'disk' ? path.join(ctx.scratch, 'run') : path.join('/dev/shm', `${ctx.prefix}${ctx.tag}-knit-run`);
}

/** A config with everything in the contender's scratch dir and one network: knit's bridge, or
 * the CNI contender's bridge + host-local as a chain (its cache in the scratch dir too). */
export function daemonConfig(ctx: SetupContext, socket: string, kind: NetworkKind): object {
  const net = ctx.network;
  const network = kind === 'cni'
    ? { name: NETWORK, mode: 'cni', cni: { conflist: { cniVersion: '1.0.0', name: `${ctx.prefix}-chain`, plugins: [bridgeHostLocal(ctx)] }, cacheDir: path.join(ctx.scratch, 'cni-cache') } }
    : { name: NETWORK, mode: 'bridge', bridge: net.bridge, ipv4: { subnet: net.subnet, gateway: net.gateway } };
  return {
    socket,
    runDir: benchRunDir(ctx),
    stateDir: path.join(ctx.scratch, 'state'),
    netnsDir: path.join(ctx.scratch, 'netns'),
    handoffSocket: path.join(ctx.scratch, 'handoff.sock'),
    cniSocket: path.join(ctx.scratch, 'cni.sock'),
    cniDeleteQueue: path.join(ctx.scratch, 'cni-delete-queue'),
    instance: ctx.prefix,
    logLevel: 'info', // the shipped default: logging is part of what a real attach costs
    networks: [network],
  };
}

/** `knit serve` when the CLI is built, else the bench's launcher around the same serve(), with
 * the node flags `bin/knit` starts the daemon with (its shebang line), as a node runs it.
 * KNIT_BENCH_DAEMON_NODE_ARGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof") goes to the daemon's
 * node only, for profiling the daemon's side of a run (Node refuses --cpu-prof in NODE_OPTIONS). */
export function daemonCommand(configPath: string, withLauncherFlags = true, root = repoRoot): { cmd: string; args: string[] } {
  const nodeArgs = [...(withLauncherFlags ? launcherNodeFlags(root) : []), ...(process.env.KNIT_BENCH_DAEMON_NODE_ARGS?.split(/\s+/).filter(Boolean) ?? [])];
  const cli = path.join(root, 'build', 'src', 'cli', 'main.js');
  if (existsSync(cli)) return { cmd: process.execPath, args: [...nodeArgs, cli, 'serve', '--config', configPath] };
  return { cmd: process.execPath, args: [...nodeArgs, path.join(repoRoot, 'build', 'bench', 'knit-daemon.js'), configPath] };
}
