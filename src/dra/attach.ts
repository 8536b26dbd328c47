// Into the pod at its attach: when a pod's network is set up (a knit.v1 or KNI Attach naming
// the pod's UID, or a knit-cni ADD with K8S_POD_UID), knit adds one interface per device it
// prepared for that pod's claims, with the claim's config, and the runtime strategies
// (runtimes/with-devices) do the rest: the VF netdev moved in and configured, the RDMA device
// moved in exclusive mode, the VFIO hand-off for a VM runtime. Detach gives them back with the
// rest of the sandbox (and the claims' KEP-4817 status entries go: claim-status.ts). The kubelet prepares claims before it creates the sandbox; a claim of
// the pod whose Prepare has not finished makes the attach fail retryably (UNAVAILABLE, CNI 11),
// naming the claim: never a pod without its device.
import { CniCode, KnitError } from '../base/errors.js';
import type { AttachRequest, AttachResult, InterfaceRequest, SandboxService } from '../base/types.js';
import type { DeviceParameters } from '../devices/params.js';
import { claimWhat, type ClaimRecord, type PreparedClaimDevice } from './claim-record.js';
import type { DraDriver } from './driver.js';
import { DRA_INTERFACES_LABEL, draInterfaceNames } from './labels.js';

/** Prepare already set these on the PF; the attach must not set (and later undo) them again. */
const PF_ONLY: (keyof DeviceParameters)[] = ['vlan', 'qos', 'vlanProto', 'spoofchk', 'trust', 'minTxRate', 'maxTxRate', 'linkState'];

function attachParameters(p: DeviceParameters): Record<string, unknown> {
  const out: Record<string, unknown> = { ...p };
  for (const key of PF_ONLY) delete out[key];
  return out;
}

/** The interfaces the pod's prepared claims add, in a stable order (claim, then result). */
export function claimInterfaces(claims: ClaimRecord[], taken: Set<string>): InterfaceRequest[] {
  const out: InterfaceRequest[] = [];
  let vfio = 0;
  for (const c of claims) {
    for (const d of c.devices) {
      const name = d.mode === 'vfio' ? `vfio${vfio++}` : (d.parameters.interfaceName ?? d.netdev ?? `net-${d.device}`.slice(0, 15));
      if (taken.has(name)) {
        const field = d.parameters.interfaceName !== undefined ? 'parameters.interfaceName' : 'the host name of its netdev';
        throw new KnitError('ALREADY_EXISTS', `${claimWhat(c)} device ${d.device}: interface name ${name} (${field}) is also an interface of the attach request`);
      }
      taken.add(name);
      out.push({ name, device: { pool: d.pool, name: d.device, parameters: { ...attachParameters(d.parameters) } } });
    }
  }
  return out;
}

/**
 * A refusal of the attach about an interface knit added for a claim's device, said of where its
 * values came from: interfaces[k].device is the claim's allocation result, a parameter its
 * opaque config entry, the interface name that entry's interfaceName (or the netdev's host
 * name). The caller never sent interfaces[k]. Other errors pass unchanged.
 */
export function claimFieldError(err: unknown, added: { claim: ClaimRecord; device: PreparedClaimDevice }[], first: number): unknown {
  const field = err instanceof KnitError ? err.details.field : undefined;
  const m = field ? /^interfaces\[(\d+)\](.*)$/.exec(field) : null;
  const at = m ? added[Number(m[1]) - first] : undefined;
  if (!m || !at || !(err instanceof KnitError)) return err;
  const { claim, device: d } = at;
  const result = d.resultField ?? `status.allocation.devices.results (device ${d.device})`;
  const param = (key: string) => d.parameterFields?.[key as keyof DeviceParameters] ?? `status.allocation.devices.config (parameter ${key} for request ${d.request})`;
  const rest = m[2]!;
  const PARAMS = '.device.parameters.';
  let renamed: string;
  if (rest.startsWith(PARAMS)) {
    const path = rest.slice(PARAMS.length); // "mtu", "routes[0].gw"
    const key = /^\w+/.exec(path)?.[0] ?? path;
    renamed = param(key) + path.slice(key.length);
  } else if (rest === '.name') {
    renamed = d.parameters.interfaceName !== undefined ? param('interfaceName') : `${result}.device (the host name of its netdev)`;
  } else {
    renamed = `${result}.device`;
  }
  const message = err.message.startsWith(`${field}: `) ? err.message.slice(field!.length + 2) : err.message;
  const out = new KnitError(err.code, `${claimWhat(claim)} device ${d.device}: ${renamed}: ${message}`, { ...err.details, field: renamed });
  out.stack = err.stack;
  return out;
}

