// KEP-4817: after the attach, each device of a claim reports in ResourceClaim.status.devices[]
// what it became in the pod: networkData (interface name, IPs as CIDRs, MAC) and a Ready
// condition, as dranet writes it. When the device leaves the pod (Detach, CNI DEL) and again at
// Unprepare, knit takes its entries away: an entry says what the device is in a pod, and once
// it is back in the host no part of it is true (a Ready False would still have to drop the
// networkData, and a claim reserved again for a later pod would show the old one's state until
// its attach). The API server drops entries of devices no longer allocated; between the detach
// and the deallocation, or for a claim a later pod reuses, only the driver can.
//
// Written by server-side apply with the driver name as field manager, so knit owns exactly its
// entries: an apply with none of them releases what knit applied before, and another driver's
// entries in the same claim (other managers) stay. Best effort and off the attach's path, one
// write at a time per claim in the order they were asked for; a failure is logged.
import type { AttachResult } from '../base/types.js';
import type { ClaimRecord } from './claim-record.js';
import { claimPath, isNotFound, type KubeApi } from './kube-port.js';

/** API limits (resource.k8s.io/v1 NetworkDeviceData). */
const MAX_IPS = 16;

type ClaimName = Pick<ClaimRecord, 'namespace' | 'name'>;

const applyConfig = (claim: ClaimName, devices: object[]) =>
  ({ apiVersion: 'resource.k8s.io/v1', kind: 'ResourceClaim', metadata: { name: claim.name, namespace: claim.namespace }, status: { devices } });

export function claimStatusPatch(driver: string, claim: ClaimRecord, result: AttachResult, now = new Date()): object {
  const devices = claim.devices.map((d) => {
    const iface = result.interfaces.find((i) => (i.handoff as { draDevice?: { device?: string } } | undefined)?.draDevice?.device === d.device);
    const data = (iface?.handoff as { networkData?: { interfaceName: string; ips: string[]; hardwareAddress: string } } | undefined)?.networkData;
    const ready = iface !== undefined;
    return {
      driver,
      pool: d.pool,
      device: d.device,
      conditions: [{
        type: 'Ready',
        status: ready ? 'True' : 'False',
        reason: ready ? (d.mode === 'vfio' ? 'VfioDeviceReady' : 'NetworkDeviceReady') : 'NotAttached',
        message: ready ? `${d.pciAddress} is ${d.mode === 'vfio' ? `bound to vfio-pci for ${iface.name}` : `${iface.name} in the pod`}` : `${d.pciAddress} is not in the sandbox's result`,
        lastTransitionTime: now.toISOString().replace(/\.\d+Z$/, 'Z'),
      }],
      ...(data && {
        networkData: {
          interfaceName: data.interfaceName,
          ips: data.ips.slice(0, MAX_IPS),
          ...(data.hardwareAddress ? { hardwareAddress: data.hardwareAddress } : {}),
        },
      }),
    };
  });
  return applyConfig(claim, devices);
}

/** The apply that releases every entry knit's field manager owns in the claim, and only those. */
export const claimStatusRelease = (claim: ClaimName): object => applyConfig(claim, []);

const apply = (api: KubeApi, driver: string, claim: ClaimName, body: object) =>
  api.patch(`${claimPath(claim.namespace, claim.name)}/status`, body, 'apply', { fieldManager: driver, force: true });

export async function writeClaimStatus(api: KubeApi, driver: string, claim: ClaimRecord, result: AttachResult): Promise<void> {
  await apply(api, driver, claim, claimStatusPatch(driver, claim, result));
}

/** knit's entries out of the claim's status; a claim already deleted has none. */
export async function releaseClaimStatus(api: KubeApi, driver: string, claim: ClaimName): Promise<void> {
  await apply(api, driver, claim, claimStatusRelease(claim)).catch((err: unknown) => {
    if (!isNotFound(err)) throw err;
  });
}

/** The status writes of the node's claims, each claim's in order (a release asked for after an
 * attach's write lands after it), none blocking the caller. */
export class ClaimStatusWriter {
  private readonly pending = new Map<string, Promise<void>>();

  constructor(
    private readonly api: KubeApi,
    private readonly driver: string,
    private readonly log: { warn(o: object, m: string): void },
  ) {}

  attached(claim: ClaimRecord, result: AttachResult): void {
    this.enqueue(claim, 'claim status write failed', () => writeClaimStatus(this.api, this.driver, claim, result));
  }

  released(claim: ClaimRecord): void {
    this.enqueue(claim, 'claim status release failed', () => releaseClaimStatus(this.api, this.driver, claim));
  }

  /** Resolves once every write asked for so far has landed or failed. */
  async settled(): Promise<void> {
    while (this.pending.size) await Promise.all(this.pending.values());
  }

  private enqueue(claim: ClaimRecord, failure: string, write: () => Promise<void>): void {
    const next = (this.pending.get(claim.uid) ?? Promise.resolve())
      .then(write)
      .catch((err: Error) => this.log.warn({ claim: `${claim.namespace}/${claim.name}`, err: err.message }, failure))
      .finally(() => {
        if (this.pending.get(claim.uid) === next) this.pending.delete(claim.uid);
      });
    this.pending.set(claim.uid, next);
  }
}
