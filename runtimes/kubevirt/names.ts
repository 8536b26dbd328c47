// KubeVirt's device names (pkg/network/link/names.go): for pod interface <p>, the tap is
// "tap" + p[3:] (eth0 → tap0, net1 → tap1, pod<hash> → tap<hash>), the bridge k6t-<p> and the
// bridge binding's pod NIC <p>-nic, both with the hashed names' "pod" prefix dropped so they
// fit 15 bytes. Pod interface names shorter than 4 characters are not KubeVirt's; they get
// tap<index> instead.
import { checkLinkName } from '../common/binding-options.js';

const HASHED_PREFIX = 'pod';
const trimmed = (podIface: string) => (podIface.startsWith(HASHED_PREFIX) ? podIface.slice(HASHED_PREFIX.length) : podIface);

export const kubevirtTapName = (podIface: string, index: number) => (podIface.length > 3 ? `tap${podIface.slice(3)}` : `tap${index}`);
export const kubevirtBridgeName = (podIface: string) => `k6t-${trimmed(podIface)}`;
export const kubevirtNicName = (podIface: string) => `${trimmed(podIface)}-nic`;

/** Checks the names this binding derives from the pod interface name fit the kernel's rules. */
export function checkDerivedNames(index: number, names: string[]): void {
  for (const n of names) checkLinkName(`interfaces[${index}].name`, n);
}
