// What a runtime passes in runtimeConfig (CNI capabilities: portMappings, bandwidth, ips, mac,
// io.kubernetes.cri.pod-annotations) and the pod annotations knit reads there. The keys are in
// README.md, section "CNI: knit as the plugin of unmodified runtimes".
import { CniCode } from '../base/errors.js';
import { DEFAULT_RUNTIME, RUNTIME_CHOICES, isRuntimeKind } from '../base/runtime-kinds.js';
import { CniError } from '../cni/spec.js';
import type { PluginConfig } from './request.js';
import type { WireBandwidth, WirePortMapping } from '../api/wire-types.js';

/** Which CNI network (conflist name) attached a sandbox: GC only touches its own. */
export const CNI_NETWORK_LABEL = 'knit.dev/cni-network';
/** Pod annotation: runc (default), kata or kubevirt. */
export const RUNTIME_ANNOTATION = 'knit.dev/runtime';
/** Pod annotation: the interface binding as a JSON object of strings, e.g. {"mode":"tcfilter"}. */
export const BINDING_ANNOTATION = 'knit.dev/binding';
const POD_ANNOTATIONS = 'io.kubernetes.cri.pod-annotations';

export interface PodSettings {
  runtime: string;
  binding: Record<string, string>;
  mac: string;
  ips: string[];
  portMappings: WirePortMapping[];
  /** runtimeConfig.bandwidth (CNI's bandwidth capability) for the interface, or null. */
  bandwidth: WireBandwidth | null;
  annotations: Record<string, string>;
  labels(args: Map<string, string>): Record<string, string>;
}

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);

function stringMap(v: unknown, field: string): Record<string, string> {
  if (v === undefined || v === null) return {};
  if (!isObject(v)) throw new CniError(CniCode.invalidConfig, `${field}: must be an object of strings`);
  for (const [k, s] of Object.entries(v)) {
    if (typeof s !== 'string') throw new CniError(CniCode.invalidConfig, `${field}["${k.slice(0, 40)}"]: must be a string`);
  }
  return v as Record<string, string>;
}

const num = (v: unknown): string | number => (typeof v === 'number' || typeof v === 'string' ? v : 0);

export function podSettings(conf: PluginConfig): PodSettings {
  const rc = conf.runtimeConfig ?? {};
  if (!isObject(rc)) throw new CniError(CniCode.invalidConfig, 'runtimeConfig: must be an object');
  const annotations = stringMap(rc[POD_ANNOTATIONS], `runtimeConfig["${POD_ANNOTATIONS}"]`);
  const bw = rc.bandwidth;
  if (bw !== undefined && !isObject(bw)) throw new CniError(CniCode.invalidConfig, 'runtimeConfig.bandwidth: must be an object');
  // Same units as the request field (bits/s, bits); knit's validation names the field if wrong.
  const bandwidth = bw && Object.keys(bw).length
    ? { ingress_rate: num(bw.ingressRate), ingress_burst: num(bw.ingressBurst), egress_rate: num(bw.egressRate), egress_burst: num(bw.egressBurst) }
    : null;
  let binding = stringMap(conf.binding, 'binding');
  const bindingText = annotations[BINDING_ANNOTATION];
  if (bindingText !== undefined) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(bindingText);
    } catch {
      throw new CniError(CniCode.invalidConfig, `annotation ${BINDING_ANNOTATION}: ${JSON.stringify(bindingText.slice(0, 40))} is not a JSON object`);
    }
    binding = stringMap(parsed, `annotation ${BINDING_ANNOTATION}`);
  }
  const runtime = annotations[RUNTIME_ANNOTATION] ?? (typeof conf.runtime === 'string' ? conf.runtime : DEFAULT_RUNTIME);
  if (!isRuntimeKind(runtime)) {
    throw new CniError(CniCode.invalidConfig, `annotation ${RUNTIME_ANNOTATION}: ${JSON.stringify(runtime.slice(0, 40))} is not one of ${RUNTIME_CHOICES}`);
  }
  const mac = rc.mac === undefined ? '' : rc.mac;
  if (typeof mac !== 'string') throw new CniError(CniCode.invalidConfig, 'runtimeConfig.mac: must be a string');
  const ips = rc.ips === undefined ? [] : rc.ips;
  if (!Array.isArray(ips) || ips.some((ip) => typeof ip !== 'string')) throw new CniError(CniCode.invalidConfig, 'runtimeConfig.ips: must be a list of strings');
  const pm = rc.portMappings === undefined ? [] : rc.portMappings;
  if (!Array.isArray(pm)) throw new CniError(CniCode.invalidConfig, 'runtimeConfig.portMappings: must be a list');
  const portMappings = pm.map((p: unknown, i) => {
    if (!isObject(p)) throw new CniError(CniCode.invalidConfig, `runtimeConfig.portMappings[${i}]: must be an object`);
    return {
      protocol: String(p.protocol ?? 'tcp').toUpperCase(),
      container_port: Number(p.containerPort ?? 0),
      host_port: Number(p.hostPort ?? 0),
      host_ip: typeof p.hostIP === 'string' ? p.hostIP : '',
    };
  });
  return {
    runtime,
    binding,
    mac,
    ips: ips as string[],
    portMappings,
    bandwidth,
    annotations,
    labels: (args): Record<string, string> => {
      const infra = args.get('K8S_POD_INFRA_CONTAINER_ID');
      return infra ? { 'knit.dev/infra-container-id': infra } : {};
    },
  };
}
