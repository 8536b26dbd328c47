// The contract between core and a runtime strategy: core hands over one interface of one
// sandbox with its addresses already allocated; the strategy answers with the steps that
// build it and the result a launcher or kubelet needs. Strategies compute; they never run.
import type { AttachRequest, DnsConfig, InterfaceRequest, ResultInterface, ResultRoute, RuntimeKind } from './types.js';
import type { Step } from './plan.js';
import type { Op, ResultsOf } from './ops.js';
import type { GuestConfig, VfioHandoff } from './handoff.js';

/** mode "cni": the chain and how to run it (src/cni-exec). */
export interface CniSettings {
  /** Inline conflist text (an object in the file is kept as its JSON text). */
  conflist?: string;
  conflistFile?: string;
  pluginDirs: string[];
  cacheDir: string;
  timeoutMs: number;
}

export interface NetworkSpec {
  name: string;
  mode: 'bridge' | 'routed' | 'cni';
  /** mode "cni": the plugin chain knit executes (src/config/resolve.ts CniSettings). */
  cni?: CniSettings;
  /** Linux bridge name (bridge mode). */
  bridge?: string;
  /** Bridge mode: the bridge's bridged IPv4/IPv6 pass the netfilter hooks (src/config/schema.ts). */
  bridgeNetfilter?: boolean;
  mtu: number;
  hairpin: boolean;
  ipv4?: { subnet: string; gateway: string };
  ipv6?: { subnet: string; gateway: string };
  routes: { dst: string; gw?: string }[];
  /** DNS this network's pods use (merged over the sandbox's networks: src/core/interface-plans.ts). */
  dns?: DnsConfig;
  /** The node's kernel can forward IPv6 per device (net.ipv6.conf.<dev>.force_forwarding,
   * Linux 6.17+): routed mode then forwards a pod's IPv6 without touching the global switch. */
  ipv6PerDeviceForwarding?: boolean;
}

export interface Allocation {
  family: 4 | 6;
  /** bare address, no prefix */
  address: string;
  prefixLen: number;
  gateway?: string;
}

export interface InterfaceInput {
  sandboxId: string;
  netnsPath: string;
  request: AttachRequest;
  iface: InterfaceRequest;
  network: NetworkSpec;
  addresses: Allocation[];
  /** False: another interface's network gives the sandbox its default route; this one gets
   * only its own subnet and its network's configured routes (several networks per pod, as
   * Multus does). Absent: true. */
  defaultRoute?: boolean;
  /** The number a runtime names this interface's devices by (Kata's tap<N>_kata). Absent: the
   * interface's position in the request. A hot-plugged interface gets the lowest number no
   * other interface of the sandbox holds, so a removed interface's number is reused. */
  slot?: number;
  /** What this strategy's prepare() answered for this interface (device strategies). */
  prepared?: unknown;
  /** The directory Kata DAN files are confined to (config kata.danDir). Absent: Kata's default. */
  danDir?: string;
}

export interface PlannedIp {
  address: string; // CIDR
  gateway?: string;
  family: 4 | 6;
  /** index into InterfacePlan.interfaces */
  interface: number;
}

export interface InterfacePlan {
  steps: Step[];
  interfaces: ResultInterface[];
  ips: PlannedIp[];
  routes: ResultRoute[];
  /** A CNI chain's default routes are deleted right after its ADD (another interface, or the
   * gateway the request names, gives the pod its default route): the answer leaves them out. */
  dropsChainDefaultRoutes?: boolean;
}

/** What core lends prepare(): reads, the node's settings, and device ownership. */
export interface PrepareContext {
  /** Reads in the host netns (or another), e.g. link.get with vfs. */
  runOps<const T extends readonly Op[]>(netns: string | undefined, ops: T): Promise<ResultsOf<T>>;
  /** sysfs root from the config ('/sys'). */
  sysfsRoot: string;
  /** Where Kata DAN files may go (config kata.danDir); reaches planInterface as input.danDir. */
  danDir?: string;
  /** The sandbox (not this one) whose record holds this PCI device, if any. */
  holderOf(pciAddress: string): string | undefined;
  /** Takes the node-wide lock on key until this attach ends (recorded or rolled back), without
   * waiting: undefined when taken, else the sandbox whose attach holds it (this one: the
   * request names the key twice). */
  lock(key: string): string | undefined;
  /** Whether a file exists on the node (a device node such as /dev/tap<ifindex>). Absent:
   * nothing can be said, and a strategy plans without the answer. */
  pathExists?(path: string): boolean;
}

/** How a VM runtime takes a PCI function knit bound to vfio-pci (device mode "vfio"). */
export interface VfioGuest {
  /** How the guest learns its network configuration. */
  delivery: GuestConfig['delivery'];
  /** The runtime's own description of the device, added to the hand-off (Kata's DAN device,
   * libvirt's <hostdev>). */
  entry(pciAddress: string, guest: GuestConfig): Partial<VfioHandoff>;
}

export interface Strategy {
  runtime: RuntimeKind;
  /** VM runtimes: how a vfio-bound device reaches the guest. Absent: the guest configures
   * itself through its agent and the hand-off carries no runtime entry. */
  vfio?: VfioGuest;
  /** Optional: the reads a plan needs (a device's original state), awaited before
   * planInterface; the answer reaches planInterface as input.prepared. Changes nothing. */
  prepare?(input: InterfaceInput, ctx: PrepareContext): Promise<unknown>;
  planInterface(input: InterfaceInput): InterfacePlan;
}

/** One interface's share of a sandbox's result, as its strategy answered it. */
export interface InterfacePart {
  ifname: string;
  interfaces: ResultInterface[];
  /** `interface` indexes this part's own interfaces. */
  ips: PlannedIp[];
  routes: ResultRoute[];
  /** The network's DNS when the part was planned. */
  dns?: DnsConfig;
  /** The interface's device slot (InterfaceInput.slot). Absent: its position at Attach. */
  slot?: number;
  /** InterfacePlan.dropsChainDefaultRoutes: the chain's default routes are not in the answer. */
  dropsChainDefaultRoutes?: boolean;
}
