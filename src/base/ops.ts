// The vocabulary of kernel changes knit makes. An Op is plain data: strategies build plans out
// of ops, the journal stores them as JSON before they run, recovery replays their inverses,
// and the native addon executes them in batches on a netlink handle bound to one netns.
//
// Netns references are paths (a pinned netns file or /proc/<pid>/ns/net); the addon opens
// them itself. A link is referenced by name or ifindex *in the handle's netns*.

export type LinkRef = string | number;

/** Names a delete may find already gone; with ignoreMissing the op reports {skipped:true}. */
export interface Tolerant {
  /** Treat "no such device/address/route/qdisc" as success (undo and GC paths). */
  ignoreMissing?: boolean;
}

interface LinkCommon {
  name: string;
  mtu?: number;
  mac?: string;
  /** IFLA_IFALIAS: knit tags everything it creates with "knit:<...>" so GC finds it. */
  alias?: string;
  /** 'none': the kernel generates no IPv6 address for the link (`ip link … addrgenmode none`):
   * no link-local address, no fe80::/64 route. Sent with the alias (needs one). */
  addrGenMode?: 'none';
  group?: number;
  /** Enslave to this bridge (in the same request). */
  master?: LinkRef;
  up?: boolean;
  txqlen?: number;
  /** When `name` is held by a device this knit parked for the reaper (in `group`, down, its
   * alias starting with `tagPrefix`: a host end Detach retired under its own name), that device
   * is renamed aside and the create sent again. Anything else holding the name is EEXIST. */
  reclaimParked?: { group: number; tagPrefix: string };
}

export interface VethPeer {
  name: string;
  mac?: string;
  mtu?: number;
  alias?: string;
  /** Create the peer straight inside this netns (IFLA_NET_NS_FD in the same request). */
  netns?: string;
  /** When the kernel answers EEXIST, the create is sent once more with the peer under this
   * name (a pod end a detached sandbox left under `name` until the reaper deletes it). */
  nameIfTaken?: string;
}

export type LinkAddOp =
  | (LinkCommon & { op: 'link.add'; kind: 'veth'; peer: VethPeer })
  | (LinkCommon & {
      op: 'link.add';
      kind: 'bridge';
      stpOff?: boolean;
      /** IFLA_BR_NF_CALL_IPTABLES and _IP6TABLES: this bridge's bridged IPv4/IPv6 pass the inet
       * netfilter hooks (br_netfilter), whatever the netns's bridge-nf-call sysctls say. */
      netfilter?: boolean;
    })
  /** An intermediate functional block: traffic redirected to it can be shaped as it leaves. */
  | (LinkCommon & { op: 'link.add'; kind: 'ifb' })
  | (LinkCommon & {
      op: 'link.add';
      kind: 'macvlan' | 'macvtap';
      parent: LinkRef;
      mode?: 'private' | 'vepa' | 'bridge' | 'passthru' | 'source';
      /** The ifindex to create it with (the kernel's pick when absent; EBUSY when the netns has
       * it). A macvtap's /dev/tap<ifindex> is named after it, host-wide. */
      index?: number;
    })
  | (LinkCommon & {
      op: 'link.add';
      kind: 'vxlan';
      vni: number;
      port?: number;
      local?: string;
      remote?: string;
      group?: number;
      dev?: LinkRef;
      learning?: boolean;
    });

export interface LinkSetOp extends Tolerant {
  op: 'link.set';
  link: LinkRef;
  up?: boolean;
  mtu?: number;
  mac?: string;
  /** Rename (the link must be down). */
  name?: string;
  /** Enslave; null = nomaster. */
  master?: LinkRef | null;
  /** Move into this netns (path). Combine with name to rename and move in one request. */
  netns?: string;
  /** '' clears the alias. */
  alias?: string;
  group?: number;
  txqlen?: number;
  /** Bridge port: hairpin (reflective relay), for pods reaching their own service IP. */
  hairpin?: boolean;
  /** Bridge port: learn source MACs from what arrives on it (`bridge link set … learning`). */
  learning?: boolean;
  /** A bridge: its bridged IPv4/IPv6 pass the inet hooks, as `netfilter` at link.add. */
  bridgeNetfilter?: boolean;
}

