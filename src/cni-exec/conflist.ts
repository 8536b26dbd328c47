// A CNI network configuration list (conflist), as the CNI spec defines it and libcni reads it:
// a name, a cniVersion and the plugins in chain order. knit keeps the list's exact text: the
// result cache stores it, and DEL must see the configuration ADD saw.
import { readFile } from 'node:fs/promises';

export interface PluginConf {
  type: string;
  /** Capabilities the plugin declares; only these receive runtimeConfig entries. */
  capabilities?: Record<string, boolean>;
  [key: string]: unknown;
}

export interface Conflist {
  name: string;
  cniVersion: string;
  disableCheck?: boolean;
  disableGC?: boolean;
  plugins: PluginConf[];
  /** The list's text as read: stored in the result cache (cniCacheV1 `config`). */
  bytes: string;
}

/** Lists already parsed, by their text: every attach and detach of a chain parses its journaled
 * text again (the plan's step carries the text, not the object), and a node has a handful of
 * CNI networks. The lists are frozen, as they are shared. */
const parsed = new Map<string, Conflist>();
const PARSED_MAX = 32;

function deepFreeze<T>(v: T): T {
  if (v && typeof v === 'object' && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const x of Object.values(v)) deepFreeze(x);
  }
  return v;
}

/** Parses a conflist's text; the error says which key is wrong. */
export function parseConflist(text: string, source: string): Conflist {
  const known = parsed.get(text);
  if (known) return known;
  const list = deepFreeze(parseText(text, source));
  if (parsed.size >= PARSED_MAX) parsed.delete(parsed.keys().next().value!);
  parsed.set(text, list);
  return list;
}

function parseText(text: string, source: string): Conflist {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new Error(`${source}: not JSON (${(err as Error).message})`);
  }
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw new Error(`${source}: a conflist must be a JSON object`);
  const o = raw as Record<string, unknown>;
  if (typeof o.name !== 'string' || !/^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/.test(o.name)) throw new Error(`${source}: "name" must be a valid CNI network name`);
  if (typeof o.cniVersion !== 'string' || !/^\d+\.\d+\.\d+$/.test(o.cniVersion)) throw new Error(`${source}: "cniVersion" must be a version like "1.0.0"`);
  if (!Array.isArray(o.plugins) || o.plugins.length === 0) throw new Error(`${source}: "plugins" must be a non-empty array`);
  o.plugins.forEach((p, i) => {
    if (!p || typeof p !== 'object' || typeof (p as PluginConf).type !== 'string' || !/^[A-Za-z0-9_.-]+$/.test((p as PluginConf).type)) {
      throw new Error(`${source}: plugins[${i}].type must name a plugin binary`);
    }
  });
  return {
    name: o.name,
    cniVersion: o.cniVersion,
    disableCheck: o.disableCheck === true,
    disableGC: o.disableGC === true,
    plugins: o.plugins as PluginConf[],
    bytes: text,
  };
}

/** The conflist of a network: inline text, or a file (a mounted ConfigMap key) read now, so a
 * ConfigMap update reaches the next attach; each attach journals the text it ran with. */
export async function loadConflist(source: { conflist?: string; conflistFile?: string }): Promise<Conflist> {
  if (source.conflist !== undefined) return parseConflist(source.conflist, 'conflist');
  const file = source.conflistFile!;
  return parseConflist(await readFile(file, 'utf8'), file);
}

/** Orders versions "a.b.c" numerically. */
export function compareVersions(a: string, b: string): number {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < 3; i++) if ((pa[i] ?? 0) !== (pb[i] ?? 0)) return (pa[i] ?? 0) - (pb[i] ?? 0);
  return 0;
}
