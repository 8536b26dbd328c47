// The networks of a pod's `k8s.v1.cni.cncf.io/networks` annotation, resolved at the ADD of its
// primary interface into the interfaces knit attaches with it (docs/secondary-networks.md):
// each selection's NetworkAttachmentDefinition found (informer, else a bounded read), its CNI
// config made what Multus would run (src/netattach/definition.ts), with the CNI_ARGS and
// capability args Multus passes a delegate, and recorded in the interface request, so DEL and
// crash repair never need the definition again. A definition whose plugin is knit builds the
// interface in this process, as knit-cni would when Multus called it.
import { CniCode, KnitError } from '../base/errors.js';
import type { AttachmentChain, NetworkAttachment } from '../base/types.js';
import type { NetworkSpec } from '../base/strategy.js';
import { delegateOf, type AttachmentDefinition, type Delegate } from '../netattach/definition.js';
import { podNetworks, type PodNetwork, type SelectionSettings } from '../netattach/pod-networks.js';
import { DEFAULT_NETWORK_ANNOTATION, type NetworkSelection } from '../netattach/selection.js';
import { podSettings, POD_ANNOTATIONS } from './annotations.js';
import type { PluginConfig } from './request.js';
import type { WireInterfaceRequest } from '../api/wire-types.js';

export interface PodRef {
  namespace: string;
  name: string;
  uid: string;
}

/** The `secondaryNetworks` settings the frontend reads (src/config/schema.ts). */
export interface SecondarySettings extends SelectionSettings {
  pluginDirs: string[];
  cacheDir: string;
  timeoutMs: number;
}

/** What the frontend needs of the secondary-networks feature; src/daemon/secondary-networks.ts
 * implements it over the Kubernetes API or the config's literal definitions. */
export interface SecondaryNetworksPort {
  settings(): SecondarySettings;
  /** The pod's annotations, when the runtime passed none (the node's pod informer, else a
   * bounded read). */
  podAnnotations(pod: PodRef): Promise<Record<string, string>>;
  /** A definition (the informer's copy, else a bounded read); undefined when it does not exist.
   * Throws UNAVAILABLE when the API cannot say. */
  definition(namespace: string, name: string): Promise<AttachmentDefinition | undefined>;
  /** The config file standing for a definition without config: the first in confDir by its name. */
  configFile(name: string): Promise<string | undefined>;
  /** knit's own network of that name, when the config has one. */
  knitNetwork(name: string): NetworkSpec | undefined;
  /** The pod's network-status, written in the background with its UID checked. */
  publishStatus(pod: PodRef, text: string): void;
  /** Why ADDs must wait now (Multus's readinessindicatorfile is missing), else undefined. */
  notReady(): string | undefined;
}

/** One interface of the pod's networks, as the frontend hands it to an Attach or AddInterface. */
export interface PodInterface {
  /** The interface request in wire form (validated with the rest of the request). */
  wire: Partial<WireInterfaceRequest> & { name: string };
  attachment: NetworkAttachment;
  /** Where it came from, for errors. */
  source: string;
  /** KubeVirt's binding entry (cni-arg logicNetworkName): it builds on another interface, so it
   * is added once the attach has made that one. */
  later: boolean;
}

export interface PodPlan {
  /** The default-network annotation's network in place of knit's own for the primary interface. */
  primary?: PodInterface;
  interfaces: PodInterface[];
}

/** The pod's CNI_ARGS as Multus passes them to a delegate (multus-cni pkg/types/conf.go
 * createRuntimeConf and newCNIRuntimeConf): its own five first, then each of the runtime's
 * that fills an empty one or is new, in order, then MAC and IP for a selection asking for them. */