export interface LinkDelOp extends Tolerant { op: 'link.del'; link: LinkRef }
/** Deletes every link in a group with one RTM_DELLINK: one RCU wait for all of them. */
export interface LinkDelGroupOp extends Tolerant { op: 'link.delGroup'; group: number }
export interface LinkGetOp { op: 'link.get'; link: LinkRef; /** include IFLA_VFINFO_LIST */ vfs?: boolean }
export interface LinkListOp { op: 'link.list'; kind?: string }
/** Moves aside the devices a detached sandbox left in this netns for the reaper: every link
 * whose alias starts with tagPrefix, except those whose alias starts with sparePrefix (the
 * attaching sandbox's live interfaces) unless it is exactly `claim` (its own earlier interface
 * of the name it is taking again). Each goes down, is renamed kxe<ifindex> and joins `group`.
 * {skipped: true} when there was none. Untagged devices are never touched. */
export interface LinkEvictOp { op: 'link.evict'; tagPrefix: string; sparePrefix: string; claim: string; group: number }

export interface AddrOp extends Tolerant {
  op: 'addr.add' | 'addr.del';
  link: LinkRef;
  /** CIDR, v4 or v6: "10.0.0.2/24", "fd00::2/64". */
  address: string;
  peer?: string;
  scope?: 'global' | 'link' | 'host';
  noDad?: boolean;
  noPrefixRoute?: boolean;
}
export interface AddrListOp { op: 'addr.list'; link?: LinkRef; family?: 4 | 6 }

export interface RouteOp extends Tolerant {
  op: 'route.add' | 'route.replace' | 'route.del';
  /** CIDR or "default" (then family says v4 or v6; default 4). */
  dst: string;
  family?: 4 | 6;
  gateway?: string;
  link?: LinkRef;
  table?: number;
  metric?: number;
  scope?: 'universe' | 'link' | 'host';
  onlink?: boolean;
  /** RTAX_MTU */
  mtu?: number;
  src?: string;
  /** The route's owner (rtm_protocol, 1-255). Default on add: 3 (boot). A delete that names it
   * removes only a route of that owner. knit's cluster and routed-pod routes carry
   * ROUTE_PROTOCOL (src/base/names.ts). */
  protocol?: number;
  /** blackhole / unreachable: no gateway, no link; what matches is dropped (or refused). */
  type?: 'unicast' | 'blackhole' | 'unreachable';
}
export interface RouteListOp { op: 'route.list'; family?: 4 | 6; table?: number }

export interface NeighAddOp extends Tolerant {
  /** neigh.replace creates the entry or overwrites it (NLM_F_REPLACE); neigh.add fails with
   * EEXIST when one is there. */
  op: 'neigh.add' | 'neigh.replace';
  link: LinkRef;
  address: string;
  /** Required for a permanent entry; absent for a proxy entry. */
  lladdr?: string;
  /** NTF_PROXY entry: answer NDP/ARP for this address on link (routed mode). */
  proxy?: boolean;
}
/** A delete names the entry by (link, address, proxy); the link-layer address plays no part. */
export interface NeighDelOp extends Tolerant { op: 'neigh.del'; link: LinkRef; address: string; proxy?: boolean }
export type NeighOp = NeighAddOp | NeighDelOp;
export interface NeighListOp { op: 'neigh.list'; link?: LinkRef; family?: 4 | 6 }

/** A static entry in a VXLAN device's own forwarding table (`bridge fdb replace MAC dev LINK
 * dst IP self permanent`): frames for `mac` go to the remote VTEP at `dst`. A delete names the
 * entry by (link, mac, dst). */
export interface FdbOp extends Tolerant { op: 'fdb.replace' | 'fdb.del'; link: LinkRef; mac: string; dst?: string }
export interface FdbListOp { op: 'fdb.list'; link?: LinkRef }

export interface QdiscOp extends Tolerant {
  op: 'qdisc.add' | 'qdisc.del';
  link: LinkRef;
  kind: 'ingress' | 'clsact';
}
/** sch_tbf as the device's root qdisc (handle 1:): what leaves the device is held to `rate`
 * bytes/s, with bursts of up to `burst` bytes, and at most `limit` bytes wait for tokens. */
export interface TbfQdiscAddOp { op: 'qdisc.add'; link: LinkRef; kind: 'tbf'; rate: number; burst: number; limit: number }
/** Removes the root tbf (only a tbf with handle 1:). */
export interface TbfQdiscDelOp extends Tolerant { op: 'qdisc.del'; link: LinkRef; kind: 'tbf' }
export interface QdiscListOp { op: 'qdisc.list'; link?: LinkRef }

