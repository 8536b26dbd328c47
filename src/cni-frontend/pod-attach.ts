// The ADD of a pod's primary interface with `secondaryNetworks` on: one Attach makes the primary
// interface and every network of the pod's annotation (one journal entry, rolled back whole on
// a failure or after a crash); KubeVirt's binding entries follow as AddInterface, since they
// build on a pod interface that must exist first. Then the pod's network-status goes out in
// the background. docs/secondary-networks.md says why it is shaped this way.
import { KnitError } from '../base/errors.js';
import type { AttachRequest, AttachResult, SandboxService } from '../base/types.js';
import { renderResult } from '../cni/spec.js';
import { formatNetworkStatus, networkStatuses, type NetworkStatus, type ResultLike } from '../netattach/status.js';
import { draInterfaceNames } from '../dra/labels.js';
import { validateAddInterface } from '../api/validate.js';
import type { PodInterface, PodPlan, PodRef, SecondaryNetworksPort } from './pod-networks.js';
import { only } from './result-parts.js';

/** The request's interfaces after validation, given the records of what each came from. */
export function withAttachments(req: AttachRequest, plan: PodPlan, attached: PodInterface[]): AttachRequest {
  const interfaces = req.interfaces.map((iface, k) => {
    const from = k === 0 ? plan.primary : attached[k - 1];
    return from ? { ...iface, attachment: from.attachment } : iface;
  });
  return { ...req, interfaces };
}

/** AddInterface for each entry that builds on an interface the attach made (KubeVirt's binding
 * NAD); one that fails takes the whole sandbox back, as Multus DELs every delegate when one
 * fails, and the error names it. */
export async function addLater(service: SandboxService, sandboxId: string, later: PodInterface[], rename: (source: string) => (field: string) => string): Promise<AttachResult | undefined> {
  let result: AttachResult | undefined;
  for (const p of later) {
    try {
      const add = validateAddInterface({ sandbox_id: sandboxId, interface: p.wire }, { rename: rename(p.source) });
      result = await service.addInterface(sandboxId, { ...add.iface, attachment: p.attachment });
    } catch (err) {
      await service.detach(sandboxId).catch(() => undefined);
      if (err instanceof KnitError && !err.message.startsWith(p.source)) throw new KnitError(err.code, `${p.source}: ${err.message}`, err.details);
      throw err;
    }
  }
  return result;
}

/** The pod's network-status: the primary (default), each network of the plan in order, then
 * the DRA devices knit moved in (device-info with their PCI address). Each from the result its
 * own CNI ADD would have answered, as CNI 1.1.0 results (with the interfaces' MTUs). */
export function podNetworkStatus(result: AttachResult, req: AttachRequest, primaryName: string, plan: PodPlan): string {
  const statuses: NetworkStatus[] = [];
  const of = (ifname: string) => renderResult(only(result, ifname), '1.1.0') as ResultLike;
  statuses.push(...networkStatuses(of(req.interfaces[0]!.name), plan.primary?.attachment.name ?? primaryName, true));
  for (const p of plan.interfaces) statuses.push(...networkStatuses(of(p.wire.name as string), p.attachment.name, false));
  for (const ifname of draInterfaceNames(req.labels)) {
    // Named as DRA names a device: its ResourceSlice pool and device.
    const device = req.interfaces.find((i) => i.name === ifname)?.device;
    const at = result.interfaces.findIndex((i) => i.name === ifname);
    const ri = result.interfaces[at];
    statuses.push({
      name: device?.pool && device.name ? `${device.pool}/${device.name}` : ifname,
      ...(ri?.sandbox && { interface: ifname }),
      ips: result.ips.filter((ip) => ip.interface === at).map((ip) => ip.address.split('/')[0]!),
      ...(ri?.mac && { mac: ri.mac }),
      dns: {},
      ...(ri?.pciId && { 'device-info': { type: 'pci', version: '1.1.0', pci: { 'pci-address': ri.pciId } } }),
    });
  }
  return formatNetworkStatus(statuses);
}

/** Publishes the pod's network-status; a pod the feature cannot name (no K8S_POD_*) has none. */
export function publish(port: SecondaryNetworksPort, pod: PodRef | undefined, text: string): void {
  if (pod?.uid) port.publishStatus(pod, text);
}
