// The state of a VF that knit must put back when the sandbox goes away, and the ops that put
// it back. Two halves, as in sriov-cni's OrigVfState
// (k8snetworkplumbingwg/sriov-cni pkg/sriov):
//   - PF side: the PF's IFLA_VFINFO_LIST entry for this VF (admin MAC, VLAN/QoS/proto,
//     spoofchk, trust, rates, link state), read with `link.get {link: pf, vfs: true}`;
//   - VF netdev: its host name, MAC and MTU (`link.get` on the VF netdev), absent when the VF
//     has no netdev (bound to vfio-pci or a DPDK driver).
// Only the PF fields a request changed are restored (sriov-cni does the same: resetting a field
// nobody set can fail on drivers that do not support it). Reset the PF side before the netdev:
// some drivers refuse netdev changes on an untrusted VF.
import { KnitError } from '../base/errors.js';
import type { LinkGetOp, LinkInfo, LinkSetOp, VfInfo, VfSetOp } from '../base/ops.js';
import type { PciNetDevice, RdmaNetnsMode } from './inventory.js';
import type { DeviceParameters } from './params.js';

export interface VfOriginalState {
  pciAddress: string;
  pfPciAddress: string;
  /** PF netdev name: the handle for every PF-side VF op. */
  pfName: string;
  vfIndex: number;
  /** The PF's view of this VF before knit changed anything. */
  pfSide: VfInfo;
  /** The VF netdev in the host netns; undefined when it has none. */
  netdev?: { name: string; mac?: string; mtu?: number };
  driver?: string;
  rdma?: { device: string; netnsMode?: RdmaNetnsMode };
}

type Vf = PciNetDevice & { vf: NonNullable<PciNetDevice['vf']> };

function pfNameOf(dev: Vf): string {
  if (!dev.vf.pfName) {
    throw new KnitError('FAILED_PRECONDITION', `${dev.pciAddress}: its PF ${dev.vf.pfPciAddress} has no netdev in the host netns, so its VF settings cannot be read or set`);
  }
  return dev.vf.pfName;
}

/** The read that captureVfState needs: the PF with its VF list. */
export function pfQueryOp(dev: Vf): LinkGetOp {
  return { op: 'link.get', link: pfNameOf(dev), vfs: true };
}

/**
 * Combine the inventory entry, the PF's link.get {vfs:true} answer and (if the VF has a
 * netdev) the VF netdev's link.get answer into the record to persist before any change.
 */
export function captureVfState(dev: Vf, pfLink: LinkInfo, vfLink?: LinkInfo, rdmaNetnsMode?: RdmaNetnsMode): VfOriginalState {
  const pfSide = pfLink.vfs?.find((v) => v.vf === dev.vf.index);
  if (!pfSide) {
    const have = pfLink.vfs?.length ? `it reports VFs ${pfLink.vfs.map((v) => v.vf).join(', ')}` : 'it reports no VFs';
    throw new KnitError('NOT_FOUND', `${dev.pciAddress}: PF ${pfLink.name} has no VF ${dev.vf.index} in IFLA_VFINFO_LIST (${have})`);
  }
  const state: VfOriginalState = {
    pciAddress: dev.pciAddress,
    pfPciAddress: dev.vf.pfPciAddress,
    pfName: pfNameOf(dev),
    vfIndex: dev.vf.index,
    pfSide: { ...pfSide },
  };
  const sysfsNetdev = dev.netdevs[0];
  if (vfLink) {
    state.netdev = { name: vfLink.name, mtu: vfLink.mtu, ...(vfLink.mac ? { mac: vfLink.mac } : {}) };
  } else if (sysfsNetdev) {
    state.netdev = { name: sysfsNetdev.name };
    if (sysfsNetdev.mac) state.netdev.mac = sysfsNetdev.mac;
    if (sysfsNetdev.mtu !== undefined) state.netdev.mtu = sysfsNetdev.mtu;
  }
  if (dev.driver) state.driver = dev.driver;
  if (dev.rdma) state.rdma = rdmaNetnsMode ? { device: dev.rdma.device, netnsMode: rdmaNetnsMode } : { device: dev.rdma.device };
  return state;
}

/** PF-side settings the parameters ask for; undefined when they ask for none. */
export function pfApplyOp(state: VfOriginalState, p: DeviceParameters): VfSetOp | undefined {
  const op: VfSetOp = { op: 'vf.set', link: state.pfName, vf: state.vfIndex };
  if (p.vlan !== undefined || p.qos !== undefined || p.vlanProto !== undefined) {
    op.vlan = p.vlan ?? 0;
    op.qos = p.qos ?? 0;
    op.vlanProto = p.vlanProto ?? '802.1Q';
  }
  if (p.mac !== undefined) op.mac = p.mac;
  if (p.minTxRate !== undefined || p.maxTxRate !== undefined) {
    // IFLA_VF_RATE carries both; keep the one not asked for at its current value.
    op.minTxRate = p.minTxRate ?? state.pfSide.minTxRate ?? 0;
    op.maxTxRate = p.maxTxRate ?? state.pfSide.maxTxRate ?? 0;
  }
  if (p.spoofchk !== undefined) op.spoofchk = p.spoofchk;
  if (p.trust !== undefined) op.trust = p.trust;
  if (p.linkState !== undefined) op.linkState = p.linkState;
  return Object.keys(op).length > 3 ? op : undefined;
}

/**
 * The inverse of pfApplyOp: the original values of exactly the fields it changed. An original
 * admin MAC of 00:00:00:00:00:00 means "none set"; writing it back clears the admin MAC.
 */
export function pfRestoreOp(state: VfOriginalState, p: DeviceParameters): VfSetOp | undefined {
  const applied = pfApplyOp(state, p);
  if (!applied) return undefined;
  const o = state.pfSide;
  const op: VfSetOp = { op: 'vf.set', link: state.pfName, vf: state.vfIndex };
  if (applied.vlan !== undefined) {
    op.vlan = o.vlan;
    op.qos = o.qos;
    op.vlanProto = o.vlanProto ?? '802.1Q';
  }
  if (applied.mac !== undefined) op.mac = o.mac;
  if (applied.minTxRate !== undefined) {
    op.minTxRate = o.minTxRate ?? 0;
    op.maxTxRate = o.maxTxRate ?? 0;
  }
  if (applied.spoofchk !== undefined && o.spoofchk !== undefined) op.spoofchk = o.spoofchk;
  if (applied.trust !== undefined && o.trust !== undefined) op.trust = o.trust;
  if (applied.linkState !== undefined && o.linkState !== undefined) op.linkState = o.linkState;
  return op;
}

/**
 * Ops that give the VF netdev back its host name, MAC and MTU: first down (a rename needs the
 * link down, and the kernel applies IFLA_IFNAME before flags in one request), then rename +
 * MAC + MTU, moving it to `hostNetns` in the same request when given (run on a handle in the
 * netns the VF is in now, as dranet does). `current` is its name there (pod name, or devN
 * after the kernel returned it from a dead netns).
 */
export function netdevRestoreOps(state: VfOriginalState, current: string, hostNetns?: string): LinkSetOp[] {
  if (!state.netdev) return [];
  const restore: LinkSetOp = { op: 'link.set', link: current, name: state.netdev.name };
  if (state.netdev.mac) restore.mac = state.netdev.mac;
  if (state.netdev.mtu !== undefined) restore.mtu = state.netdev.mtu;
  if (hostNetns) restore.netns = hostNetns;
  return [{ op: 'link.set', link: current, up: false }, restore];
}