/** u32 match-all filter with a mirred egress redirect: Kata's tcfilter pattern. */
export interface RedirectFilterAddOp {
  op: 'filter.add';
  link: LinkRef;
  /** ingress qdisc (ffff:) or clsact's ingress/egress hooks. */
  parent: 'ingress' | 'egress';
  redirectTo: LinkRef;
  prio?: number;
}
export interface FilterDelOp extends Tolerant { op: 'filter.del'; link: LinkRef; parent: 'ingress' | 'egress'; prio?: number }
export interface FilterListOp { op: 'filter.list'; link: LinkRef; parent: 'ingress' | 'egress' }

/** PF-side settings of one SR-IOV VF (what `ip link set PF vf N ...` sends). */
export interface VfSetOp {
  op: 'vf.set';
  link: LinkRef;
  vf: number;
  mac?: string;
  vlan?: number;
  qos?: number;
  vlanProto?: '802.1Q' | '802.1ad';
  spoofchk?: boolean;
  trust?: boolean;
  minTxRate?: number;
  maxTxRate?: number;
  linkState?: 'auto' | 'enable' | 'disable';
}

/** Write /proc/sys/<key with dots as slashes> inside the handle's netns. */
export interface SysctlSetOp { op: 'sysctl.set'; key: string; value: string }
export interface SysctlGetOp { op: 'sysctl.get'; key: string }

/** A tun/tap made by opening /dev/net/tun inside the handle's netns. */
export interface TunAddOp {
  op: 'tun.add';
  name: string;
  mode: 'tap' | 'tun';
  /** >1 sets IFF_MULTI_QUEUE and opens that many queues. */
  queues?: number;
  owner?: number;
  group?: number;
  vnetHdr?: boolean;
  /** Keep the device after the fds close (default true). */
  persist?: boolean;
  /** Return the queue fds instead of closing them (the caller must close or pass them). */
  returnFds?: boolean;
}

/** New queue fds on an existing tun/tap, opened inside the handle's netns (VM hand-off by fd).
 * mode/vnetHdr/queues>1 must match how the device was made, or the kernel answers EINVAL. */
export interface TunOpenOp {
  op: 'tun.open';
  name: string;
  mode: 'tap' | 'tun';
  queues?: number;
  vnetHdr?: boolean;
}

export type Op =
  | LinkAddOp | LinkSetOp | LinkDelOp | LinkDelGroupOp | LinkGetOp | LinkListOp | LinkEvictOp
  | AddrOp | AddrListOp | RouteOp | RouteListOp | NeighOp | NeighListOp | FdbOp | FdbListOp
  | QdiscOp | TbfQdiscAddOp | TbfQdiscDelOp | QdiscListOp | RedirectFilterAddOp | FilterDelOp | FilterListOp
  | VfSetOp | SysctlSetOp | SysctlGetOp | TunAddOp | TunOpenOp;

export type OpName = Op['op'];

// ---- actions outside rtnetlink (run by src/daemon/action-runner.ts, not by the addon) -------------

/** nftables table applied from a ruleset (`nft -f`) inside a netns; undone by deleting it. */
export interface NftApplyAction { op: 'nft.apply'; family: 'inet' | 'ip' | 'ip6'; table: string; ruleset: string }
export interface NftDeleteAction { op: 'nft.delete'; family: 'inet' | 'ip' | 'ip6'; table: string; ignoreMissing?: boolean }
/** A file a launcher reads (Kata's DAN file). With `within` (the configured directory it must
 * stay inside, checked with symlinks resolved), it is created exclusively: whatever already
 * lies at `path` is refused, never overwritten. Older records carry neither field. */
/** `within`: the configured directory the file must resolve into; `withinKey`: the config key
 * that sets it, named when a write is refused (absent in records from before it: kata.danDir). */
export interface FileWriteAction { op: 'file.write'; path: string; content: string; mode?: number; within?: string; withinKey?: string }
/** With `sha256` (of the content knit wrote), the file is removed only while it still holds
 * that content: a file knit did not write is left where it is. */
export interface FileRemoveAction { op: 'file.remove'; path: string; ignoreMissing?: boolean; sha256?: string }

// Device actions (src/devices/actions.ts): sysfs writes, read-backs and the RDMA tool. sysfsRoot
// is recorded with the action so recovery writes where the attach wrote (default /sys).