export function delegateArgs(runtimeArgs: string, k8s: Map<string, string>, sel: NetworkSelection): [string, string][] {
  const args: [string, string][] = [
    ['IgnoreUnknown', 'true'],
    ['K8S_POD_NAMESPACE', k8s.get('K8S_POD_NAMESPACE') ?? ''],
    ['K8S_POD_NAME', k8s.get('K8S_POD_NAME') ?? ''],
    ['K8S_POD_INFRA_CONTAINER_ID', k8s.get('K8S_POD_INFRA_CONTAINER_ID') ?? ''],
    ['K8S_POD_UID', k8s.get('K8S_POD_UID') ?? ''],
  ];
  for (const pair of runtimeArgs.split(';')) {
    const eq = pair.indexOf('=');
    if (eq < 0) continue; // Multus skips what is not KEY=VALUE
    const [key, value] = [pair.slice(0, eq), pair.slice(eq + 1)];
    const empty = args.find(([k, v]) => k === key && v === '' && value !== '');
    if (empty) empty[1] = value;
    else args.push([key, value]);
  }
  if (sel.mac) args.push(['MAC', sel.mac]);
  if (sel.ips) args.push(['IP', sel.ips.join(',')]);
  return args;
}

/** mergeCNIRuntimeConfig: what a selection asks for, as capability args. */
function capabilityArgs(sel: NetworkSelection): Record<string, unknown> {
  return {
    ...(sel.portMappings && { portMappings: sel.portMappings }),
    ...(sel.bandwidth && { bandwidth: sel.bandwidth }),
    ...(sel.ips && { ips: sel.ips }),
    ...(sel.mac && { mac: sel.mac }),
    ...(sel.infinibandGuid && { infinibandGUID: sel.infinibandGuid }),
    ...(sel.deviceId && { deviceID: sel.deviceId }),
  };
}

/** The capability args a runtime passed (runtimeConfig), as a master plugin gets them. */
function runtimeCapabilities(runtimeConfig: Record<string, unknown>): Record<string, unknown> {
  const { [POD_ANNOTATIONS]: _annotations, ...rest } = runtimeConfig;
  return rest;
}

export class PodNetworkResolver {
  constructor(
    private readonly port: SecondaryNetworksPort,
    private readonly cniVersion: string,
  ) {}

  /** The pod's networks as interfaces, in Multus's order; throws naming the selection that
   * fails. `runtimeConfig` is what the runtime passed for the primary interface: a network of
   * the default-network annotation takes it, as Multus gives its master plugin the runtime's. */
  async plan(pod: PodRef, annotations: Record<string, string>, runtimeArgs: string, k8s: Map<string, string>, primaryIfname: string, runtimeConfig: Record<string, unknown>): Promise<PodPlan> {
    const settings = this.port.settings();
    const nets = podNetworks(annotations, pod.namespace, primaryIfname, settings);
    const out: PodPlan = { interfaces: [] };
    if (nets.primary) {
      const n = { selection: nets.primary, ifname: primaryIfname, source: `annotations["${DEFAULT_NETWORK_ANNOTATION}"]`, isDefault: false };
      out.primary = await this.interfaceFor(n, runtimeArgs, k8s, settings, runtimeConfig);
    }
    for (const n of nets.networks) out.interfaces.push(await this.interfaceFor(n, runtimeArgs, k8s, settings));
    return out;
  }

  private async interfaceFor(n: PodNetwork, runtimeArgs: string, k8s: Map<string, string>, settings: SecondarySettings, primary?: Record<string, unknown>): Promise<PodInterface> {
    const { selection: sel, source } = n;
    const name = `${sel.namespace}/${sel.name}`;
    const delegate = await this.delegate(n, name);
    if (delegate.kind === 'knit') return this.knitInterface(n, name, delegate.conf, primary);
    const chain: AttachmentChain = {
      conflist: delegate.conflist, args: delegateArgs(runtimeArgs, k8s, primary ? { name, namespace: sel.namespace } : sel),
      capabilityArgs: primary ? runtimeCapabilities(primary) : capabilityArgs(sel),
      pluginDirs: settings.pluginDirs, cacheDir: settings.cacheDir, timeoutMs: settings.timeoutMs,
    };
    const gateways = sel.defaultRoute;
    return {
      wire: { name: n.ifname, ...(gateways && { default_route: true }) },
      attachment: { name, chain, ...(gateways && { gateways }) },
      source,
      later: false,
    };
  }

