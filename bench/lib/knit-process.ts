// One `knit serve` for a memory measurement (bench/soak.ts, bench/memory/footprint.ts): its
// own temp dirs, bridge, /24 and instance name under a prefix unique to the run, started with
// the node flags `bin/knit` uses (or others), preloading bench/memory/report-hook.mjs so
// `report()` can read process.memoryUsage() and V8's heap spaces from inside it.
import * as grpc from '@grpc/grpc-js';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { knitProto } from '../../src/api/proto.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const CLI = path.join(root, 'build', 'src', 'cli', 'main.js');
const HOOK = path.join(root, 'bench', 'memory', 'report-hook.mjs');

/** "#!/usr/bin/env -S node --max-semi-space-size=4" → ["--max-semi-space-size=4"]. */
export function launcherNodeFlags(checkout = root): string[] {
  const shebang = readFileSync(path.join(checkout, 'bin', 'knit'), 'utf8').split('\n', 1)[0];
  const words = shebang.split(/\s+/);
  return words.slice(words.indexOf('node') + 1);
}

/** What report-hook.mjs writes. */
export interface MemoryReport {
  rss: number;
  heapTotal: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
  rssAnon: number;
  rssFile: number;
  privateDirty: number;
  threads: number;
  heapSpaces: Record<string, { size: number; used: number; physical: number }>;
  snapshot?: string;
}

export interface KnitProcessOptions {
  prefix: string;
  /** e.g. 10.184.200.0/24 */
  subnet: string;
  /** Node flags; default: bin/knit's. */
  nodeFlags?: string[];
  env?: Record<string, string>;
  metricsPort?: number;
  /** Heap snapshots at each report go here. */
  snapshotDir?: string;
  /** Write the config as YAML (as the DaemonSet's ConfigMap is) instead of JSON. */
  yaml?: boolean;
  /** The daemon's log level (default warn; the bench's latency contenders run the shipped info). */
  logLevel?: string;
  /** Where the records go (default: under the temp dir); a node's /run is tmpfs, so a
   * comparison of latency wants a tmpfs path (the bench's contenders use /dev/shm). */
  runDir?: string;
  /** A file for the daemon's stdout (its log; V8's --trace-gc lines), else discarded. */
  stdoutFile?: string;
}

export class KnitProcess {
  readonly dir: string;
  readonly child: ChildProcess;
  readonly client: grpc.Client;
  private readonly reportFile: string;

  constructor(readonly opts: KnitProcessOptions) {
    this.dir = mkdtempSync(path.join(os.tmpdir(), `${opts.prefix}-`));
    this.reportFile = path.join(this.dir, 'memory.jsonl');
    const socket = path.join(this.dir, 'knit.sock');
    const config = {
      socket, runDir: opts.runDir ?? path.join(this.dir, 'run'), stateDir: path.join(this.dir, 'state'),
      netnsDir: path.join(this.dir, 'netns'), handoffSocket: path.join(this.dir, 'handoff.sock'), cniSocket: path.join(this.dir, 'cni.sock'),
      cniDeleteQueue: path.join(this.dir, 'cni-delete-queue'),
      instance: `knit-${opts.prefix}`, logLevel: opts.logLevel ?? 'warn',
      ...(opts.metricsPort ? { metricsAddress: `127.0.0.1:${opts.metricsPort}` } : {}),
      networks: [{ name: 'mem', mode: 'bridge', bridge: `${opts.prefix}br`, ipv4: { subnet: opts.subnet } }],
    };
    // YAML here is one `key: <JSON value>` line per key: block mapping, flow values.
    const text = opts.yaml ? Object.entries(config).map(([k, v]) => `${k}: ${JSON.stringify(v)}\n`).join('') : JSON.stringify(config);
    const configFile = path.join(this.dir, opts.yaml ? 'config.yaml' : 'config.json');
    writeFileSync(configFile, text);
    const flags = opts.nodeFlags ?? launcherNodeFlags();
    this.child = spawn(process.execPath, [...flags, '--import', HOOK, CLI, 'serve', '--config', configFile], {
      env: { ...process.env, ...opts.env, KNIT_MEMORY_REPORT: this.reportFile, ...(opts.snapshotDir ? { KNIT_MEMORY_SNAPSHOT_DIR: opts.snapshotDir } : {}) },
      stdio: ['ignore', opts.stdoutFile ? openSync(opts.stdoutFile, 'w') : 'ignore', 'inherit'],
    });
    this.client = new (knitProto().Knit)(`unix:${socket}`, grpc.credentials.createInsecure());
  }

  get pid(): number {
    return this.child.pid!;
  }

  call(method: string, req: object): Promise<unknown> {
    return new Promise((resolve, reject) =>
      (this.client as unknown as Record<string, Function>)[method]!.call(this.client, req, (err: Error | null, res: unknown) => (err ? reject(err) : resolve(res))),
    );
  }

  /** Resolves once the API answers NodeStatus. */
  async ready(): Promise<void> {
    for (let i = 0; ; i++) {
      try {
        await this.call('NodeStatus', {});
        return;
      } catch (err) {
        if (i > 300 || this.child.exitCode !== null) throw err;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  }

  /** process.memoryUsage() and more, from inside the daemon (after a GC if --expose-gc). */
  report(): Promise<MemoryReport> {
    return memoryReport(this.child, this.reportFile);
  }

  async stop(): Promise<void> {
    this.client.close();
    if (this.child.exitCode === null) {
      const gone = new Promise((r) => this.child.once('exit', r));
      this.child.kill('SIGTERM');
      await gone;
    }
    rmSync(this.dir, { recursive: true, force: true });
    if (this.opts.runDir) rmSync(this.opts.runDir, { recursive: true, force: true });
  }
}

/** What report-hook.mjs writes to `file` when a daemon started with it (--import, and
 * KNIT_MEMORY_REPORT=file) is sent SIGUSR2: its memory after a GC (with --expose-gc). */
export async function memoryReport(child: ChildProcess, file: string): Promise<MemoryReport> {
  const lines = () => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : []);
  const before = lines().length;
  child.kill('SIGUSR2');
  for (let i = 0; i < 600; i++) {
    await new Promise((r) => setTimeout(r, 50));
    const now = lines();
    if (now.length > before) return JSON.parse(now[before]!) as MemoryReport;
  }
  throw new Error('the daemon did not report its memory within 30 s');
}

/** VmRSS, RssAnon and RssFile (+ RssShmem) of a process, in bytes, from /proc: what the kernel
 * charges it, read from outside without disturbing it. */
export function procMemory(pid: number): { rss: number; rssAnon: number; rssFile: number } | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return undefined;
  }
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN) * 1024;
  return { rss: kb('VmRSS'), rssAnon: kb('RssAnon'), rssFile: kb('RssFile') + kb('RssShmem') };
}
