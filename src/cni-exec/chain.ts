// The chain's commands, executed the way libcni's CNIConfig does (AddNetworkList,
// DelNetworkList, CheckNetworkList, GCNetworkList, GetStatusNetworkList): one plugin at a time,
// each configuration the plugin's own object with the list's name and cniVersion injected,
// prevResult threaded through ADD, the cached final result given to every plugin on DEL and
// CHECK, runtimeConfig filled only with the capabilities a plugin declares.
import type { Conflist, PluginConf } from './conflist.js';
import { compareVersions } from './conflist.js';
import { execPlugin, findPlugin, PluginError, type CniCommand, type PluginLog } from './invoke.js';
import { listCache, readCache, removeCache, writeCache, type AttachmentKey } from './cache.js';

export interface ChainRuntime {
  containerId: string;
  netns: string;
  ifName: string;
  /** CNI_ARGS (K8S_POD_NAMESPACE, K8S_POD_NAME, ...). */
  args: [string, string][];
  /** portMappings, bandwidth, ips, mac: offered to the plugins that declare them. */
  capabilityArgs: Record<string, unknown>;
}

export interface ChainEnv {
  pluginDirs: string[];
  cacheDir: string;
  timeoutMs: number;
  log?: PluginLog;
  /** Crash tests: called before plugin n's ADD (src/daemon/failpoints.ts). */
  beforeAdd?(n: number): void;
}

export type CniResult = Record<string, unknown>;

/** libcni's buildOneConfig: the plugin's object, plus name, cniVersion, prevResult and the
 * runtimeConfig entries of the capabilities it declares. */
export function pluginConfig(list: Conflist, plugin: PluginConf, prevResult: CniResult | undefined, capabilityArgs: Record<string, unknown>): Record<string, unknown> {
  const conf: Record<string, unknown> = { ...plugin, name: list.name, cniVersion: list.cniVersion };
  if (prevResult) conf.prevResult = prevResult;
  const runtimeConfig: Record<string, unknown> = {};
  for (const [cap, declared] of Object.entries(plugin.capabilities ?? {})) {
    if (declared && capabilityArgs[cap] !== undefined) runtimeConfig[cap] = capabilityArgs[cap];
  }
  if (Object.keys(runtimeConfig).length) conf.runtimeConfig = runtimeConfig;
  return conf;
}

/** Capabilities some plugin of the chain declares. */
export function declaredCapabilities(list: Conflist): Set<string> {
  return new Set(list.plugins.flatMap((p) => Object.entries(p.capabilities ?? {}).filter(([, on]) => on).map(([cap]) => cap)));
}

const key = (list: Conflist, rt: { containerId: string; ifName: string }): AttachmentKey => ({ network: list.name, containerId: rt.containerId, ifName: rt.ifName });

async function run(plugin: PluginConf, command: CniCommand, rt: Partial<ChainRuntime>, conf: object, env: ChainEnv): Promise<unknown> {
  const pluginPath = findPlugin(plugin.type, env.pluginDirs);
  if (!pluginPath) throw new PluginError(plugin.type, command, `no executable "${plugin.type}" in ${env.pluginDirs.join(':')}`);
  return execPlugin(pluginPath, { command, containerId: rt.containerId, netns: rt.netns, ifName: rt.ifName, args: rt.args, pluginDirs: env.pluginDirs }, conf, {
    timeoutMs: env.timeoutMs, log: env.log, sandboxId: rt.containerId,
  });
}

/** ADD, plugin by plugin; the final result is cached, then returned. If a plugin fails (or
 * hangs past the deadline), the whole chain is DEL'd in reverse, as a CRI runtime does after a
 * failed ADD, and the plugin's error is raised. */
export async function addChain(list: Conflist, rt: ChainRuntime, env: ChainEnv): Promise<CniResult> {
  let result: CniResult | undefined;
  try {
    for (const [n, plugin] of list.plugins.entries()) {
      env.beforeAdd?.(n);
      result = (await run(plugin, 'ADD', rt, pluginConfig(list, plugin, result, rt.capabilityArgs), env)) as CniResult | undefined;
      if (!result || typeof result !== 'object') throw new PluginError(plugin.type, 'ADD', 'printed no result');
    }
  } catch (err) {
    await delChain(list, rt, env).catch((delErr: Error) => {
      (err as Error).message += `; the DEL that followed failed too: ${delErr.message}`;
    });
    throw err;
  }
  writeCache(env.cacheDir, {
    kind: 'cniCacheV1', containerId: rt.containerId, config: Buffer.from(list.bytes).toString('base64'), ifName: rt.ifName, networkName: list.name,
    netns: rt.netns, cniArgs: rt.args, capabilityArgs: rt.capabilityArgs, result,
  });
  return result!;
}

/** DEL in reverse order, each plugin given the cached result (none when ADD never finished);
 * every plugin is tried; the cache entry goes once all succeeded. */
