// One plugin exec, the way libcni's invoke package does it: the command and the runtime's
// values in CNI_* environment variables, the network configuration on stdin, a result or an
// error object on stdout. It runs off the event loop (the addon spawns and waits on a thread
// of its own), under a deadline after which the plugin and what it started are killed.
import { accessSync, constants } from 'node:fs';
import path from 'node:path';
import { native } from '../net/native.js';

export type CniCommand = 'ADD' | 'DEL' | 'CHECK' | 'GC' | 'STATUS' | 'VERSION';

export interface InvokeEnv {
  command: CniCommand;
  containerId?: string;
  netns?: string;
  ifName?: string;
  /** CNI_ARGS pairs, e.g. K8S_POD_NAME. */
  args?: [string, string][];
  pluginDirs: string[];
}

/** Where a plugin's stderr goes: knit's log, with the sandbox it ran for. */
export type PluginLog = (entry: { plugin: string; command: CniCommand; sandboxId?: string; stderr: string }) => void;

export interface InvokeOptions {
  timeoutMs: number;
  log?: PluginLog;
}

/** A plugin's failure: its CNI error object when it printed one. */
export class PluginError extends Error {
  constructor(
    readonly plugin: string,
    readonly command: CniCommand,
    message: string,
    readonly cniCode?: number,
    readonly timedOut = false,
  ) {
    super(`CNI plugin ${plugin} ${command}: ${message}`);
    this.name = 'PluginError';
  }
}

// Plugins such as portmap and firewall run iptables; a fixed PATH keeps them off npm's
// node_modules/.bin (which holds an unrelated "nft") and off whatever the daemon inherited.
const PLUGIN_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** libcni's FindInPath: the first directory holding an executable of that name. One
 * access(2) per directory, done synchronously: a lookup of a path the kernel has cached is
 * microseconds, less than the hop through libuv's thread pool that the async form costs every
 * plugin exec. */
export function findPlugin(type: string, dirs: string[]): string | undefined {
  for (const dir of dirs) {
    const candidate = path.join(dir, type);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // next directory
    }
  }
  return undefined;
}

function environment(env: InvokeEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = { PATH: PLUGIN_PATH, CNI_COMMAND: env.command, CNI_PATH: env.pluginDirs.join(':') };
  if (env.containerId !== undefined) out.CNI_CONTAINERID = env.containerId;
  if (env.netns !== undefined) out.CNI_NETNS = env.netns;
  if (env.ifName !== undefined) out.CNI_IFNAME = env.ifName;
  if (env.args?.length) out.CNI_ARGS = env.args.map(([k, v]) => `${k}=${v}`).join(';');
  return out;
}

interface SpawnOutcome { code: number | null; signal: string | null; timedOut: boolean; stdout: string; stderr: string; spawnError: string | null }

/** Runs one plugin; answers its stdout parsed (undefined when empty, as DEL's is). The exec is
 * the addon's posix_spawn on a thread of its own (its own process group, killed whole at the
 * deadline): child_process.spawn would fork the whole daemon on the event loop, milliseconds
 * per plugin at the daemon's size (bench/README.md, "Where knit-cni's time goes"). */
export async function execPlugin(pluginPath: string, env: InvokeEnv, stdin: object, opts: InvokeOptions & { sandboxId?: string }): Promise<unknown> {
  const plugin = path.basename(pluginPath);
  const vars = Object.entries(environment(env)).map(([k, v]) => `${k}=${v}`);
  const r = (await native.spawnAndWait(pluginPath, vars, JSON.stringify(stdin), opts.timeoutMs)) as SpawnOutcome;
  if (r.spawnError) throw new PluginError(plugin, env.command, r.spawnError);
  const stderr = r.stderr.trim();
  if (stderr) opts.log?.({ plugin, command: env.command, sandboxId: opts.sandboxId, stderr });
  if (r.timedOut) throw new PluginError(plugin, env.command, `did not finish within ${opts.timeoutMs} ms and was killed`, undefined, true);
  const stdout = r.stdout.trim();
  let parsed: unknown;
  try {
    parsed = stdout ? JSON.parse(stdout) : undefined;
  } catch {
    if (r.code === 0) throw new PluginError(plugin, env.command, `printed a result that is not JSON: ${stdout.slice(0, 80)}`);
  }
  if (r.code === 0) return parsed;
  const e = parsed as { code?: number; msg?: string; details?: string } | undefined;
  const why = e?.msg ? `${e.msg}${e.details ? ` (${e.details})` : ''}` : stderr.slice(0, 200) || `exited with ${r.signal ?? `code ${r.code}`}`;
  throw new PluginError(plugin, env.command, why, e?.code);
}
