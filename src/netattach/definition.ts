// A NetworkAttachmentDefinition's CNI config as Multus runs it for one selection of a pod
// (network-attachment-definition-client pkg/utils/cniconfig.go GetCNIConfig; multus-cni
// pkg/types/conf.go LoadDelegateNetConf): the config's text, its `name` filled in with the
// definition's when missing, a single plugin's config as a one-plugin list (libcni's
// ConfListFromConf), the selection's `cni-args` merged into each plugin's `args.cni`. A config
// whose plugin is knit itself is not exec'd: knit builds that interface in the same process
// (a NAD naming a knit network, or KubeVirt's binding NAD).
import { KnitError } from '../base/errors.js';

/** The fields knit reads of a k8s.cni.cncf.io/v1 NetworkAttachmentDefinition. */
export interface AttachmentDefinition {
  namespace: string;
  name: string;
  /** spec.config; '' when the definition has none (Multus then looks for a file by its name). */
  config: string;
}

export const KNIT_PLUGIN_TYPE = 'knit';

/** What a selection runs: a CNI chain to exec, or knit's own plugin config. */
export type Delegate =
  | { kind: 'chain'; conflist: string; cniVersion: string; name: string }
  | { kind: 'knit'; conf: Record<string, unknown> };

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);

/** injectCNIArgs: the arguments go into `args.cni`, merged over what the config has there. */
function withCniArgs(plugin: Record<string, unknown>, cniArgs: Record<string, unknown>): Record<string, unknown> {
  const args = isObject(plugin.args) ? plugin.args : {};
  const cni = isObject(args.cni) ? args.cni : {};
  return { ...plugin, args: { ...args, cni: { ...cni, ...cniArgs } } };
}

/**
 * The delegate of a definition for one selection. `config` is the CNI config text (the
 * definition's, or the file that stands for an empty one); `fallbackVersion` is used when the
 * config names no cniVersion (Multus takes its own config's). Errors name the definition.
 */
export function delegateOf(what: string, defName: string, config: string, cniArgs: Record<string, unknown> | undefined, fallbackVersion: string): Delegate {
  const field = `NetworkAttachmentDefinition ${what} spec.config`;
  let raw: unknown;
  try {
    raw = JSON.parse(config);
  } catch (err) {
    throw KnitError.invalid(field, `is not JSON (${(err as Error).message})`);
  }
  if (!isObject(raw)) throw KnitError.invalid(field, 'must be a JSON object (a CNI config or conflist)');
  const name = typeof raw.name === 'string' && raw.name ? raw.name : defName;
  const cniVersion = typeof raw.cniVersion === 'string' && raw.cniVersion ? raw.cniVersion : fallbackVersion;
  let plugins: Record<string, unknown>[];
  if (typeof raw.type === 'string' && raw.type) {
    plugins = [{ ...raw, name, cniVersion }];
  } else {
    if (!Array.isArray(raw.plugins) || !raw.plugins.length) throw KnitError.invalid(field, 'has neither a "type" (a CNI config) nor "plugins" (a conflist)');
    raw.plugins.forEach((p, i) => {
      if (!isObject(p) || typeof p.type !== 'string' || !p.type) throw KnitError.invalid(`${field}.plugins[${i}].type`, 'must name a plugin');
    });
    plugins = raw.plugins as Record<string, unknown>[];
  }
  if (cniArgs && Object.keys(cniArgs).length) plugins = plugins.map((p) => withCniArgs(p, cniArgs));
  const knit = plugins.findIndex((p) => p.type === KNIT_PLUGIN_TYPE);
  if (knit >= 0) {
    if (plugins.length > 1) throw new KnitError('UNIMPLEMENTED', `${field}: knit must be the only plugin of a definition that uses it (it is plugin ${knit + 1} of ${plugins.length})`, { field });
    return { kind: 'knit', conf: { ...plugins[0], name, cniVersion } };
  }
  const list = typeof raw.type === 'string' && raw.type ? { cniVersion, name, plugins } : { ...raw, cniVersion, name, plugins };
  return { kind: 'chain', conflist: JSON.stringify(list), cniVersion, name };
}

/**
 * GetCNIConfigFromFile: for a definition with no config, the first file of `files` (sorted by
 * name, .conf, .json and .conflist) whose `name` is the definition's name; `read` gives a
 * file's text. Undefined when none is.
 */
export function configFromFiles(name: string, files: { file: string; text: string }[]): string | undefined {
  const ours = files.filter((f) => /\.(conf|json|conflist)$/.test(f.file)).sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : 0));
  for (const f of ours) {
    try {
      const conf = JSON.parse(f.text) as { name?: unknown };
      if (conf?.name === name) return f.text;
    } catch {
      // libcni would fail on it: not the network's file
    }
  }
  return undefined;
}
