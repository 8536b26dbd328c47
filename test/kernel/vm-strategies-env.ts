// Shared by the VM strategy kernel tests: a throwaway sandbox netns, a host bridge of the test's
// own, unique addresses, and running a strategy's plan through core's executor with the real
// runner (then its inverses), refusing to run a plan that breaks the plan rules.
import type { ExecutionContext } from 'ava';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { DaemonActionRunner } from '../../src/daemon/action-runner.js';
import { runSteps, undoSteps } from '../../src/core/executor.js';
import { checkRecord } from '../../src/core/check.js';
import type { SandboxRecord } from '../../src/core/record.js';
import { identifyNetns } from '../../src/net/netns.js';
import type { CheckReport } from '../../src/base/types.js';
import type { InterfaceRequest } from '../../src/base/types.js';
import type { Allocation, InterfaceInput, InterfacePlan, Strategy } from '../../src/base/strategy.js';
import { makeNetns, uniquePrefix, type TestNetns } from '../helpers/names.js';
import { ip, link, type Json } from '../helpers/observe.js';
import { createdLinks, makeInput, network, planProblems } from '../unit/strategy-plan-check.js';

export interface Env {
  prefix: string;
  ns: TestNetns;
  /** The network's host bridge (bridge mode), made by the test. */
  bridge?: string;
  mode: 'bridge' | 'routed';
  runner: DaemonActionRunner;
  sandboxId: string;
  v4: Allocation;
  v6: Allocation;
  /** A private directory for Kata DAN files (the plans' configured kata.danDir). */
  danDir: string;
  /** Host devices the plans run in this env create. */
  hostNames: Set<string>;
}

const sh = (cmd: string, args: string[]) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

/** Host devices the env's plans made that still exist, looked up by name (other suites may
 * have thousands of links on the host: no full dumps). */
export function hostLeftovers(env: Env): string[] {
  return [...env.hostNames].filter((name) => link(undefined, name) !== undefined);
}

export function makeEnv(t: ExecutionContext, tag: string, mode: 'bridge' | 'routed'): Env {
  const prefix = uniquePrefix(tag);
  const ns = makeNetns(t, prefix, 'sb');
  const sandboxId = `${prefix}sandbox-${randomBytes(4).toString('hex')}`;
  // Unique per test, in the benchmarking range: host routes to them cannot clash with a
  // real network or with another test.
  const [a, b] = [...randomBytes(2)];
  const v4: Allocation = { family: 4, address: `198.18.${a}.${(b % 250) + 2}`, prefixLen: 24, gateway: `198.18.${a}.1` };
  const v6: Allocation = { family: 6, address: `fd6b:6e74:${a.toString(16)}${b.toString(16)}::5`, prefixLen: 64, gateway: `fd6b:6e74:${a.toString(16)}${b.toString(16)}::1` };
  const env: Env = { prefix, ns, mode, runner: new DaemonActionRunner(), sandboxId, v4, v6, danDir: mkdtempSync(`/tmp/${prefix}dan-`), hostNames: new Set() };
  if (mode === 'bridge') {
    env.bridge = `${prefix}br`;
    sh('ip', ['link', 'add', env.bridge, 'type', 'bridge']);
    sh('ip', ['link', 'set', env.bridge, 'up']);
  }
  t.teardown(() => {
    try { env.runner.close(); } catch { /* teardown must go on to remove what the test made */ }
    // Whatever a failed test left on the host: the plans' host devices, the bridge.
    for (const name of hostLeftovers(env)) {
      try { sh('ip', ['link', 'del', name]); } catch { /* gone with its peer */ }
    }
    if (env.bridge) {
      try { sh('ip', ['link', 'del', env.bridge]); } catch { /* already gone */ }
    }
    rmSync(env.danDir, { recursive: true, force: true });
  });
  return env;
}

