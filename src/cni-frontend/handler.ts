// The CNI verbs on knit's core: ADD -> Attach (or AddInterface for a further CNI_IFNAME),
// DEL -> Detach (or RemoveInterface), CHECK -> Check, STATUS -> NodeStatus, GC -> Detach of
// this network's sandboxes missing from the valid-attachments list. Every failure leaves as a
// CNI error object with the code that fits.
import type { AttachRequest, AttachResult, InterfaceRequest, SandboxService } from '../base/types.js';
import { CniCode, KnitError } from '../base/errors.js';
import { validateAddInterface, validateAttach, validateSandboxId } from '../api/validate.js';
import type { WireInterfaceRequest } from '../api/wire-types.js';
import { CniError, appendToPrevResult, errorObject, negotiateVersion, renderResult, type CniVersion } from '../cni/spec.js';
import { parseCniArgs, parsePluginConfig, type PluginConfig, type ShimRequest } from './request.js';
import { podSettings, CNI_NETWORK_LABEL, POD_NETWORKS_LABEL } from './annotations.js';
import { guestName } from '../base/handoff.js';
import { draInterfaceNames } from '../dra/labels.js';
import { only, primaryAnswer } from './result-parts.js';
import type { PodPlan, PodRef } from './pod-networks.js';

export interface CniAnswer {
  exitCode: number;
  stdout: string;
}

/** Wire field paths -> the CNI names a runtime's operator recognises. */
function cniField(path: string): string {
  return path
    .replace(/^sandbox_id/, 'CNI_CONTAINERID')
    .replace(/^netns_path/, 'CNI_NETNS')
    .replace(/^interfaces\[0\]\.name/, 'CNI_IFNAME')
    .replace(/^interfaces\[0\]\.mac/, 'runtimeConfig.mac')
    .replace(/^interfaces\[0\]\.ips/, 'runtimeConfig.ips')
    .replace(/^interfaces\[0\]\.network/, 'network')
    .replace(/^interfaces\[0\]\.binding/, 'binding')
    .replace(/^interfaces\[0\]\.bandwidth\.ingress_rate/, 'runtimeConfig.bandwidth.ingressRate')
    .replace(/^interfaces\[0\]\.bandwidth\.ingress_burst/, 'runtimeConfig.bandwidth.ingressBurst')
    .replace(/^interfaces\[0\]\.bandwidth\.egress_rate/, 'runtimeConfig.bandwidth.egressRate')
    .replace(/^interfaces\[0\]\.bandwidth\.egress_burst/, 'runtimeConfig.bandwidth.egressBurst')
    .replace(/^interface\.name/, 'CNI_IFNAME')
    .replace(/^interface\.mac/, 'runtimeConfig.mac')
    .replace(/^interface\.ips/, 'runtimeConfig.ips')
    .replace(/^interface\./, '')
    .replace(/^port_mappings/, 'runtimeConfig.portMappings')
    .replace(/^annotations/, 'runtimeConfig["io.kubernetes.cri.pod-annotations"]');
}

const codeOf: Record<KnitError['code'], number> = {
  INVALID_ARGUMENT: CniCode.invalidConfig,
  NOT_FOUND: CniCode.containerUnknown,
  UNAVAILABLE: CniCode.tryAgainLater,
  RESOURCE_EXHAUSTED: 101,
  FAILED_PRECONDITION: 102,
  ALREADY_EXISTS: 103,
  PERMISSION_DENIED: 104,
  UNIMPLEMENTED: CniCode.unsupportedField,
  INTERNAL: 999,
};

export function toCniError(err: unknown): CniError {
  if (err instanceof CniError) return err;
  if (err instanceof KnitError) return new CniError(err.details.cniCode ?? codeOf[err.code], err.message);
  return new CniError(999, `knit internal error: ${(err as Error)?.message ?? String(err)}`);
}

/** secondaryNetworks (src/cni-frontend/secondary.ts, loaded only with the config block): the
 * networks of a pod's annotation come with its primary interface (docs/secondary-networks.md). */
