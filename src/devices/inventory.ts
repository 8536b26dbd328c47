// What SR-IOV / RDMA hardware this node has, read from sysfs (Linux
// Documentation/ABI/testing/sysfs-bus-pci and Documentation/PCI/pci-iov-howto.rst):
// every PCI network function (class 0x02: Ethernet, InfiniBand, ...) with its driver, NUMA
// node, IOMMU group, netdev, RDMA device and SR-IOV role — a PF (sriov_totalvfs > 0) with its
// virtfnN links, a VF (physfn link) with its PF and index, or a plain NIC.
//
// Netdev names come from <dev>/net/, which sysfs filters by the reader's netns: a VF moved
// into a pod shows no netdev here, and one bound to vfio-pci has none at all.
import path from 'node:path';
import { draDeviceName, normalizeBdf } from './pci-address.js';
import type { Sysfs } from './sysfs.js';

export type RdmaNetnsMode = 'shared' | 'exclusive';

export interface NetdevInfo {
  name: string;
  mac?: string;
  mtu?: number;
  operstate?: string;
  ifindex?: number;
}

export interface RdmaInfo {
  /** Kernel RDMA device name, e.g. "mlx5_2". */
  device: string;
  /** Char devices a container needs: /dev/infiniband/uverbsN and rdma_cm. */
  charDevices: string[];
}

export interface PciFunction {
  pciAddress: string;
  /** 6 hex digits, e.g. "020000" (Ethernet), "020700" (InfiniBand), "060400" (PCI bridge). */
  classCode?: string;
  vendorId?: string;
  deviceId?: string;
  subsystemVendorId?: string;
  subsystemDeviceId?: string;
  /** Bound driver (basename of the driver link); undefined when unbound. */
  driver?: string;
  /** Content of driver_override; undefined when cleared ("(null)"). */
  driverOverride?: string;
  /** undefined when the platform reports -1 (no NUMA affinity). */
  numaNode?: number;
  iommuGroup?: number;
  /** The PCIe root complex, "pci<domain>:<bus>" (resource.kubernetes.io/pcieRoot). */
  pcieRoot?: string;
}

export interface PciNetDevice extends PciFunction {
  /** DRA device name (a DNS label derived from the BDF). */
  name: string;
  kind: 'pf' | 'vf' | 'nic';
  /** Netdevs of this function visible in the reader's netns (usually zero or one). */
  netdevs: NetdevInfo[];
  rdma?: RdmaInfo;
  /** PFs: VF capacity and the VFs enabled now, by index. */
  sriov?: { totalVfs: number; numVfs: number; vfs: string[] };
  /** VFs: the parent PF and this VF's index on it (what `ip link set <pf> vf <index>` takes). */
  vf?: { pfPciAddress: string; pfName?: string; index: number };
}

export interface Inventory {
  devices: PciNetDevice[];
  /** undefined when ib_core is not loaded (no RDMA subsystem). */
  rdmaNetnsMode?: RdmaNetnsMode;
}

export interface InventoryOptions {
  /**
   * Where the RDMA netns mode comes from. Default: /sys/module/ib_core/parameters/netns_mode
   * under the same sysfs root. That parameter is the very variable `rdma system set netns`
   * changes (ib_devices_shared_netns in drivers/infiniband/core/device.c), so it is live;
   * pass the netlink answer (RDMA_NLDEV_CMD_SYS_GET) here to use that instead.
   */
  rdmaNetnsMode?: () => Promise<RdmaNetnsMode | undefined>;
}

const devDir = (bdf: string) => `bus/pci/devices/${bdf}`;

export function primaryNetdev(dev: PciNetDevice): NetdevInfo | undefined {
  return dev.netdevs[0];
}

export function isNetworkClass(classCode: string | undefined): boolean {
  return classCode?.startsWith('02') ?? false;
}

/** Every PCI network function on the node, sorted by PCI address. */
export async function scanInventory(sysfs: Sysfs, opts: InventoryOptions = {}): Promise<Inventory> {
  const addresses = (await sysfs.list('bus/pci/devices')).filter((a) => normalizeBdf(a) === a);
  const classes = await mapBounded(addresses, SCAN_WIDTH * 4, (a) => readClass(sysfs, a));
  const network = addresses.filter((_, i) => isNetworkClass(classes[i]));
  const devices = (await mapBounded(network, SCAN_WIDTH, (a) => describeDevice(sysfs, a))).filter(
    (d): d is PciNetDevice => d !== undefined,
  );
  const rdmaNetnsMode = await (opts.rdmaNetnsMode ?? (() => readRdmaNetnsMode(sysfs)))();
  return rdmaNetnsMode ? { devices, rdmaNetnsMode } : { devices };
}