export interface ClaimedDevicesHooks {
  /** After an attach that added claim interfaces (KEP-4817 status). */
  onAttached?(req: AttachRequest, result: AttachResult, claims: ClaimRecord[]): void;
  /** After a detach that gave claim devices back to the host. */
  onDetached?(claims: ClaimRecord[]): void;
}

/** The request with the pod's claimed devices added; unchanged for a pod with none. */
export function withPodDevices(req: AttachRequest, driver: DraDriver): { req: AttachRequest; claims: ClaimRecord[] } {
  if (!req.podUid) return { req, claims: [] };
  const { prepared, pending } = driver.claimsOfPod(req.podUid);
  const pod = `${req.podNamespace || '?'}/${req.podName || '?'} (uid ${req.podUid})`;
  if (pending.length) {
    const c = pending[0]!;
    throw new KnitError('UNAVAILABLE', `pod ${pod}: ${claimWhat(c)} (uid ${c.uid}) is not prepared on this node yet (${c.state}); try again`, { cniCode: CniCode.tryAgainLater });
  }
  if (!prepared.length) return { req, claims: [] };
  const added = claimInterfaces(prepared, new Set(req.interfaces.map((i) => i.name)));
  return {
    req: { ...req, interfaces: [...req.interfaces, ...added], labels: { ...req.labels, [DRA_INTERFACES_LABEL]: added.map((i) => i.name).join(',') } },
    claims: prepared,
  };
}

/** The service the API and the CNI frontend call, with attach (and its preview) adding devices. */
export function withClaimedDevices(inner: SandboxService, driver: DraDriver, hooks: ClaimedDevicesHooks = {}): SandboxService {
  const attach = async (req: AttachRequest) => {
    const { req: full, claims } = withPodDevices(req, driver);
    const result = await inner.attach(full).catch((err: unknown) => {
      throw claimFieldError(err, claims.flatMap((claim) => claim.devices.map((device) => ({ claim, device }))), req.interfaces.length);
    });
    if (claims.length) hooks.onAttached?.(full, result, claims);
    return result;
  };
  const plan = (req: AttachRequest) => {
    const { req: full, claims } = withPodDevices(req, driver);
    return inner.plan(full).catch((err: unknown) => {
      throw claimFieldError(err, claims.flatMap((claim) => claim.devices.map((device) => ({ claim, device }))), req.interfaces.length);
    });
  };
  const detach = async (sandboxId: string, netnsPath?: string) => {
    // Read before: a detach that has answered leaves no record to read.
    const rec = inner.lookup(sandboxId)?.request;
    const claims = rec?.podUid && draInterfaceNames(rec.labels).size ? driver.claimsOfPod(rec.podUid).prepared : [];
    await inner.detach(sandboxId, netnsPath);
    if (claims.length) hooks.onDetached?.(claims);
  };
  return new Proxy(inner, {
    get(target, key, receiver) {
      if (key === 'attach') return attach;
      if (key === 'detach') return detach;
      if (key === 'plan') return plan;
      const v = Reflect.get(target, key, receiver);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

/** The sandbox whose attach holds a PCI device (Unprepare waits for it). A sandbox whose Detach
 * has answered holds nothing any more: its devices were given back before the answer. */
export function sandboxHoldingIn(service: Pick<SandboxService, 'list'>) {
  return async (pciAddress: string): Promise<string | undefined> =>
    (await service.list()).find((r) => r.state !== 'detaching' && r.result?.interfaces.some((i) => i.pciId === pciAddress))?.request.sandboxId;
}