/** Bind a PCI function to vfio-pci (driver_override + drivers_probe), refusing a non-viable
 * IOMMU group; fails if its driver is no longer originalDriver or its group not iommuGroup. */
export interface VfioBindAction { op: 'vfio.bind'; pciAddress: string; originalDriver?: string; iommuGroup: number; sysfsRoot?: string }
/** Unbind from vfio-pci, clear the override, rebind originalDriver (none: leave it unbound). */
export interface VfioRestoreAction { op: 'vfio.restore'; pciAddress: string; originalDriver?: string; sysfsRoot?: string }
/** Read the PF's VF list until VF `vf` reports admin MAC `mac` (some drivers apply it late). */
export interface VfCheckMacAction { op: 'vf.checkMac'; link: LinkRef; vf: number; mac: string }
/** The PCI device's netdev in the host netns is still `netdev` (what the plan was made from). */
export interface DeviceClaimAction { op: 'device.claim'; pciAddress: string; netdev: string; sysfsRoot?: string }
/** Find the PCI device's netdev in the host netns by its sysfs net/ dir, whatever its name now
 * (dev<ifindex> after its netns died), and give it back this name, MAC, MTU and up state. */
export interface DeviceReturnAction {
  op: 'device.return'; pciAddress: string; name: string; mac?: string; mtu?: number; up: boolean; sysfsRoot?: string;
}
/** Move RDMA device `device` from the step's netns to `to` (absent: the daemon's netns). */
export interface RdmaMoveAction { op: 'rdma.move'; device: string; to?: string }
/** RDMA device `device` is visible in the step's netns. */
export interface RdmaPresentAction { op: 'rdma.present'; device: string }

export type DeviceAction =
  | VfioBindAction | VfioRestoreAction | VfCheckMacAction | DeviceClaimAction | DeviceReturnAction | RdmaMoveAction | RdmaPresentAction;

export const DEVICE_ACTION_OPS: ReadonlySet<string> = new Set<DeviceAction['op']>([
  'vfio.bind', 'vfio.restore', 'vf.checkMac', 'device.claim', 'device.return', 'rdma.move', 'rdma.present',
]);

/** A CNI plugin chain's ADD or DEL (src/cni-exec): the conflist's exact text and the runtime's
 * values are recorded with the action, so DEL after a crash runs what ADD ran. */
export interface CniChainAction {
  op: 'cni.add' | 'cni.del';
  /** knit's network name, for logs and errors. */
  network: string;
  conflist: string;
  containerId: string;
  ifName: string;
  netns: string;
  /** The netns the chain was added in: a DEL never enters another one pinned at the same path. */
  netnsId?: { dev: number; ino: number };
  args: [string, string][];
  capabilityArgs: Record<string, unknown>;
  pluginDirs: string[];
  cacheDir: string;
  timeoutMs: number;
  ignoreMissing?: boolean;
}

/** Deletes conntrack entries of a host port (`conntrack -D`), so a flow the kernel tracked
 * before a mapping appeared, or one DNAT'd to a pod that is gone, does not outlive the rule.
 * Finding nothing is success. replySrc narrows it to flows answered by that pod address. */
export interface ConntrackFlushAction { op: 'conntrack.flush'; family: 4 | 6; protocol: 'tcp' | 'udp' | 'sctp'; port: number; replySrc?: string }
/** Gives `net.ipv4.conf.<device>.route_localnet` back its recorded value, unless a host-port
 * table of this knit still holds a chain named `guardChain` (another sandbox still needs it). */
export interface LocalnetRestoreAction { op: 'localnet.restore'; device: string; value: string; guardChain: string; ignoreMissing?: boolean }

export type HostAction =
  | NftApplyAction | NftDeleteAction | FileWriteAction | FileRemoveAction | DeviceAction | CniChainAction | ConntrackFlushAction | LocalnetRestoreAction;

// ---- what ops return -------------------------------------------------------------------

export interface LinkInfo {
  index: number;
  name: string;
  kind?: string;
  mtu: number;
  mac?: string;
  up: boolean;
  lowerUp: boolean;
  operstate: string;
  master?: number;
  alias?: string;
  group: number;
  txqlen?: number;
  /** IFLA_LINK: the peer / parent ifindex (in link-netnsid's netns when that is set). */
  parentIndex?: number;
  linkNetnsId?: number;
  numTxQueues?: number;
  vfs?: VfInfo[];
  /** A VXLAN device's settings; `dev` is the underlay's ifindex. */
  vxlan?: { vni: number; port: number; local?: string; dev?: number };
  /** A bridge's per-bridge br_netfilter switches (`ip -d link`: nf_call_iptables, nf_call_ip6tables). */
  bridge?: { nfCallIptables: boolean; nfCallIp6tables: boolean };
}