export interface SecondaryFrontend {
  /** Why ADDs must wait (Multus's readinessindicatorfile is missing), else undefined. */
  notReady(): string | undefined;
  plan(pod: PodRef, annotations: Record<string, string>, conf: PluginConfig, req: ShimRequest, args: Map<string, string>): Promise<PodPlan>;
  /** The validated request with each interface's record of the network it came from. */
  withAttachments(req: AttachRequest, plan: PodPlan): AttachRequest;
  afterAttach(pod: PodRef, plan: PodPlan, req: AttachRequest, primaryName: string, result: AttachResult, rename: Renamer): Promise<void>;
  addMissing(sandboxId: string, recorded: AttachRequest, plan: PodPlan, rename: Renamer): Promise<AttachResult | undefined>;
}

/** Field names of an AddInterface for a selection of the annotation, as the caller knows them. */
type Renamer = (source: string) => (field: string) => string;
const renameTo: Renamer = (source) => (field) => sourceField(field, [source]);

export interface FrontendOptions {
  /** Why the CNI install is not whole ([] when it is): STATUS answers 50 while it is not. */
  installProblems?: () => Promise<string[]>;
  secondary?: SecondaryFrontend;
}

export class CniFrontend {
  constructor(
    private readonly service: SandboxService,
    private readonly opts: FrontendOptions = {},
  ) {}

  async handle(req: ShimRequest): Promise<CniAnswer> {
    let version = '1.0.0';
    try {
      const conf = parsePluginConfig(req.config);
      if (typeof conf.cniVersion === 'string') version = conf.cniVersion;
      const v = negotiateVersion(conf);
      version = v;
      const out = await this.verb(req, conf, v);
      return { exitCode: 0, stdout: out === undefined ? '' : `${JSON.stringify(out)}\n` };
    } catch (err) {
      return { exitCode: 1, stdout: `${JSON.stringify(errorObject(toCniError(err), version))}\n` };
    }
  }

