// ResultInterface.handoff: what the consumer of an interface needs beyond the device itself.
// Three shapes, told apart by `model`:
//   - a tap or macvtap a VMM opens (Kata tcfilter/macvtap/host-tap, KubeVirt tap/masquerade/
//     bridge), built by runtimes/common/tap-handoff.ts, with the guest's network configuration;
//   - a PCI function bound to vfio-pci for a VM (runtimes/with-devices/vfio.ts);
//   - a device netdev moved into the sandbox (runtimes/with-devices/netdev.ts).
// Plain JSON: it is stored in the record and sent as a google.protobuf.Struct.
import type { DnsConfig } from './dns.js';
import type { RuntimeKind } from './runtime-kinds.js';

export type GuestRoute = {
  /** CIDR; "0.0.0.0/0" / "::/0" for the default route. */
  dst: string;
  gateway?: string;
  /** Gateway reachable without a covering subnet (routed networks' link-local gateway). */
  onlink?: boolean;
  scope?: 'universe' | 'link';
  /** Per-route MTU (RTAX_MTU), when the pod route carries one. */
  mtu?: number;
  /** Route metric, when the pod route carries one (a network the sandbox is on twice). */
  metric?: number;
};

export type GuestNeighbor = { address: string; mac: string; state: 'permanent' | 'reachable' };

/** What a VM guest must configure on its NIC (runtimes/common/guest-config.ts derives it). */
export type GuestConfig = {
  /** Interface name inside the guest. */
  name: string;
  mac: string;
  mtu: number;
  ips: { address: string; family: 4 | 6; gateway?: string }[];
  routes: GuestRoute[];
  neighbors: GuestNeighbor[];
  dns?: DnsConfig;
  /** How the guest learns it: Kata's agent, the Kata DAN file (then the agent), or DHCP
   * served by the launcher (KubeVirt). */
  delivery: 'agent' | 'dan' | 'dhcp';
};

/** Where the pod's addresses live: on the pod's veth, in the guest, or both (Kata tcfilter keeps
 * them on the veth, where ingress redirection keeps them silent). */
export type PodIpsOn = 'pod' | 'guest' | 'pod+guest';

/** KEP-4817's ResourceClaim.status.devices[].networkData, for a DRA driver to publish as is. */
export interface NetworkData {
  interfaceName: string;
  ips: string[];
  hardwareAddress: string;
}

export type TapModel = 'tcfilter' | 'macvtap' | 'host-tap' | 'tap' | 'masquerade' | 'bridge';

export interface TapHandoff {
  runtime: 'kata' | 'kubevirt';
  model: TapModel;
  device: 'tap' | 'macvtap';
  /** Device name, in `netns`. */
  name: string;
  /** Netns path holding the device; null = the host (the daemon's netns). */
  netns: string | null;
  /** Queue pairs: open the device this many times (one fd per queue). */
  queues: number;
  /** TUNSETIFF flags the opener must use, by name and as a number. */
  flags: string;
  flagsValue: number;
  /** The device outlives its fds (TUNSETPERSIST): open it by name. */
  persist: boolean;
  owner?: number;
  group?: number;
  /** The guest NIC's MAC (not the tap's own). */
  mac: string;
  mtu: number;
  podIpsOn: PodIpsOn;
  guest: GuestConfig;
  /** Kata macvtap: the character device to open once the macvtap's ifindex is known. */
  chardev?: string;
  /** Kata host-tap: the DAN file knit wrote for the runtime. */
  dan?: { path: string };
  /** KubeVirt: the bridge between pod NIC and tap (masquerade, bridge). */
  bridge?: string;
  /** KubeVirt tap on a pod interface already there (the binding CNI): that interface, in `netns`. */
  podInterface?: string;
  /** KubeVirt masquerade: what the NAT forwards to the guest. */
  nat?: Record<string, unknown>;
  /** KubeVirt: the libvirt <interface> for the tap. */
  libvirt?: { target: string; interface: string };
  /** Added to each answer by the daemon (src/daemon/tap-fd-server.ts): where and with which one-time
   * token a launcher takes the tap's open fds. */
  fdSocket?: string;
  token?: string;
  tokenExpiresAt?: string;
}

export interface VfioHandoff {
  runtime: RuntimeKind;
  model: 'vfio';
  pciAddress: string;
  iommuGroup: number;
  /** /dev/vfio/<group>, and the container device a VMM also opens. */
  vfioDevice: string;
  containerDevice: string;
  /** The driver the function goes back to at detach; null = none. */
  originalDriver: string | null;
  mac: string;
  mtu: number;
  podIpsOn: 'guest';
  guest: GuestConfig;
  networkData: NetworkData;
  draDevice: Record<string, string>;
  /** Kata: the DAN "vfio" device entry. */
  dan?: Record<string, unknown>;
  /** KubeVirt: libvirt's <hostdev>. */
  libvirt?: { hostdev: string };
}

export interface NetdevHandoff {
  model: 'netdev';
  pciAddress: string;
  /** The device's name on the host, given back at detach. */
  hostInterfaceName: string;
  draDevice: Record<string, string>;
  networkData: NetworkData;
  rdma?: Record<string, unknown>;
}

export type Handoff = TapHandoff | VfioHandoff | NetdevHandoff;

/** A hand-off whose device a launcher opens (and may take by fd). */
export const isTapHandoff = (h: Handoff | undefined): h is TapHandoff => h !== undefined && 'device' in h && (h.device === 'tap' || h.device === 'macvtap');

/** A KubeVirt tap whose guest learns its network by DHCP from knit (src/dhcp answers it). */
export const isDhcpServedTap = (h: Handoff | undefined): h is TapHandoff =>
  isTapHandoff(h) && h.runtime === 'kubevirt' && h.device === 'tap' && h.guest.delivery === 'dhcp' && h.netns !== null;

/** Whether any of an answer's interfaces is such a tap. */
export const hasDhcpServedTap = (interfaces: readonly { handoff?: Handoff }[]): boolean => interfaces.some((i) => isDhcpServedTap(i.handoff));

/** Hand-offs that say where the pod's addresses live. */
export const podIpsOn = (h: Handoff | undefined): PodIpsOn | undefined => (h && 'podIpsOn' in h ? h.podIpsOn : undefined);

/** The interface's name inside a VM guest, when there is one. */
export const guestName = (h: Handoff | undefined): string | undefined => (h && 'guest' in h ? h.guest.name : undefined);
