// One CNI call as the shim forwards it (protocol v1, docs/cni-frontend.md), and the parts of
// its config and CNI_ARGS knit reads.
import { z } from 'zod/v3';
import { CniCode } from '../base/errors.js';
import { CniError } from '../cni/spec.js';
import { issueText } from '../base/zod-issue.js';

export const PROTOCOL_VERSION = 1;

const shimRequest = z.object({
  v: z.literal(PROTOCOL_VERSION),
  command: z.string(),
  containerId: z.string().default(''),
  netns: z.string().default(''),
  ifname: z.string().default(''),
  args: z.string().default(''),
  path: z.string().default(''),
  config: z.string(),
});
export type ShimRequest = z.output<typeof shimRequest>;

export function parseShimRequest(text: string): ShimRequest {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new CniError(CniCode.decodeFailure, 'knit-cni request is not JSON', text.slice(0, 40));
  }
  const v = (json as { v?: unknown } | null)?.v;
  if (v !== PROTOCOL_VERSION) {
    throw new CniError(CniCode.incompatibleVersion, `knit-cni protocol ${JSON.stringify(v)} is not ${PROTOCOL_VERSION}: install the knit-cni of this daemon (knit install-cni)`);
  }
  const r = shimRequest.safeParse(json);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    throw new CniError(CniCode.decodeFailure, `knit-cni request: ${issue.path.join('.')}: ${issueText(issue)}`);
  }
  return r.data;
}

/** The plugin config knit reads (network config, after the runtime injected runtimeConfig). */
export interface PluginConfig {
  cniVersion?: unknown;
  cniVersions?: unknown;
  name?: string;
  /** knit network the interface joins; default: the daemon's default network. */
  network?: string;
  /** runc (default), kata or kubevirt; a pod annotation overrides it. */
  runtime?: string;
  /** InterfaceRequest.binding for every pod of this network; a pod annotation overrides it. */
  binding?: Record<string, string>;
  runtimeConfig?: Record<string, unknown>;
  prevResult?: unknown;
  [key: string]: unknown;
}

export function parsePluginConfig(text: string): PluginConfig {
  let conf: unknown;
  try {
    conf = JSON.parse(text);
  } catch {
    throw new CniError(CniCode.decodeFailure, 'network config on stdin is not JSON', text.slice(0, 40));
  }
  if (!conf || typeof conf !== 'object' || Array.isArray(conf)) throw new CniError(CniCode.decodeFailure, 'network config on stdin is not a JSON object');
  return conf as PluginConfig;
}

/** CNI_ARGS "K=V;K=V" as a map; a repeated key keeps its first value (podman may repeat K8S_POD_NAME). */
export function parseCniArgs(args: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const pair of args.split(';')) {
    if (!pair) continue;
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new CniError(CniCode.invalidEnv, `CNI_ARGS: ${JSON.stringify(pair.slice(0, 40))} is not KEY=VALUE`);
    const key = pair.slice(0, eq);
    if (!out.has(key)) out.set(key, pair.slice(eq + 1));
  }
  return out;
}