  private async verb(req: ShimRequest, conf: PluginConfig, v: CniVersion): Promise<object | undefined> {
    switch (req.command) {
      case 'ADD':
        return this.add(req, conf, v);
      case 'DEL':
        return this.del(req);
      case 'CHECK':
        return this.check(req);
      case 'STATUS':
        return this.status(conf);
      case 'GC':
        return this.gc(conf);
      case 'VERSION':
        return { cniVersion: v, supportedVersions: ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] };
      default:
        throw new CniError(CniCode.invalidEnv, `CNI_COMMAND ${JSON.stringify(req.command.slice(0, 20))} is not ADD, DEL, CHECK, STATUS, GC or VERSION`);
    }
  }

  private async add(req: ShimRequest, conf: PluginConfig, v: CniVersion): Promise<object> {
    const args = parseCniArgs(req.args);
    const pod = podSettings(conf);
    const iface = {
      name: req.ifname,
      network: conf.network ?? '',
      mac: pod.mac,
      mtu: 0,
      ips: pod.ips,
      device: null,
      binding: pod.binding,
      bandwidth: pod.bandwidth,
      default_route: false,
    };
    // The record alone: Query's live comparison with the kernel is not needed to decide. An
    // invalid CNI_CONTAINERID finds none and is refused, naming it, by validateAttach.
    const existing = this.service.lookup(req.containerId);
    const podRef = this.podOf(args);
    let result: AttachResult;
    if (!existing) {
      const plan = podRef ? await this.opts.secondary!.plan(podRef, pod.annotations, conf, req, args) : undefined;
      const attached = plan?.interfaces.filter((p) => !p.later) ?? [];
      const moved = attached.find((p) => p.wire.default_route);
      if (moved && pod.portMappings.length) {
        // The host ports belong to the interface with the default route (a chain's portmap, or
        // knit's table on its own network): they would leave the pod's primary interface.
        throw new CniError(CniCode.unsupportedField, `runtimeConfig.portMappings: ${moved.source} moves the pod's default route off its primary interface, where its host ports are; knit does not map them there`);
      }
      // The default-network annotation's network takes the primary's place, with what the runtime passed for it.
      const primary = plan?.primary ? { ...iface, network: '', binding: {}, mac: '', ips: [], bandwidth: null, ...plan.primary.wire } : iface;
      const sources = [plan?.primary?.source, ...attached.map((p) => p.source)];
      const attach = validateAttach(
        {
          sandbox_id: req.containerId,
          pod_name: args.get('K8S_POD_NAME') ?? '',
          pod_namespace: args.get('K8S_POD_NAMESPACE') ?? '',
          pod_uid: args.get('K8S_POD_UID') ?? '',
          netns_path: req.netns,
          runtime: pod.runtime.toUpperCase(),
          interfaces: [primary, ...attached.map((p) => p.wire)] as WireInterfaceRequest[],
          port_mappings: pod.portMappings,
          dns: null,
          labels: { [CNI_NETWORK_LABEL]: conf.name ?? '', ...pod.labels(args), ...(plan && { [POD_NETWORKS_LABEL]: 'annotation' }) },
          annotations: pod.annotations,
        },
        { rename: (field) => sourceField(field, sources) },
      );
      const full = plan ? this.opts.secondary!.withAttachments(attach, plan) : attach;
      result = await this.service.attach(full);
      if (plan) {
        await this.opts.secondary!.afterAttach(podRef!, plan, full, conf.name ?? '', result, renameTo);
        result = primaryAnswer(result, full);
      }
    } else if (existing.result && (hasInterface(existing.result, req.ifname) || existing.request.interfaces.some((i) => i.name === req.ifname))) {
      // A repeated ADD (a runtime retrying after a lost answer) gets the same result, with
      // fresh hand-off tokens as an Attach answer has.
      let full = this.service.lookup(req.containerId, { tokens: true })?.result ?? existing.result;
      const first = existing.request.interfaces[0]?.name === req.ifname;
      if (first && podRef) {
        const plan = await this.opts.secondary!.plan(podRef, pod.annotations, conf, req, args);
        full = (await this.opts.secondary!.addMissing(req.containerId, existing.request, plan, renameTo)) ?? full;
      }
      // The first ADD answered with the pod's DRA devices too (they came with its interface),
      // and without the networks of its annotation (the primary's part alone, as Multus answers).
      result = first ? primaryAnswer(full, existing.request) : only(full, req.ifname);
    } else {
      if (pod.portMappings.length) throw new CniError(CniCode.unsupportedField, `runtimeConfig.portMappings: only the first interface of a sandbox (${req.containerId.slice(0, 40)}) can map host ports`);
      const add = validateAddInterface({ sandbox_id: req.containerId, interface: iface }, { rename: cniField });
      result = only(await this.service.addInterface(add.sandboxId, add.iface as InterfaceRequest), req.ifname);
    }
    return appendToPrevResult(conf.prevResult, renderResult(result, v), v);
  }

  private async del(req: ShimRequest): Promise<undefined> {
    if (!req.containerId) throw new CniError(CniCode.invalidEnv, 'CNI_CONTAINERID is required');
    const existing = this.service.lookup(req.containerId);
    if (!existing) return undefined; // Nothing of it here: DEL succeeds (CNI spec).
    // Interfaces knit added for the pod's DRA devices and the networks of its annotation go
    // with the sandbox, not one by one: the kubelet DELs the primary interface alone.
    const dra = draInterfaceNames(existing.request.labels);
    const cniInterfaces = existing.request.interfaces.filter((i, k) => !dra.has(i.name) && !(k > 0 && i.attachment));
    const named = cniInterfaces.filter((i) => i.name !== req.ifname);
    try {
      if (named.length && named.length < cniInterfaces.length) await this.service.removeInterface(req.containerId, req.ifname);
      else if (!named.length || !req.ifname) await this.service.detach(req.containerId);
    } catch (err) {
      if (err instanceof KnitError && err.code === 'NOT_FOUND') return undefined;
      throw err;
    }
    return undefined;
  }

  /** The pod an ADD is for, when secondaryNetworks is on and the runtime named it. */
  private podOf(args: Map<string, string>): PodRef | undefined {
    const namespace = args.get('K8S_POD_NAMESPACE');
    const name = args.get('K8S_POD_NAME');
    if (!this.opts.secondary || !namespace || !name) return undefined;
    return { namespace, name, uid: args.get('K8S_POD_UID') ?? '' };
  }

  private async check(req: ShimRequest): Promise<undefined> {
    const report = await this.service.check(validateSandboxId(req.containerId, 'CNI_CONTAINERID'));
    if (!report.ok) throw new CniError(100, `knit check of ${req.containerId.slice(0, 40)} found differences`, report.differences.join('; '));
    return undefined;
  }

  /** CNI 1.1 STATUS: 50 (plugin not available) while the install or the node is not ready. */
  private async status(conf: PluginConfig): Promise<undefined> {
    const install = (await this.opts.installProblems?.()) ?? [];
    if (install.length) throw new CniError(CniCode.pluginNotAvailable, `knit-cni install is not whole: ${install.join('; ')}`, 'run knit install-cni');
    const waiting = this.opts.secondary?.notReady();
    if (waiting) throw new CniError(CniCode.pluginNotAvailable, `secondaryNetworks: ${waiting}`);
    const s = await this.service.nodeStatus();
    const net = conf.network ? s.networks.find((n) => n.name === conf.network) : undefined;
    if (conf.network && !net) throw new CniError(CniCode.pluginNotAvailable, `network ${JSON.stringify(conf.network.slice(0, 40))} is not configured in knit`);
    if (!s.ready) throw new CniError(CniCode.pluginNotAvailable, `knit is not ready: ${s.reason} ${s.message}`.trim());
    if (net && !net.ready) throw new CniError(CniCode.pluginNotAvailable, `knit network ${net.name} is not ready`);
    return undefined;
  }

  /** Detaches this network's sandboxes that no valid attachment names (both keys in use). */
  private async gc(conf: PluginConfig): Promise<undefined> {
    const list = conf['cni.dev/valid-attachments'] ?? conf['cni.dev/attachments'];
    if (!Array.isArray(list)) throw new CniError(CniCode.invalidConfig, 'cni.dev/valid-attachments: a list of {containerID, ifname} is required for GC');
    const valid = new Set<string>();
    list.forEach((a, i) => {
      const id = (a as { containerID?: unknown })?.containerID;
      if (typeof id !== 'string' || !id) throw new CniError(CniCode.invalidConfig, `cni.dev/valid-attachments[${i}].containerID is required`);
      valid.add(id);
    });
    const mine = (await this.service.list()).filter((r) => r.request.labels[CNI_NETWORK_LABEL] === (conf.name ?? ''));
    const errors: string[] = [];
    for (const r of mine) {
      if (valid.has(r.request.sandboxId)) continue;
      await this.service.detach(r.request.sandboxId).catch((err: Error) => errors.push(`${r.request.sandboxId}: ${err.message}`));
    }
    if (errors.length) throw new CniError(CniCode.ioFailure, `GC could not remove ${errors.length} stale attachment(s)`, errors.join('; '));
    return undefined;
  }
}

function hasInterface(r: AttachResult, ifname: string): boolean {
  return r.interfaces.some((i) => i.sandbox && i.name === ifname) || r.interfaces.some((i) => guestName(i.handoff) === ifname);
}


/** Wire field paths -> the CNI names, for an Attach whose interfaces after the first are the
 * networks of the pod's annotation: those name the selection they came from. */
function sourceField(path: string, sources: (string | undefined)[]): string {
  const wire = path.replace(/^interface\b/, 'interfaces[0]');
  const m = /^interfaces\[(\d+)\](.*)$/.exec(wire);
  const source = m ? sources[Number(m[1])] : undefined;
  if (m && source) return `${source}${m[2]!.replace(/^\.name$/, '.interface')}`;
  return cniField(path);
}
