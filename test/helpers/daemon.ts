// A real knit daemon per test: its own socket, run/state dirs, bridge and subnet (all named
// with the test's prefix), started as a child process exactly as `knit serve` runs, and a
// promisified knit.v1 client. stop() ends only that PID and removes everything it made.
import * as grpc from '@grpc/grpc-js';
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { knitProto } from '../../src/api/proto.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const CLI = path.join(root, 'build', 'src', 'cli', 'main.js');

export interface DaemonOptions {
  /** Unique per test, ≤ 8 chars: names the bridge, netns and dirs. */
  prefix: string;
  /** /24 v4 subnet unique to this test, e.g. "10.231.7.0/24". */
  subnet: string;
  subnet6?: string;
  mode?: 'bridge' | 'routed';
  /** More fields of the test's own network (e.g. { hairpin: false }). */
  network?: Record<string, unknown>;
  extraNetworks?: object[];
  config?: Record<string, unknown>;
  env?: Record<string, string>;
  /** Run the daemon inside this netns (by name, `ip netns exec`): what it makes on "the host"
   * (and what CNI plugins such as portmap and firewall add to iptables) stays in there. */
  netns?: string;
  /** Node flags before the CLI (bin/knit's, say); default none: node's own settings. */
  nodeFlags?: string[];
}

export type Call = <T = any>(method: string, req?: object) => Promise<T>;

export interface Daemon {
  socket: string;
  dir: string;
  bridge: string;
  configPath: string;
  child: ChildProcess;
  call: Call;
  /** stdout lines (pino JSON) so far. */
  logs: string[];
  /** Resolves with the exit signal/code. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stop(): Promise<void>;
  /** Start another daemon process on the same dirs/config (after a crash). */
  restart(env?: Record<string, string>): Promise<Daemon>;
  close(): void;
}

function client(socket: string) {
  const { Knit } = knitProto();
  return new Knit(`unix://${socket}`, grpc.credentials.createInsecure());
}

export function promisified(c: grpc.Client): Call {
  return (method, req = {}) =>
    new Promise((resolve, reject) => {
      (c as any)[method](req, { deadline: Date.now() + 60_000 }, (err: grpc.ServiceError | null, res: any) => (err ? reject(err) : resolve(res)));
    });
}

export function daemonConfig(o: DaemonOptions, dir: string) {
  return {
    socket: path.join(dir, 'knit.sock'),
    runDir: path.join(dir, 'run'),
    stateDir: path.join(dir, 'state'),
    netnsDir: path.join(dir, 'netns'),
    handoffSocket: path.join(dir, 'handoff.sock'),
    cniSocket: path.join(dir, 'cni.sock'),
    cniDeleteQueue: path.join(dir, 'cni-delete-queue'),
    logLevel: 'debug',
    // Tests run daemons side by side: each must see only its own objects.
    instance: `knit-${o.prefix}`,
    networks: [
      {
        name: `${o.prefix}net`,
        mode: o.mode ?? 'bridge',
        bridge: `${o.prefix}br`,
        ipv4: { subnet: o.subnet },
        ...(o.subnet6 ? { ipv6: { subnet: o.subnet6 } } : {}),
        ...o.network,
      },
      ...(o.extraNetworks ?? []),
    ],
    ...o.config,
  };
}

// Daemons this test process started: if the test process dies (an ava timeout), they must not
// outlive it.
const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

