// Interfaces on a network of mode "cni": the network is a CNI plugin chain (a conflist), and
// the plan's step for the interface is the chain's ADD, with the chain's DEL as its inverse.
// withCniChains() puts this in front of a runtime's strategy; interfaces on knit's own
// networks go to the runtime as before. The chain's result becomes the interface's result
// after the step ran (src/cni-exec/result.ts).
import { KnitError } from '../../src/base/errors.js';
import { loadConflist, type Conflist } from '../../src/cni-exec/conflist.js';
import { declaredCapabilities } from '../../src/cni-exec/chain.js';
import type { CniChainAction } from '../../src/base/ops.js';
import { identifyNetns, type NetnsId } from '../../src/net/netns.js';
import type { InterfaceInput, InterfacePlan, PrepareContext, Strategy } from '../../src/base/strategy.js';
import type { Step } from '../../src/base/plan.js';
import type { ResultRoute } from '../../src/base/types.js';

export interface PreparedChain {
  list: Conflist;
  action: Omit<CniChainAction, 'op'>;
}

// libcni's validateContainerID / validateInterfaceName.
const CONTAINER_ID = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;

/** The capability args of one interface, refused where no plugin of the chain declares them:
 * a field either does what it says or is refused. */
function capabilityArgs(input: InterfaceInput, list: Conflist): Record<string, unknown> {
  const { request: req, iface } = input;
  const i = req.interfaces.indexOf(iface);
  const declared = declaredCapabilities(list);
  const args: Record<string, unknown> = {};
  const offer = (cap: string, field: string, value: unknown) => {
    if (!declared.has(cap)) {
      throw new KnitError('UNIMPLEMENTED', `${field}: network ${input.network.name} is a CNI chain (${list.name}) whose plugins declare no "${cap}" capability`, { field });
    }
    args[cap] = value;
  };
  // Port mappings belong to the interface that carries the pod's default route (the first,
  // unless another is marked), as CRI runtimes and Multus hand them to the default network's
  // chain; knit's own networks publish them on the same interface (src/core/host-ports.ts).
  if (input.defaultRoute !== false && req.portMappings.length) {
    offer('portMappings', 'port_mappings', req.portMappings.map((p) => ({
      hostPort: p.hostPort, containerPort: p.containerPort, protocol: p.protocol.toLowerCase(), ...(p.hostIp && { hostIP: p.hostIp }),
    })));
  }
  if (iface.bandwidth) {
    const { ingress, egress } = iface.bandwidth;
    offer('bandwidth', `interfaces[${i}].bandwidth`, {
      ...(ingress && { ingressRate: ingress.rate, ingressBurst: ingress.burst }),
      ...(egress && { egressRate: egress.rate, egressBurst: egress.burst }),
    });
  }
  if (iface.mac) offer('mac', `interfaces[${i}].mac`, iface.mac);
  if (iface.ips?.length) offer('ips', `interfaces[${i}].ips`, iface.ips);
  if (iface.mtu !== undefined) throw new KnitError('UNIMPLEMENTED', `interfaces[${i}].mtu: on CNI network ${input.network.name} the chain's config sets the MTU`, { field: `interfaces[${i}].mtu` });
  return args;
}

/** CNI_ARGS as a CRI runtime sets them for Kubernetes pods. */
function cniArgs(input: InterfaceInput): [string, string][] {
  const r = input.request;
  const pairs: [string, string][] = [['IgnoreUnknown', '1']];
  if (r.podNamespace) pairs.push(['K8S_POD_NAMESPACE', r.podNamespace]);
  if (r.podName) pairs.push(['K8S_POD_NAME', r.podName]);
  pairs.push(['K8S_POD_INFRA_CONTAINER_ID', input.sandboxId]);
  if (r.podUid) pairs.push(['K8S_POD_UID', r.podUid]);
  return pairs;
}

/** knit plan may be asked about a netns that does not exist yet: then there is nothing to pin. */
function netnsIdOf(path: string): NetnsId | undefined {
  try {
    return identifyNetns(path, { rejectHost: true });
  } catch {
    return undefined;
  }
}

export async function prepareChain(input: InterfaceInput): Promise<PreparedChain> {
  const cni = input.network.cni!;
  const i = input.request.interfaces.indexOf(input.iface);
  // A network of the pod's annotation runs with what the CNI frontend resolved and recorded:
  // CNI_ARGS and capability args as Multus passes them to a delegate.
  const recorded = input.iface.attachment?.chain;
  if (!CONTAINER_ID.test(input.sandboxId)) {
    throw KnitError.invalid('sandbox_id', `a CNI network needs a container id of letters, digits, "_", "." and "-" (got ${JSON.stringify(input.sandboxId.slice(0, 40))})`);
  }
  let list: Conflist;
  try {
    list = await loadConflist(cni);
  } catch (err) {
    throw new KnitError('FAILED_PRECONDITION', `interfaces[${i}].network: the conflist of network ${input.network.name} is unusable: ${(err as Error).message}`, { field: `interfaces[${i}].network` });
  }
  const action: Omit<CniChainAction, 'op'> = {
    network: input.network.name, conflist: list.bytes, containerId: input.sandboxId, ifName: input.iface.name, netns: input.netnsPath, netnsId: netnsIdOf(input.netnsPath),
    args: recorded?.args ?? cniArgs(input), capabilityArgs: recorded?.capabilityArgs ?? capabilityArgs(input, list),
    pluginDirs: cni.pluginDirs, cacheDir: cni.cacheDir, timeoutMs: cni.timeoutMs,
  };
  return { list, action };
}

