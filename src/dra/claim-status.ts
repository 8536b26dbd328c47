// KEP-4817: after the attach, each device of a claim reports in ResourceClaim.status.devices[]
// what it became in the pod: networkData (interface name, IPs as CIDRs, MAC) and a Ready
// condition, as dranet writes it. Written by server-side apply with the driver name as field
// manager, so knit owns exactly its entries. Best effort and off the attach's path: the pod's
// network works whether or not the status write lands; a failure is logged.
import type { AttachResult } from '../base/types.js';
import type { ClaimRecord } from './claim-record.js';
import { claimPath, type KubeApi } from './kube-port.js';

/** API limits (resource.k8s.io/v1 NetworkDeviceData). */
const MAX_IPS = 16;

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
  return { apiVersion: 'resource.k8s.io/v1', kind: 'ResourceClaim', metadata: { name: claim.name, namespace: claim.namespace }, status: { devices } };
}

export async function writeClaimStatus(api: KubeApi, driver: string, claim: ClaimRecord, result: AttachResult): Promise<void> {
  await api.patch(`${claimPath(claim.namespace, claim.name)}/status`, claimStatusPatch(driver, claim, result), 'apply', { fieldManager: driver, force: true });
}