async function launch(o: DaemonOptions, dir: string, configPath: string, env: Record<string, string> = {}): Promise<Daemon> {
  const cfg = daemonConfig(o, dir);
  const argv = [process.execPath, ...(o.nodeFlags ?? []), CLI, 'serve', '--config', configPath];
  // `ip netns exec` execs the daemon in place: the child's PID is the daemon's.
  const [cmd, ...args] = o.netns ? ['ip', 'netns', 'exec', o.netns, ...argv] : argv;
  const child = spawn(cmd, args, {
    env: { ...process.env, ...o.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  const logs: string[] = [];
  let stderr = '';
  // Whole lines only: a pipe read can end mid-line, and a test looking for a message must not
  // miss it because it arrived in two halves.
  createInterface({ input: child.stdout!, crlfDelay: Infinity }).on('line', (l) => l && logs.push(l));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const c = client(cfg.socket);
  const call = promisified(c);

  // Ready when NodeStatus answers; fail fast if the process dies first.
  const deadline = Date.now() + 30_000;
  let dead = false;
  void exited.then(() => (dead = true));
  for (;;) {
    if (dead) throw new Error(`knit serve exited during start-up: ${stderr}\n${logs.join('\n')}`);
    if (existsSync(cfg.socket)) {
      // A fresh client each time: one that met a dead socket (a kill -9 leaves it) backs off
      // exponentially, and would miss a daemon that takes seconds to start.
      const probe = client(cfg.socket);
      try {
        await promisified(probe)('NodeStatus', {});
        break;
      } catch {
        /* not yet */
      } finally {
        probe.close();
      }
    }
    if (Date.now() > deadline) throw new Error(`knit serve did not become ready: ${stderr}\n${logs.slice(-20).join('\n')}`);
    await new Promise((r) => setTimeout(r, 50));
  }

  const d: Daemon = {
    socket: cfg.socket,
    dir,
    bridge: `${o.prefix}br`,
    configPath,
    child,
    call,
    logs,
    exited,
    async stop() {
      c.close();
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(timer);
      }
    },
    restart: (env2) => launch(o, dir, configPath, env2),
    close: () => c.close(),
  };
  return d;
}

/** Starts a daemon; registers nothing: call cleanupDaemonArtifacts in teardown. */
export async function startDaemon(o: DaemonOptions, env?: Record<string, string>): Promise<Daemon> {
  const dir = mkdtempSync(path.join(os.tmpdir(), `knit-${o.prefix}-`));
  const configPath = path.join(dir, 'config.json');
  writeFileSync(configPath, JSON.stringify(daemonConfig(o, dir), null, 2));
  try {
    return await launch(o, dir, configPath, env);
  } catch (err) {
    // A daemon that never came up leaves no Daemon for the caller's cleanup: its dir goes here.
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/** Links in the host netns whose name starts with one of the prefixes. */
export function hostLinks(): { ifindex: number; ifname: string; flags: string[]; ifalias?: string; group?: string; master?: string; operstate?: string; linkinfo?: { info_kind?: string; info_slave_data?: { state?: string } } }[] {
  return JSON.parse(execFileSync('ip', ['-j', '-d', 'link', 'show'], { encoding: 'utf8', maxBuffer: 256 << 20 }));
}

/** Every host link that belongs to knit's tests with this daemon: its bridge and any device
 * tagged with one of the sandbox ids. */
export function knitLinksFor(d: { bridge: string }, sandboxIds: string[]): string[] {
  return hostLinks()
    .filter((l) => l.ifname === d.bridge || sandboxIds.some((id) => l.ifalias?.includes(`sandbox=${id};`)))
    .map((l) => l.ifname);
}

export function removeLinkQuietly(name: string): void {
  try {
    execFileSync('ip', ['link', 'del', name], { stdio: 'ignore' });
  } catch {
    /* already gone */
  }
}

/** Teardown: stop the daemon, delete its bridge and any device of these sandboxes, remove dirs. */
export async function cleanupDaemon(d: Daemon | undefined, o: { prefix: string }, sandboxIds: string[] = []): Promise<void> {
  await d?.stop();
  for (const l of hostLinks()) {
    const mine = l.ifname === `${o.prefix}br` || sandboxIds.some((id) => l.ifalias?.includes(`sandbox=${id};`));
    if (mine) removeLinkQuietly(l.ifname);
  }
  // A sandbox left attached keeps its nft tables (host ports, the cluster's masquerade): knit
  // leaves them across a stop by design, so the test removes those of its instance.
  removeInstanceNftTables(`knit-${o.prefix}`);
  if (d) {
    // KNI CreateNetwork makes the daemon's netns dir a shared bind mount (as `ip netns` does);
    // knit unmounts it with its last pin, but a test that failed midway may leave one.
    try {
      execFileSync('umount', [path.join(d.dir, 'netns')], { stdio: 'ignore' });
    } catch {
      /* not a mount point */
    }
    rmSync(d.dir, { recursive: true, force: true });
  }
}

/** Deletes every nft table whose name carries this daemon instance (knit names its tables
 * `hostports-<instance>-<sandbox>`, `<instance>-cluster`, ...). */
export function removeInstanceNftTables(instance: string): void {
  let tables: { family: string; name: string }[] = [];
  try {
    const out = JSON.parse(execFileSync('/usr/sbin/nft', ['-j', 'list', 'tables'], { encoding: 'utf8' }));
    tables = out.nftables.filter((x: any) => x.table).map((x: any) => x.table);
  } catch {
    return;
  }
  for (const t of tables) {
    if (!t.name.includes(instance)) continue;
    try {
      execFileSync('/usr/sbin/nft', ['delete', 'table', t.family, t.name], { stdio: 'ignore' });
    } catch {
      /* already gone */
    }
  }
}

export function makeNetns(name: string): string {
  removeNetns(name); // a leftover of an earlier interrupted run of this same test
  execFileSync('ip', ['netns', 'add', name]);
  return `/run/netns/${name}`;
}

export function removeNetns(name: string): void {
  try {
    execFileSync('ip', ['netns', 'del', name], { stdio: 'ignore' });
  } catch {
    /* gone */
  }
}

export function ipJson(args: string[], netns?: string): any[] {
  const argv = netns ? ['-n', netns, '-j', '-d', ...args] : ['-j', '-d', ...args];
  return JSON.parse(execFileSync('ip', argv, { encoding: 'utf8', maxBuffer: 256 << 20 }) || '[]');
}

export function pingFrom(netns: string | undefined, target: string): boolean {
  const argv = ['-c', '1', '-W', '2', target];
  try {
    if (netns) execFileSync('ip', ['netns', 'exec', netns, 'ping', ...argv], { stdio: 'ignore' });
    else execFileSync('ping', argv, { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Edit a running daemon's config file and wait until knit says it reloaded it; a reload knit
 * refuses fails at once with knit's own words. */
export async function reloadConfig(d: Daemon, edit: (config: any) => void): Promise<void> {
  const config = JSON.parse(readFileSync(d.configPath, 'utf8'));
  edit(config);
  const before = d.logs.length;
  writeFileSync(d.configPath, JSON.stringify(config));
  await eventually(() => {
    const since = d.logs.slice(before);
    const refused = since.find((l) => l.includes('config reload rejected'));
    if (refused) throw new Error(`knit refused the new config: ${refused}`);
    return since.some((l) => l.includes('config reloaded'));
  }, `the reload of ${d.configPath}`, 30_000);
}

export async function eventually<T>(fn: () => T | undefined | false | Promise<T | undefined | false>, what: string, timeoutMs = 10_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn(); // a check that reads asynchronously is awaited, never taken as its promise
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Pods (netns + sandbox id) named after a test's prefix, remembered for its teardown. */
export function podFactory(prefix: string) {
  const netnsNames: string[] = [];
  const ids: string[] = [];
  return {
    netnsNames,
    ids,
    pod(n: number) {
      const name = `${prefix}-pod${n}`;
      netnsNames.push(name);
      ids.push(`${prefix}-sb${n}`);
      return { ns: name, path: makeNetns(name), id: `${prefix}-sb${n}` };
    },
    removeAll() {
      for (const n of netnsNames) removeNetns(n);
    },
  };
}

/** A knit.v1 Attach of one runc eth0, the shape most daemon tests send. */
export function runcAttachReq(id: string, netns: string, o: { podName?: string; podNamespace?: string; extra?: object } = {}) {
  return {
    sandbox_id: id,
    pod_name: o.podName ?? id,
    pod_namespace: o.podNamespace ?? 'default',
    pod_uid: `uid-${id}`,
    netns_path: netns,
    runtime: 'RUNC',
    interfaces: [{ name: 'eth0' }],
    ...o.extra,
  };
}

/** One series' value on a daemon's /metrics (`metricsAddress` 127.0.0.1:port); `absent` when it has none. */
export async function metricValue(port: number, series: string, absent = 0): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.split(' ')[1]) : absent;
}

export { freePort } from '../fixtures/service.js';
