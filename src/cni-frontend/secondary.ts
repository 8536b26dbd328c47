// The CNI frontend's side of `secondaryNetworks` (docs/secondary-networks.md), loaded with
// import() by the daemon only when the config has the block: the pod's networks worked out at the
// ADD of its primary interface, the request completed with what each came from, KubeVirt's
// binding entries added after the attach, and the pod's network-status published.
import { CniCode } from '../base/errors.js';
import type { AttachRequest, AttachResult, SandboxService } from '../base/types.js';
import { CniError } from '../cni/spec.js';
import { POD_ANNOTATIONS } from './annotations.js';
import { PodNetworkResolver, type PodPlan, type PodRef, type SecondaryNetworksPort } from './pod-networks.js';
import { addLater, podNetworkStatus, publish, withAttachments } from './pod-attach.js';
import type { PluginConfig, ShimRequest } from './request.js';
import type { SecondaryFrontend } from './handler.js';

export class PodNetworksFrontend implements SecondaryFrontend {
  constructor(
    private readonly service: SandboxService,
    private readonly port: SecondaryNetworksPort,
  ) {}

  notReady(): string | undefined {
    return this.port.notReady();
  }

  /** The pod's networks: from the annotations the runtime passed, else the API's copy. */
  async plan(pod: PodRef, annotations: Record<string, string>, conf: PluginConfig, req: ShimRequest, args: Map<string, string>): Promise<PodPlan> {
    const waiting = this.port.notReady();
    if (waiting) throw new CniError(CniCode.tryAgainLater, `secondaryNetworks: ${waiting}`);
    const passed = conf.runtimeConfig && Object.hasOwn(conf.runtimeConfig, POD_ANNOTATIONS);
    const podAnnotations = passed ? annotations : await this.port.podAnnotations(pod);
    const version = typeof conf.cniVersion === 'string' ? conf.cniVersion : '1.0.0';
    return new PodNetworkResolver(this.port, version).plan(pod, podAnnotations, req.args, args, req.ifname, conf.runtimeConfig ?? {});
  }

  withAttachments(req: AttachRequest, plan: PodPlan): AttachRequest {
    return withAttachments(req, plan, plan.interfaces.filter((p) => !p.later));
  }

  /** KubeVirt's binding entries, then the pod's network-status. */
  async afterAttach(pod: PodRef, plan: PodPlan, req: AttachRequest, primaryName: string, result: AttachResult, rename: (source: string) => (field: string) => string): Promise<void> {
    const full = (await addLater(this.service, req.sandboxId, plan.interfaces.filter((p) => p.later), rename)) ?? result;
    const recorded = this.service.lookup(req.sandboxId)?.request ?? req;
    publish(this.port, pod, podNetworkStatus(full, recorded, primaryName, plan));
  }

  /** After a crash between the attach and KubeVirt's binding entries: those still missing. */
  async addMissing(sandboxId: string, recorded: AttachRequest, plan: PodPlan, rename: (source: string) => (field: string) => string): Promise<AttachResult | undefined> {
    const missing = plan.interfaces.filter((p) => p.later && !recorded.interfaces.some((i) => i.name === p.wire.name));
    return missing.length ? addLater(this.service, sandboxId, missing, rename) : undefined;
  }
}
