// What a runtime passes in runtimeConfig (CNI capabilities: portMappings, bandwidth, ips, mac,
// io.kubernetes.cri.pod-annotations) and the pod annotations knit reads there. The keys are in
// README.md, section "CNI: knit as the plugin of unmodified runtimes".
import { CniCode } from '../base/errors.js';
import { DEFAULT_RUNTIME, RUNTIME_CHOICES, isRuntimeKind } from '../base/runtime-kinds.js';
import { CniError } from '../cni/spec.js';
import type { PluginConfig } from './request.js';
import type { WireBandwidth, WirePortMapping } from '../api/wire-types.js';
import { goField } from '../netattach/go-json.js';

/** The runtime's K8S_POD_INFRA_CONTAINER_ID of a sandbox's first ADD. */
export const INFRA_CONTAINER_LABEL = 'knit.dev/infra-container-id';
/** A sandbox whose ADD read the pod's networks annotation (secondaryNetworks): only those are
 * hot-plugged when it changes, never a pod attached before the feature was on (whose other
 * interfaces, Multus's say, are not knit's to touch). */
export const POD_NETWORKS_LABEL = 'knit.dev/pod-networks';
/** Which CNI network (conflist name) attached a sandbox: GC only touches its own. */
export const CNI_NETWORK_LABEL = 'knit.dev/cni-network';
/** Pod annotation: runc (default), kata or kubevirt. */
export const RUNTIME_ANNOTATION = 'knit.dev/runtime';
/** Pod annotation: the interface binding as a JSON object of strings, e.g. {"mode":"tcfilter"}. */
export const BINDING_ANNOTATION = 'knit.dev/binding';
/** containerd's capability: the sandbox's annotations, which are the pod's. */
export const POD_ANNOTATIONS = 'io.kubernetes.cri.pod-annotations';
/** KubeVirt adds a binding plugin's NetworkAttachmentDefinition to the pod after the network's
 * own, with this cni-arg (Multus passes it as args.cni): the VMI network the binding serves. */
const LOGIC_NETWORK_ARG = 'logicNetworkName';

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

/**
 * A key of a capability arg matched as Go's encoding/json matches it (exact first, then without
 * regard to case): containerd's CRI plugin sends go-cni structs with no JSON tags
 * ({"HostPort":..,"ContainerPort":..}), and the Go plugins it was written against accept them.
 */
const field = goField;

function logicNetworkOf(conf: PluginConfig): string | undefined {
  const args = conf.args;
  if (args === undefined) return undefined;
  const cni = isObject(args) ? args.cni : undefined;
  const name = isObject(cni) ? cni[LOGIC_NETWORK_ARG] : undefined;
  if (name === undefined) return undefined;
  if (typeof name !== 'string' || !name) throw new CniError(CniCode.invalidConfig, `args.cni.${LOGIC_NETWORK_ARG}: must be the VMI network's name`);
  return name;
}

export function podSettings(conf: PluginConfig): PodSettings {
  const rc = conf.runtimeConfig ?? {};
  if (!isObject(rc)) throw new CniError(CniCode.invalidConfig, 'runtimeConfig: must be an object');
  const annotations = stringMap(rc[POD_ANNOTATIONS], `runtimeConfig["${POD_ANNOTATIONS}"]`);
  const bw = rc.bandwidth;
  if (bw !== undefined && !isObject(bw)) throw new CniError(CniCode.invalidConfig, 'runtimeConfig.bandwidth: must be an object');
  // Same units as the request field (bits/s, bits); knit's validation names the field if wrong.
  const bandwidth = bw && Object.keys(bw).length
    ? { ingress_rate: num(field(bw, 'ingressRate')), ingress_burst: num(field(bw, 'ingressBurst')), egress_rate: num(field(bw, 'egressRate')), egress_burst: num(field(bw, 'egressBurst')) }
    : null;
  const configured = stringMap(conf.binding, 'binding');
  let binding = configured;
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
  const logicNetwork = logicNetworkOf(conf);
  if (logicNetwork !== undefined) {
    // knit is KubeVirt's binding CNI here: the tap on the pod interface the network's CNI made.
    // The pod's annotation describes its knit interfaces; of it only the queue count (the VMI's
    // multi-queue setting) applies to the binding's tap.
    binding = { ...configured, ...(binding.queues !== undefined ? { queues: binding.queues } : {}), binding: 'tap', logicNetwork };
  }
  const runtime = logicNetwork !== undefined ? 'kubevirt' : annotations[RUNTIME_ANNOTATION] ?? (typeof conf.runtime === 'string' ? conf.runtime : DEFAULT_RUNTIME);
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
    const hostIp = field(p, 'hostIP');
    return {
      protocol: String(field(p, 'protocol') ?? 'tcp').toUpperCase(),
      container_port: Number(field(p, 'containerPort') ?? 0),
      host_port: Number(field(p, 'hostPort') ?? 0),
      host_ip: typeof hostIp === 'string' ? hostIp : '',
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
      return infra ? { [INFRA_CONTAINER_LABEL]: infra } : {};
    },
  };
}