export const isPreparedChain = (p: unknown): p is PreparedChain => !!p && typeof p === 'object' && 'action' in p && 'list' in p;

/** One step: the chain's ADD, undone by the chain's DEL with the cached result. `knit plan`
 * shows it plugin by plugin (src/core/cni-steps.ts displaySteps). */
export function planChain(input: InterfaceInput): InterfacePlan {
  const p = input.prepared;
  if (!isPreparedChain(p)) throw new KnitError('INTERNAL', `interface ${input.iface.name}: a CNI plan needs prepare() to have read the conflist`);
  const types = p.list.plugins.map((pl) => pl.type).join(' → ');
  const defaults = attachmentDefaultRoutes(input);
  return {
    steps: [{
      description: `CNI ADD chain ${p.list.name} (${types}) for ${input.iface.name}`,
      do: { op: 'cni.add', ...p.action },
      undo: { op: 'cni.del', ...p.action },
    }, ...defaults.steps],
    // Placeholders until the chain answers: the plugins choose names, MACs and addresses.
    interfaces: [{ name: input.iface.name, kind: 'cni', sandbox: input.netnsPath }],
    ips: [],
    routes: defaults.routes,
    ...(defaults.drops && { dropsChainDefaultRoutes: true }),
  };
}

/**
 * Multus's `default-route` for a network of the pod's annotation (multus-cni pkg/multus
 * multus.go, CmdAdd): once any network of the pod names gateways, every other chain's default
 * routes are deleted after its ADD, and the named network's own are replaced by one via each
 * gateway. knit's own interfaces leave theirs out when planned (InterfaceInput.defaultRoute).
 */
function attachmentDefaultRoutes(input: InterfaceInput): { steps: Step[]; routes: ResultRoute[]; drops: boolean } {
  const { iface, netnsPath: netns } = input;
  if (!iface.attachment || !input.request.interfaces.some((x) => x.defaultRoute)) return { steps: [], routes: [], drops: false };
  const gateways = input.defaultRoute ? iface.attachment.gateways ?? [] : [];
  const families = input.defaultRoute ? [...new Set(gateways.map((g) => (g.includes(':') ? 6 : 4) as 4 | 6))] : [4, 6] as const;
  const steps: Step[] = families.map((family) => ({
    description: `delete the IPv${family} default route the chain put on ${iface.name}`,
    netns,
    do: { op: 'route.del', dst: 'default', family, link: iface.name, ignoreMissing: true },
  }));
  for (const gateway of gateways) {
    const family = gateway.includes(':') ? 6 : 4;
    const route = { dst: 'default', family, gateway, link: iface.name } as const;
    steps.push({ description: `default route via ${gateway} on ${iface.name}`, netns, do: { op: 'route.add', ...route }, undo: { op: 'route.del', ...route, ignoreMissing: true } });
  }
  return { steps, routes: gateways.map((gw) => ({ dst: gw.includes(':') ? '::/0' : '0.0.0.0/0', gw })), drops: true };
}

/** The VM models that build on the chain's veth: Kata tcfilter and KubeVirt masquerade and
 * tap. The others move the pod's MAC or addresses off the veth (macvtap, bridge) or need
 * knit's host-side veth (host-tap); on a CNI network they are refused, not half-built. */
function refuseUnbuiltModels(input: InterfaceInput, runtime: string): void {
  const i = input.request.interfaces.indexOf(input.iface);
  const b = input.iface.binding ?? {};
  const model = runtime === 'kata' ? (b.mode ?? 'tcfilter') : runtime === 'kubevirt' ? (b.binding ?? 'masquerade') : undefined;
  if (model === undefined || ['tcfilter', 'masquerade', 'tap'].includes(model)) return;
  const field = `interfaces[${i}].binding.${runtime === 'kata' ? 'mode' : 'binding'}`;
  throw new KnitError('UNIMPLEMENTED', `${field}: ${runtime} ${model} on CNI network ${input.network.name} is not implemented (tcfilter, masquerade and tap are)`, { field });
}

/** `inner` for interfaces on knit's own networks; the chain for those on a CNI network. */
export function withCniChains(inner: Strategy): Strategy {
  return {
    runtime: inner.runtime,
    ...(inner.vfio && { vfio: inner.vfio }),
    async prepare(input: InterfaceInput, ctx: PrepareContext) {
      if (input.network.mode !== 'cni') return inner.prepare?.(input, ctx);
      if (!input.iface.attachment) refuseUnbuiltModels(input, inner.runtime);
      return prepareChain(input);
    },
    planInterface(input: InterfaceInput) {
      // runc needs nothing beyond the chain's veth; the VM runtimes build on it (pod-side.ts).
      // A network of the pod's annotation is the pod interface alone, as Multus makes it: a VM
      // reaches it through its binding (KubeVirt's binding NAD), not through this runtime.
      const chainAlone = input.network.mode === 'cni' && (inner.runtime === 'runc' || input.iface.attachment !== undefined);
      return chainAlone ? planChain(input) : inner.planInterface(input);
    },
  };
}