  /** The definition's delegate; one the config names is found as Multus finds it: the
   * definition, else knit's network or a file of confDir by that name. */
  private async delegate(n: PodNetwork, name: string): Promise<Delegate> {
    const { selection: sel } = n;
    const def = await this.port.definition(sel.namespace, sel.name);
    if (!def && !n.isDefault) {
      throw new KnitError('FAILED_PRECONDITION', `${n.source}: no NetworkAttachmentDefinition ${name}`, { field: n.source, cniCode: CniCode.tryAgainLater });
    }
    let config = def?.config ?? '';
    if (!config.trim()) {
      // A definition without config, or a configured network with no definition: knit's own
      // network of that name, else a file of confDir whose "name" it is (GetCNIConfigFromFile).
      if (this.port.knitNetwork(sel.name)) return { kind: 'knit', conf: { type: 'knit', network: sel.name } };
      const file = await this.port.configFile(sel.name);
      if (file === undefined) {
        throw new KnitError('FAILED_PRECONDITION', `${n.source}: ${def ? `NetworkAttachmentDefinition ${name} has no config, and` : `no NetworkAttachmentDefinition ${name},`} and no knit network or file of secondaryNetworks.confDir is named ${sel.name}`, { field: n.source });
      }
      config = file;
    }
    return delegateOf(name, sel.name, config, sel.cniArgs, this.cniVersion);
  }

  /** knit's own plugin: the interface knit-cni would make for this config, with what the
   * selection asks passed only where the config declares the capability (as libcni would).
   * As the primary interface it takes what the runtime passed, as knit-cni would. */
  private knitInterface(n: PodNetwork, name: string, conf: Record<string, unknown>, primary?: Record<string, unknown>): PodInterface {
    const sel = n.selection;
    const caps = (typeof conf.capabilities === 'object' && conf.capabilities ? conf.capabilities : {}) as Record<string, unknown>;
    const runtimeConfig: Record<string, unknown> = primary ?? {};
    for (const [cap, value] of Object.entries(primary ? {} : capabilityArgs(sel))) {
      if (caps[cap] !== true) {
        throw new KnitError('UNIMPLEMENTED', `${n.source}: NetworkAttachmentDefinition ${name} (knit) declares no "${cap}" capability, so knit cannot give its interface the ${cap} asked for`, { field: n.source });
      }
      if (cap === 'portMappings') throw new KnitError('UNIMPLEMENTED', `${n.source}: portMappings: only the pod's primary interface maps host ports`, { field: n.source });
      runtimeConfig[cap] = value;
    }
    const pod = podSettings({ ...(conf as PluginConfig), runtimeConfig });
    const network = typeof conf.network === 'string' ? conf.network : '';
    const knit = network ? this.port.knitNetwork(network) : undefined;
    if (sel.defaultRoute && knit) {
      const own = [knit.ipv4?.gateway, knit.ipv6?.gateway].filter(Boolean);
      const other = sel.defaultRoute.find((gw) => !own.includes(gw));
      if (other) throw new KnitError('UNIMPLEMENTED', `${n.source}: default-route ${other}: the default route of knit network ${network} goes via its own gateway (${own.join(', ') || 'none'})`, { field: n.source });
    }
    return {
      wire: {
        name: n.ifname, network, mac: pod.mac, ips: pod.ips, binding: pod.binding, bandwidth: pod.bandwidth,
        ...(sel.defaultRoute && { default_route: true }),
      },
      attachment: { name },
      source: n.source,
      later: pod.binding.logicNetwork !== undefined,
    };
  }
}