export interface VfInfo {
  vf: number;
  mac: string;
  vlan: number;
  qos: number;
  vlanProto?: '802.1Q' | '802.1ad';
  spoofchk?: boolean;
  trust?: boolean;
  minTxRate?: number;
  maxTxRate?: number;
  linkState?: 'auto' | 'enable' | 'disable';
}

export interface AddrInfo { index: number; family: 4 | 6; address: string; prefixLen: number; peer?: string; scope: string; flags: string[] }
/** protocol: the kernel's name for the well-known owners (kernel, boot, static, ...), else the number as text ("201"). */
export interface RouteInfo { family: 4 | 6; dst: string; gateway?: string; index?: number; table: number; metric?: number; scope: string; protocol: string; type: string; mtu?: number; onlink?: boolean; src?: string }
export interface NeighInfo { index: number; family: 4 | 6; address: string; lladdr?: string; state: string[]; proxy: boolean }
export interface FdbInfo { index: number; mac: string; dst?: string; state: string[]; self: boolean; master?: number }
export interface QdiscInfo {
  index: number; kind: string; handle: string; parent: string;
  /** tbf: its rate in bytes per second and its queue limit in bytes. */
  rate?: number; limit?: number;
}
export interface FilterInfo { index: number; kind: string; prio: number; protocol: number; redirectTo?: number }

/** What a change answers: the ifindex it acted on when known, and {skipped: true} when it had
 * ignoreMissing and found nothing to act on. */
export interface ChangeResult { index?: number; skipped?: boolean }

/** What each op answers (native/src/nl/to_js.cc builds these). */
export interface OpResults {
  'link.add': ChangeResult; 'link.set': ChangeResult; 'link.del': ChangeResult; 'link.delGroup': ChangeResult;
  'link.get': { link: LinkInfo };
  'link.list': { links: LinkInfo[] };
  'link.evict': ChangeResult;
  'addr.add': ChangeResult; 'addr.del': ChangeResult;
  'addr.list': { addrs: AddrInfo[] };
  'route.add': ChangeResult; 'route.replace': ChangeResult; 'route.del': ChangeResult;
  'route.list': { routes: RouteInfo[] };
  'neigh.add': ChangeResult; 'neigh.replace': ChangeResult; 'neigh.del': ChangeResult;
  'neigh.list': { neighs: NeighInfo[] };
  'fdb.replace': ChangeResult; 'fdb.del': ChangeResult;
  'fdb.list': { fdb: FdbInfo[] };
  'qdisc.add': ChangeResult; 'qdisc.del': ChangeResult;
  'qdisc.list': { qdiscs: QdiscInfo[] };
  'filter.add': ChangeResult; 'filter.del': ChangeResult;
  'filter.list': { filters: FilterInfo[] };
  'vf.set': ChangeResult;
  'sysctl.set': ChangeResult;
  'sysctl.get': { value: string };
  /** fds only with returnFds. */
  'tun.add': { index: number; fds?: number[] };
  'tun.open': { index: number; fds: number[] };
}

/** The answer to one op, by its name. */
export type ResultOf<O extends Op> = OpResults[O['op']];
/** The answers to a batch, position by position. */
export type ResultsOf<T extends readonly Op[]> = { -readonly [K in keyof T]: T[K] extends Op ? ResultOf<T[K]> : never };

/** Any action's result, for code that runs steps it does not look into (the executor, the
 * journal). Code that reads an op's answer types it with ResultOf / ResultsOf instead. */
export interface OpResult {
  skipped?: boolean;
  index?: number;
  link?: LinkInfo;
  links?: LinkInfo[];
  addrs?: AddrInfo[];
  routes?: RouteInfo[];
  neighs?: NeighInfo[];
  fdb?: FdbInfo[];
  qdiscs?: QdiscInfo[];
  filters?: FilterInfo[];
  value?: string;
  /** tun.add with returnFds. */
  fds?: number[];
  /** cni.add: the chain's final CNI result. */
  cniResult?: Record<string, unknown>;
}