/** Functions described at a time by a scan. Each is a wave of some fifteen reads, so a few keep
 * libuv's four threads busy; the DRA driver rescans every 30 s, and all of a node's functions at
 * once (70 in the bench) kept a thousand reads' promises, requests and buffers alive through
 * several scavenges, which V8 then promoted: +2 MiB of old space per scan, until a full GC
 * (bench/README.md, "The DRA driver: memory and restart"). */
const SCAN_WIDTH = 4;

/** fn over items, at most `width` at a time; the answers in the items' order. */
async function mapBounded<T, R>(items: T[], width: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const lane = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, lane));
  return out;
}

/** ib_core's netns_mode: Y = shared (the default), N = exclusive. */
export async function readRdmaNetnsMode(sysfs: Sysfs): Promise<RdmaNetnsMode | undefined> {
  const value = (await sysfs.read('module/ib_core/parameters/netns_mode'))?.trim();
  if (value === undefined) return undefined;
  if (value === 'Y' || value === '1') return 'shared';
  if (value === 'N' || value === '0') return 'exclusive';
  throw new Error(`${sysfs.path('module/ib_core/parameters/netns_mode')}: unexpected value ${JSON.stringify(value)}`);
}

async function readClass(sysfs: Sysfs, bdf: string): Promise<string | undefined> {
  return hexId(await sysfs.read(`${devDir(bdf)}/class`), 6);
}

/** "0x15b3\n" -> "15b3" (zero-padded to width). */
function hexId(text: string | undefined, width: number): string | undefined {
  const m = /^0x([0-9a-f]+)$/i.exec(text?.trim() ?? '');
  return m ? m[1]!.toLowerCase().padStart(width, '0') : undefined;
}

/** The facts about any PCI function that VFIO and the inventory need; undefined if absent. */
export interface DescribeOptions {
  /** Also what only the inventory publishes: vendor, device and subsystem IDs, NUMA node, PCIe
   * root, driver_override (default true). An attach or a Prepare reads the device without them. */
  inventory?: boolean;
}

export async function describePciFunction(sysfs: Sysfs, bdf: string, opts: DescribeOptions = {}): Promise<PciFunction | undefined> {
  const dir = devDir(bdf);
  const inventory = opts.inventory ?? true;
  const forInventory = <T>(read: () => Promise<T>) => (inventory ? read() : Promise.resolve(undefined));
  // All at once: a device that does not exist answers undefined to every read.
  const [real, classText, vendorId, deviceId, subsystemVendorId, subsystemDeviceId, driver, override, numa, group] =
    await Promise.all([
      forInventory(() => sysfs.realpath(dir)),
      sysfs.read(`${dir}/class`),
      forInventory(() => sysfs.read(`${dir}/vendor`).then((v) => hexId(v, 4))),
      forInventory(() => sysfs.read(`${dir}/device`).then((v) => hexId(v, 4))),
      forInventory(() => sysfs.read(`${dir}/subsystem_vendor`).then((v) => hexId(v, 4))),
      forInventory(() => sysfs.read(`${dir}/subsystem_device`).then((v) => hexId(v, 4))),
      sysfs.linkName(`${dir}/driver`),
      forInventory(() => sysfs.read(`${dir}/driver_override`)),
      forInventory(() => sysfs.readInt(`${dir}/numa_node`)),
      sysfs.linkName(`${dir}/iommu_group`),
    ]);
  // Every PCI function has a class.
  if (inventory ? real === undefined : classText === undefined) return undefined;
  const classCode = hexId(classText, 6);
  const fn: PciFunction = { pciAddress: bdf };
  if (classCode) fn.classCode = classCode;
  if (vendorId) fn.vendorId = vendorId;
  if (deviceId) fn.deviceId = deviceId;
  if (subsystemVendorId) fn.subsystemVendorId = subsystemVendorId;
  if (subsystemDeviceId) fn.subsystemDeviceId = subsystemDeviceId;
  if (driver) fn.driver = driver;
  const ov = override?.trim();
  if (ov && ov !== '(null)') fn.driverOverride = ov;
  if (numa !== undefined && numa >= 0) fn.numaNode = numa;
  if (group !== undefined && /^\d+$/.test(group)) fn.iommuGroup = Number(group);
  const root = real?.split(path.sep)[1];
  if (root && /^pci[0-9a-f]{4}:[0-9a-f]{2}$/.test(root)) fn.pcieRoot = root;
  return fn;
}