export async function delChain(list: Conflist, rt: ChainRuntime, env: ChainEnv): Promise<void> {
  const cached = compareVersions(list.cniVersion, '0.4.0') >= 0 ? readCache(env.cacheDir, key(list, rt))?.result : undefined;
  const errors: string[] = [];
  for (const plugin of [...list.plugins].reverse()) {
    try {
      await run(plugin, 'DEL', rt, pluginConfig(list, plugin, cached, rt.capabilityArgs), env);
    } catch (err) {
      errors.push((err as Error).message);
    }
  }
  if (errors.length) throw new Error(errors.join('; '));
  removeCache(env.cacheDir, key(list, rt));
}

/** CHECK with the cached result; libcni refuses it below 0.4.0 and skips it with disableCheck. */
export async function checkChain(list: Conflist, rt: ChainRuntime, env: ChainEnv): Promise<string[]> {
  if (compareVersions(list.cniVersion, '0.4.0') < 0) return [`CNI CHECK is not defined for cniVersion ${list.cniVersion}`];
  if (list.disableCheck) return [];
  const cached = readCache(env.cacheDir, key(list, rt));
  if (!cached?.result) return [`no cached CNI result for ${list.name}/${rt.containerId}/${rt.ifName}`];
  const problems: string[] = [];
  for (const plugin of list.plugins) {
    try {
      await run(plugin, 'CHECK', rt, pluginConfig(list, plugin, cached.result, rt.capabilityArgs), env);
    } catch (err) {
      problems.push((err as Error).message);
    }
  }
  return problems;
}

export interface GcOutcome { deleted: string[]; errors: string[]; gcCalled: boolean }

/** libcni's GCNetworkList: DEL every cached attachment of this network that is not valid, then,
 * for cniVersion 1.1.0 and later, GC on each plugin with the valid attachments. */
export async function gcChain(list: Conflist, valid: { containerId: string; ifName: string }[], env: ChainEnv): Promise<GcOutcome> {
  const out: GcOutcome = { deleted: [], errors: [], gcCalled: false };
  if (list.disableGC) return out;
  const keep = new Set(valid.map((v) => `${v.containerId}/${v.ifName}`));
  for (const c of await listCache(env.cacheDir, list.name)) {
    if (keep.has(`${c.containerId}/${c.ifName}`)) continue;
    const rt: ChainRuntime = { containerId: c.containerId, ifName: c.ifName, netns: c.netns ?? '', args: c.cniArgs ?? [], capabilityArgs: c.capabilityArgs ?? {} };
    try {
      await delChain(list, rt, env);
      out.deleted.push(`${c.containerId}/${c.ifName}`);
    } catch (err) {
      out.errors.push(`${c.containerId}/${c.ifName}: ${(err as Error).message}`);
    }
  }
  if (compareVersions(list.cniVersion, '1.1.0') >= 0) {
    out.gcCalled = true;
    const attachments = valid.map((v) => ({ containerID: v.containerId, ifname: v.ifName }));
    for (const plugin of list.plugins) {
      const conf = { ...plugin, name: list.name, cniVersion: list.cniVersion, 'cni.dev/valid-attachments': attachments, 'cni.dev/attachments': attachments };
      await run(plugin, 'GC', {}, conf, env).catch((err: Error) => out.errors.push(err.message));
    }
  }
  return out;
}

/** STATUS (cniVersion 1.1.0+): undefined when every plugin is ready, else why not. Below 1.1.0
 * the plugins do not define STATUS, which the answer says instead of calling them. */
export async function statusChain(list: Conflist, env: ChainEnv): Promise<{ supported: boolean; problem?: string }> {
  if (compareVersions(list.cniVersion, '1.1.0') < 0) return { supported: false };
  for (const plugin of list.plugins) {
    try {
      await run(plugin, 'STATUS', {}, { ...plugin, name: list.name, cniVersion: list.cniVersion }, env);
    } catch (err) {
      return { supported: true, problem: (err as Error).message };
    }
  }
  return { supported: true };
}

/** VERSION on every plugin: each must support the list's cniVersion (libcni's
 * ValidateNetworkList). Answers each plugin's supported versions. */
export async function negotiateVersions(list: Conflist, env: ChainEnv): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  for (const plugin of list.plugins) {
    const info = (await run(plugin, 'VERSION', {}, { cniVersion: list.cniVersion }, env)) as { supportedVersions?: string[] } | undefined;
    const supported = info?.supportedVersions ?? [];
    if (!supported.includes(list.cniVersion)) {
      throw new PluginError(plugin.type, 'VERSION', `supports CNI versions ${supported.join(', ') || '(none)'}, not the list's cniVersion ${list.cniVersion}`);
    }
    out.set(plugin.type, supported);
  }
  return out;
}
