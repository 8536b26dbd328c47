// Boot: a node coming up with its pods. `pods` sandboxes (the kubelet's default max-pods, 110)
// get their network through CNI ADDs issued all at once, twice:
//  - knit-cni, with a knit daemon started at the same moment (its first start, an empty run
//    dir): ADDs that come before the daemon is ready wait for it in the shim (its
//    daemonWaitSeconds); one that still fails with CNI code 11 ("try again later") is retried
//    after RETRY_MS, as the kubelet retries a failed sandbox;
//  - the bridge plugin with host-local, exec'd the same way (no daemon to wait for).
// Reported: the time until all have their network, each ADD's own time, and each pod's time
// from the start with its retries. The netns, bridges and the daemon go at the end (untimed).
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Progress } from '../lib/progress.js';
import type { BootResult } from '../lib/results.js';
import type { Sandbox, SetupContext } from '../lib/contender.js';
import { nowMs } from '../lib/stats.js';
import type { World } from '../lib/world.js';
import { cniEnv, ipBatch, spawnAsRuntime } from '../lib/exec.js';
import { benchRunDir, daemonCommand, daemonConfig, SHIM, shimConfig } from '../contenders/knit.js';
import { bridgeHostLocal, CNI_BIN_DIR, keepHostForwarding } from '../contenders/cni.js';

/** How long a runtime waits before retrying an ADD that answered code 11: the kubelet requeues
 * a pod whose sync failed after 10 s (pkg/kubelet/kubelet.go, backOffPeriod; jittered up to
 * 15 s by pod_workers.go's completeWork). */
const RETRY_MS = 10_000;
/** CNI's "try again later": the error object's code (the plugin exits non-zero). */
const TRY_AGAIN = 11;
const cniErrorCode = (stdout: string) => {
  try {
    return (JSON.parse(stdout) as { code?: number }).code;
  } catch {
    return undefined;
  }
};

export async function runBoot(world: World, progress: Progress, opts: { pods: number }): Promise<BootResult[]> {
  progress.begin(`boot (${opts.pods} pods at once: knit-cni with its daemon starting, then the bridge plugin)`, 2);
  const results: BootResult[] = [];
  const restoreForwarding = keepHostForwarding();
  try {
    results.push(await bootKnit(world, opts.pods));
    progress.tick('knit-cni');
    results.push(await bootBridge(world, opts.pods));
    progress.tick('bridge');
  } finally {
    restoreForwarding();
    progress.end();
  }
  return results;
}

async function sandboxes(world: World, tag: string, n: number): Promise<Sandbox[]> {
  const out = Array.from({ length: n }, (_, i) => ({
    id: `${world.prefix}-${tag}-${i}`, netnsName: `${world.prefix}-${tag}${i}`, netnsPath: `/run/netns/${world.prefix}-${tag}${i}`, ifname: 'eth0', slot: i,
  }));
  await world.addNetns(out.map((s) => s.netnsName));
  return out;
}

async function context(world: World, tag: string, what: string): Promise<SetupContext> {
  const scratch = path.join(world.scratch, what);
  mkdirSync(scratch, { recursive: true });
  return { network: await world.network(tag), scratch, prefix: world.prefix, tag, trackPid: (pid, w) => world.trackPid(pid, w) };
}

/** ADD every sandbox at once through `add` (exit code, stdout), retrying CNI code 11. */
async function addAll(r: BootResult, pods: Sandbox[], add: (sb: Sandbox) => Promise<{ code: number; out: string }>, t0: number): Promise<void> {
  await Promise.all(pods.map(async (sb) => {
    for (;;) {
      const a0 = nowMs();
      const { code, out } = await add(sb);
      if (code === 0) {
        r.addMs.push(nowMs() - a0);
        r.podMs.push(nowMs() - t0);
        return;
      }
      if (cniErrorCode(out) !== TRY_AGAIN || nowMs() - t0 > 60_000) {
        r.errors.push(`ADD ${sb.id}: exit ${code}: ${out.trim().slice(0, 200)}`);
        return;
      }
      r.retries++;
      await new Promise((res) => setTimeout(res, RETRY_MS));
    }
  }));
  r.wallMs = nowMs() - t0;
}

async function bootKnit(world: World, n: number): Promise<BootResult> {
  const ctx = await context(world, 'o', 'boot-knit');
  const pods = await sandboxes(world, 'o', n);
  const r: BootResult = { contender: 'knit-cni', pods: n, wallMs: 0, addMs: [], podMs: [], retries: 0, errors: [] };
  const configPath = path.join(ctx.scratch, 'config.json');
  // An instance of its own: its start-up sweep must not take the contenders' daemons' devices.
  const config = { ...daemonConfig(ctx, path.join(ctx.scratch, 'knit.sock'), 'bridge'), instance: `${ctx.prefix}${ctx.tag}`, logLevel: 'warn' };
  writeFileSync(configPath, JSON.stringify(config));
  const shim = shimConfig(ctx.prefix, ctx.scratch);
  const cniSocket = path.join(ctx.scratch, 'cni.sock');
  const { cmd, args } = daemonCommand(configPath);
  const t0 = nowMs();
  const daemon = spawn(cmd, args, { stdio: ['pipe', 'ignore', 'ignore'] });
  world.trackPid(daemon.pid!, 'knit daemon (boot)');
  try {
    const watchReady = (async () => {
      while (!existsSync(cniSocket) && daemon.exitCode === null) await new Promise((res) => setTimeout(res, 2));
      r.daemonReadyMs = nowMs() - t0;
    })();
    await addAll(r, pods, async (sb) => {
      const x = await spawnAsRuntime(SHIM, cniEnv('ADD', sb, CNI_BIN_DIR), shim);
      return { code: x.code, out: x.stdout || x.stderr };
    }, t0);
    await watchReady;
  } finally {
    const gone = new Promise((res) => daemon.once('exit', res));
    daemon.kill('SIGTERM');
    await gone;
    world.untrackPid(daemon.pid!);
    await world.deleteNetns(pods.map((p) => p.netnsName));
    await ipBatch([`link del ${ctx.network.bridge}`], undefined, true);
    rmSync(benchRunDir(ctx), { recursive: true, force: true });
  }
  return r;
}

async function bootBridge(world: World, n: number): Promise<BootResult> {
  const ctx = await context(world, 'q', 'boot-bridge');
  const pods = await sandboxes(world, 'q', n);
  const r: BootResult = { contender: 'cni', pods: n, wallMs: 0, addMs: [], podMs: [], retries: 0, errors: [] };
  const config = JSON.stringify({ cniVersion: '1.0.0', name: `${ctx.prefix}-boot`, ...bridgeHostLocal(ctx) });
  try {
    await addAll(r, pods, async (sb) => {
      const x = await spawnAsRuntime(path.join(CNI_BIN_DIR, 'bridge'), cniEnv('ADD', sb, CNI_BIN_DIR), config);
      return { code: x.code, out: x.stdout || x.stderr };
    }, nowMs());
  } finally {
    await world.deleteNetns(pods.map((p) => p.netnsName));
    await ipBatch([`link del ${ctx.network.bridge}`], undefined, true);
  }
  return r;
}