/** One PCI network function by BDF (no scan); undefined if there is no such PCI device. */
export async function describeDevice(sysfs: Sysfs, bdf: string, opts: DescribeOptions = {}): Promise<PciNetDevice | undefined> {
  const dir = devDir(bdf);
  // One wave of reads, not one after another: the attach waits for them.
  const [fn, netdevs, rdma, totalVfs, physfn] = await Promise.all([
    describePciFunction(sysfs, bdf, opts),
    readNetdevs(sysfs, dir),
    readRdma(sysfs, dir),
    sysfs.readInt(`${dir}/sriov_totalvfs`),
    sysfs.linkName(`${dir}/physfn`),
  ]);
  if (!fn) return undefined;
  const dev: PciNetDevice = { ...fn, name: draDeviceName(bdf), kind: 'nic', netdevs };
  if (rdma) dev.rdma = rdma;
  if (physfn) {
    dev.kind = 'vf';
    dev.vf = await readVfLink(sysfs, bdf, physfn);
  } else if (totalVfs !== undefined && totalVfs > 0) {
    dev.kind = 'pf';
    dev.sriov = { totalVfs, numVfs: (await sysfs.readInt(`${dir}/sriov_numvfs`)) ?? 0, vfs: await readVfs(sysfs, dir) };
  }
  return dev;
}

async function readNetdevs(sysfs: Sysfs, dir: string): Promise<NetdevInfo[]> {
  const names = await sysfs.list(`${dir}/net`);
  return Promise.all(
    names.map(async (name) => {
      const base = `${dir}/net/${name}`;
      const [mac, mtu, operstate, ifindex] = await Promise.all([
        sysfs.read(`${base}/address`),
        sysfs.readInt(`${base}/mtu`),
        sysfs.read(`${base}/operstate`),
        sysfs.readInt(`${base}/ifindex`),
      ]);
      const info: NetdevInfo = { name };
      if (mac) info.mac = mac.trim().toLowerCase();
      if (mtu !== undefined) info.mtu = mtu;
      if (operstate) info.operstate = operstate.trim();
      if (ifindex !== undefined) info.ifindex = ifindex;
      return info;
    }),
  );
}

async function readRdma(sysfs: Sysfs, dir: string): Promise<RdmaInfo | undefined> {
  const [ib, verbs] = await Promise.all([sysfs.list(`${dir}/infiniband`), sysfs.list(`${dir}/infiniband_verbs`)]);
  if (!ib.length) return undefined;
  return {
    device: ib[0]!,
    charDevices: [...verbs.filter((v) => /^uverbs\d+$/.test(v)).map((v) => `/dev/infiniband/${v}`), '/dev/infiniband/rdma_cm'],
  };
}

/** virtfnN links of a PF, as BDFs indexed by N. */
async function readVfs(sysfs: Sysfs, pfDir: string): Promise<string[]> {
  const links = (await sysfs.list(pfDir)).filter((e) => /^virtfn\d+$/.test(e));
  const vfs: string[] = [];
  await Promise.all(
    links.map(async (link) => {
      const target = await sysfs.linkName(`${pfDir}/${link}`);
      if (target) vfs[Number(link.slice('virtfn'.length))] = target;
    }),
  );
  return vfs;
}

/** Bus, device and function as one 16-bit number (the PCIe routing ID); NaN if not a BDF. */
function routingId(bdf: string): number {
  const m = /^[0-9a-f]{4}:([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$/.exec(bdf);
  return m ? (parseInt(m[1]!, 16) << 8) | (parseInt(m[2]!, 16) << 3) | Number(m[3]) : NaN;
}

/** A VF's index on its PF. VF n's routing ID is the PF's plus First VF Offset plus n times VF
 * Stride (the PF's SR-IOV capability, in sysfs as sriov_offset and sriov_stride; the kernel's
 * pci_iov_virtfn_devfn), so one link confirms it, where a search reads every virtfnN link (a
 * PF may have 128); without those files, or if the link disagrees, the search. -1: not its VF. */
async function vfIndexOn(sysfs: Sysfs, bdf: string, pfBdf: string): Promise<number> {
  const pfDir = devDir(pfBdf);
  const [offset, stride] = await Promise.all([sysfs.readInt(`${pfDir}/sriov_offset`), sysfs.readInt(`${pfDir}/sriov_stride`)]);
  if (offset !== undefined && stride && bdf.slice(0, 4) === pfBdf.slice(0, 4)) {
    const n = (routingId(bdf) - routingId(pfBdf) - offset) / stride;
    if (Number.isInteger(n) && n >= 0 && (await sysfs.linkName(`${pfDir}/virtfn${n}`)) === bdf) return n;
  }
  return (await readVfs(sysfs, pfDir)).indexOf(bdf);
}

async function readVfLink(sysfs: Sysfs, bdf: string, pfBdf: string): Promise<NonNullable<PciNetDevice['vf']>> {
  const pfDir = devDir(pfBdf);
  const [index, pfNet] = await Promise.all([vfIndexOn(sysfs, bdf, pfBdf), sysfs.list(`${pfDir}/net`)]);
  if (index < 0) throw new Error(`${sysfs.path(devDir(bdf))}: VF is not listed by any virtfnN link of its PF ${pfBdf}`);
  const vf: NonNullable<PciNetDevice['vf']> = { pfPciAddress: pfBdf, index };
  if (pfNet[0]) vf.pfName = pfNet[0];
  return vf;
}