/** InterfaceInput for interface `index` of a request with `ifaces`, on the env's network. */
export function envInput(env: Env, ifaces: InterfaceRequest[], opts: { index?: number; dual?: boolean; runtime: 'kata' | 'kubevirt' }): InterfaceInput {
  const base = makeInput(opts.runtime, ifaces, {
    index: opts.index, mode: env.mode, netns: env.ns.path, sandboxId: env.sandboxId,
    addresses: opts.dual ? [env.v4, env.v6] : [env.v4],
  });
  return {
    ...base,
    // The configured kata.danDir: the env's own directory.
    danDir: env.danDir,
    network: network(env.mode, {
      ...(env.bridge ? { bridge: env.bridge } : {}),
      ipv4: { subnet: `${env.v4.address.split('.').slice(0, 3).join('.')}.0/24`, gateway: env.v4.gateway! },
      ipv6: { subnet: `${env.v6.gateway!.replace(/::1$/, '::')}/64`, gateway: env.v6.gateway! },
    }),
  };
}

/** Plans and runs one interface; the plan must pass the plan rules before anything runs. */
export async function attach(t: ExecutionContext, env: Env, strategy: Strategy, input: InterfaceInput): Promise<InterfacePlan> {
  const plan = strategy.planInterface(input);
  const problems = planProblems(plan.steps, env.bridge ? [{ name: env.bridge, netns: 'host' }] : []);
  if (problems.length) throw new Error(`refusing to run a plan that breaks the rules:\n${problems.join('\n')}`);
  for (const l of createdLinks(plan.steps)) if (l.netns === 'host') env.hostNames.add(l.name);
  await runSteps(plan.steps, env.runner);
  t.teardown(() => undoSteps(plan.steps, plan.steps.length, env.runner, 'undo'));
  return plan;
}

/** What core's Check says about the attachment, given the plan's result as the record's. */
export function check(env: Env, input: InterfaceInput, plan: InterfacePlan): Promise<CheckReport> {
  const now = new Date().toISOString();
  const record: SandboxRecord = {
    version: 1, sandboxId: env.sandboxId, state: 'attached', request: input.request,
    netns: { path: env.ns.path, ...identifyNetns(env.ns.path) },
    allocations: [], steps: plan.steps, createdAt: now, updatedAt: now,
    result: { sandboxId: env.sandboxId, netnsPath: env.ns.path, runtime: input.request.runtime, interfaces: plan.interfaces, ips: plan.ips, routes: plan.routes },
  };
  return checkRecord(record, env.runner);
}

/** Runs every inverse, as a detach does; returns the errors (none expected). */
export function detach(env: Env, plan: InterfacePlan): Promise<string[]> {
  return undoSteps(plan.steps, plan.steps.length, env.runner, 'undo');
}

/** nft(8) by absolute path: under npm/npx, PATH starts with node_modules/.bin, where ava's
 * dependency @vercel/nft installs an unrelated `nft`. */
const NFT = '/usr/sbin/nft';

export function nftTables(env: Env): Json[] {
  const out = sh('ip', ['netns', 'exec', env.ns.name, NFT, '-j', 'list', 'tables']);
  return (JSON.parse(out).nftables as Json[]).filter((x) => x.table).map((x) => x.table);
}

/** Rules of one nft chain as nft itself prints them back (`nft list chain`), one per line. */
export function nftChain(env: Env, family: string, table: string, chain: string): string[] {
  const out = sh('ip', ['netns', 'exec', env.ns.name, NFT, 'list', 'chain', family, table, chain]);
  return out.split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('table') && !l.startsWith('chain') && l !== '}' && !l.startsWith('type '))
    .map((l) => l.replace(/counter packets \d+ bytes \d+ /, 'counter '));
}

/** Names of the links inside the sandbox netns. */
export function sandboxLinks(env: Env): string[] {
  return ip(env.ns.name, 'link', 'show').map((l: Json) => l.ifname as string).sort();
}
