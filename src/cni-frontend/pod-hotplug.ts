// A running pod's networks annotation changed (the node's pod informer saw it): the interfaces
// it now asks for are added to the pod's sandbox, and those it no longer asks for removed, with
// knit's AddInterface and RemoveInterface (each under the sandbox's lock, journaled), then its
// network-status is written again. Multus needs a controller of its own and its thick daemon for
// this (multus-dynamic-networks-controller). docs/secondary-networks.md, "Hot-plug".
import type { InterfaceRequest, SandboxRecordView, SandboxService } from '../base/types.js';
import { validateAddInterface } from '../api/validate.js';
import { KnitError } from '../base/errors.js';
import { parseCniArgs } from './request.js';
import { CNI_NETWORK_LABEL, INFRA_CONTAINER_LABEL, POD_NETWORKS_LABEL } from './annotations.js';
import { PodNetworkResolver, type PodInterface, type PodPlan, type PodRef, type SecondaryNetworksPort } from './pod-networks.js';
import { podNetworkStatus, publish } from './pod-attach.js';

export interface HotplugLog {
  info(o: object, msg: string): void;
  warn(o: object, msg: string): void;
}

/** What a recorded interface of the annotation is, to compare with what is asked now. */
const sameNetwork = (recorded: InterfaceRequest, wanted: PodInterface) => recorded.attachment?.name === wanted.attachment.name;

/** The CNI_ARGS the runtime gave the pod's first ADD, as far as the record holds them. */
function runtimeArgs(rec: SandboxRecordView): string {
  const r = rec.request;
  const infra = r.labels[INFRA_CONTAINER_LABEL] ?? r.sandboxId;
  return `IgnoreUnknown=1;K8S_POD_NAMESPACE=${r.podNamespace ?? ''};K8S_POD_NAME=${r.podName ?? ''};K8S_POD_INFRA_CONTAINER_ID=${infra};K8S_POD_UID=${r.podUid ?? ''}`;
}

export class PodHotplug {
  /** One reconcile per pod at a time; a change that arrives meanwhile runs after it. */
  private readonly queue = new Map<string, Promise<void>>();

  constructor(
    private readonly service: SandboxService,
    private readonly port: SecondaryNetworksPort,
    private readonly log: HotplugLog,
  ) {}

  /** Brings the pod's sandbox in line with `annotations`; answers once done (tests). */
  reconcile(pod: PodRef, annotations: Record<string, string>): Promise<void> {
    const key = `${pod.namespace}/${pod.name}`;
    const next = (this.queue.get(key) ?? Promise.resolve()).then(() => this.run(pod, annotations)).catch((err: Error) => {
      this.log.warn({ pod: key, err: err.message }, 'secondary networks: the pod\'s networks annotation changed, and knit could not follow it');
    });
    this.queue.set(key, next);
    void next.then(() => {
      if (this.queue.get(key) === next) this.queue.delete(key);
    });
    return next;
  }

  private async run(pod: PodRef, annotations: Record<string, string>): Promise<void> {
    const rec = (await this.service.list()).find((r) => r.state === 'attached' && r.request.podUid === pod.uid && r.request.podNamespace === pod.namespace && r.request.podName === pod.name);
    if (!rec) return; // not attached here (yet): its ADD reads the annotation itself
    if (!rec.request.labels[POD_NETWORKS_LABEL]) return; // attached before secondaryNetworks was on: not knit's to follow
    const req = rec.request;
    const recorded = req.interfaces.slice(1).filter((i) => i.attachment);
    const primary = req.interfaces[0]!.name;
    const plan = await new PodNetworkResolver(this.port, '1.0.0').plan(pod, annotations, runtimeArgs(rec), parseCniArgs(runtimeArgs(rec)), primary, {});
    if (plan.primary?.attachment.name !== req.interfaces[0]!.attachment?.name) {
      this.log.warn({ pod: `${pod.namespace}/${pod.name}` }, 'secondary networks: the default-network annotation changed; the primary interface stays as it was made');
    }
    const keep = (i: InterfaceRequest) => plan.interfaces.some((p) => p.wire.name === i.name && sameNetwork(i, p));
    const removed = recorded.filter((i) => !keep(i));
    const added = plan.interfaces.filter((p) => !recorded.some((i) => i.name === p.wire.name && sameNetwork(i, p)));
    if (!removed.length && !added.length) return;
    // Bindings first out, last in: KubeVirt's tap builds on its pod interface.
    for (const i of [...removed].reverse()) await this.service.removeInterface(req.sandboxId, i.name);
    for (const p of added.sort((a, b) => Number(a.later) - Number(b.later))) {
      if (p.wire.default_route) throw new KnitError('UNIMPLEMENTED', `${p.source}: default-route: a running pod keeps its default route; only its first ADD can move it`);
      const add = validateAddInterface({ sandbox_id: req.sandboxId, interface: p.wire });
      await this.service.addInterface(req.sandboxId, { ...add.iface, attachment: p.attachment });
    }
    this.log.info({ pod: `${pod.namespace}/${pod.name}`, added: added.map((p) => p.wire.name), removed: removed.map((i) => i.name) }, 'secondary networks: interfaces hot-plugged as the pod\'s annotation asks');
    const now = this.service.lookup(req.sandboxId);
    if (!now?.result) return;
    // network-status in the record's order, which is the annotation's for what it kept.
    const order: PodPlan = { interfaces: now.request.interfaces.slice(1).filter((i) => i.attachment).map((i) => ({ wire: { name: i.name }, attachment: i.attachment!, source: '', later: false })) };
    if (req.interfaces[0]!.attachment) order.primary = { wire: { name: primary }, attachment: req.interfaces[0]!.attachment, source: '', later: false };
    publish(this.port, pod, podNetworkStatus(now.result, now.request, req.labels[CNI_NETWORK_LABEL] ?? '', order));
  }
}
