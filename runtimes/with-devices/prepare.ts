// prepare(): everything a device plan needs to know, read before anything changes — which PCI
// device the request names, that no other sandbox holds it (under a per-device lock core
// keeps until this attach ends), and its original state: driver, netdev name/MAC/MTU/up, the
// PF's settings for this VF (only when the request changes them), RDMA device and mode, IOMMU
// group. Refusals come here, before the journal, with the field that caused them.
import path from 'node:path';
import { KnitError } from '../../src/base/errors.js';
import { hasPfSettings, pfSettingKeys, type DeviceParameters } from '../../src/devices/params.js';
import { readRdmaNetnsMode, type PciNetDevice } from '../../src/devices/inventory.js';
import { groupBlockers } from '../../src/devices/vfio.js';
import { captureVfState, pfQueryOp } from '../../src/devices/netdev-state.js';
import { bdfOf, parseDeviceRef, resolveDevice, type DeviceRef } from '../../src/devices/reference.js';
import { Sysfs } from '../../src/devices/sysfs.js';
import { VFIO_DRIVER } from '../../src/devices/vfio.js';
import { findLinkIn } from '../../src/net/find-link.js';
import type { InterfaceInput, PrepareContext } from '../../src/base/strategy.js';
import type { PreparedDevice } from './prepared-device.js';
import { interfaceIndex } from '../common/binding-options.js';

const precondition = (field: string, message: string) => new KnitError('FAILED_PRECONDITION', `${field}: ${message}`, { field });

/** Where the caller named the device and set each parameter: the fields refusals name. An
 * attach request has both in one place (interfaces[i].device); a DRA claim names the device in
 * an allocation result and sets parameters in its opaque config entries (src/dra/claim.ts). */
export interface DeviceFields {
  /** The field that named the device: the node's facts about that device are said of it. */
  device: string;
  /** The field that set this parameter. */
  parameter(key: keyof DeviceParameters): string;
}

/** The fields of a device named in a request's `field` (interfaces[i].device). */
export const requestDeviceFields = (field: string): DeviceFields => ({ device: field, parameter: (key) => `${field}.parameters.${key}` });

/** The name the device gets inside the sandbox (netdev mode). */
export const podName = (input: InterfaceInput, ref: DeviceRef) => ref.parameters.interfaceName ?? input.iface.name;

export async function prepareDevice(input: InterfaceInput, ctx: PrepareContext): Promise<PreparedDevice> {
  const index = interfaceIndex(input);
  const field = `interfaces[${index}].device`;
  const ref = parseDeviceRef(input.iface.device, field);
  const p = ref.parameters;
  const sysfs = new Sysfs(ctx.sysfsRoot);

  // A netdev name leads to its PCI address through sysfs; a BDF or a DRA name is one already,
  // so the device is read once, under the lock.
  const spelled = bdfOf(ref);
  const bdf = spelled ?? (await resolveDevice(sysfs, ref, { field })).pciAddress;
  const claimer = ctx.lock(bdf);
  if (claimer === input.sandboxId) throw KnitError.invalid(field, `names PCI device ${bdf}, which another interface of this request names too`);
  if (claimer !== undefined) throw precondition(field, `PCI device ${bdf} is being attached to sandbox ${claimer} right now`);
  const holder = ctx.holderOf(bdf);
  if (holder) throw precondition(field, `PCI device ${bdf} is held by sandbox ${holder}; detach that sandbox first`);
  // Read (again) under the lock: the device may have changed hands while we waited.
  const dev = await resolveDevice(sysfs, spelled ? ref : { by: 'bdf', bdf, parameters: p }, { field });

  const prepared: PreparedDevice = {
    index, ref, pciAddress: bdf, draName: dev.name, kind: dev.kind, sysfsRoot: sysfs.root,
  };
  if (dev.driver) prepared.driver = dev.driver;
  if (dev.vf) prepared.vf = { pfPciAddress: dev.vf.pfPciAddress, index: dev.vf.index, ...(dev.vf.pfName ? { pfName: dev.vf.pfName } : {}) };
  if (dev.rdma) {
    const netnsMode = await readRdmaNetnsMode(sysfs);
    prepared.rdma = { device: dev.rdma.device, charDevices: dev.rdma.charDevices, ...(netnsMode ? { netnsMode } : {}) };
  }

  await captureNetdev(ctx, dev, prepared, field);
  if (p.mode === 'netdev') await checkNetdevMode(input, ctx, sysfs, dev, prepared, field);
  else await checkVfioMode(input, sysfs, dev, prepared, requestDeviceFields(field));
  if (hasPfSettings(p)) await capturePfSide(ctx, dev, prepared, requestDeviceFields(field));
  return prepared;
}

/** The netdev's original name, MAC, MTU and up state; refuses one the host itself uses. */
export async function captureNetdev(ctx: Pick<PrepareContext, 'runOps'>, dev: PciNetDevice, prepared: PreparedDevice, field: string) {
  const sysfsNetdev = dev.netdevs[0];
  if (!sysfsNetdev) return;
  // Both reads at once (one hop, not two); the addresses count only once the link is this device.
  const found = findLinkIn(ctx.runOps, undefined, sysfsNetdev.name);
  const listed = ctx.runOps(undefined, [{ op: 'addr.list', link: sysfsNetdev.name }]).then(([r]) => r.addrs ?? [], (err: Error) => err);
  const link = await found;
  const addrs = await listed;
  if (!link) throw precondition(field, `sysfs lists netdev ${sysfsNetdev.name} for ${dev.pciAddress}, but the host netns has no such link`);
  if (sysfsNetdev.ifindex !== undefined && sysfsNetdev.ifindex !== link.index) {
    throw precondition(field, `${link.name} in the host netns is ifindex ${link.index}, but the netdev ${link.name} of ${dev.pciAddress} is ifindex ${sysfsNetdev.ifindex}: not the same device`);
  }
  if (link.master !== undefined) {
    throw precondition(field, `${link.name} (${dev.pciAddress}) is enslaved to another device (ifindex ${link.master}) in the host; knit does not take devices the host uses`);
  }
  if (addrs instanceof Error) throw addrs;
  const global = addrs.find((a) => a.scope === 'global');
  if (global) {
    throw precondition(field, `${link.name} (${dev.pciAddress}) has address ${global.address}/${global.prefixLen} in the host; knit does not take devices the host uses`);
  }
  prepared.netdev = { name: link.name, mtu: link.mtu, up: link.up, ...(link.mac ? { mac: link.mac } : {}) };
}

async function checkNetdevMode(input: InterfaceInput, ctx: PrepareContext, sysfs: Sysfs, dev: PciNetDevice, prepared: PreparedDevice, field: string) {
  if (!prepared.netdev) {
    throw precondition(
      field,
      `${dev.pciAddress} has no netdev in the host netns (${dev.driver ? `bound to ${dev.driver}` : 'no driver'}; or it is in another netns); ` +
        'netdev mode moves a netdev: use mode "vfio", or bind its network driver',
    );
  }
  const name = podName(input, prepared.ref);
  const nameField = prepared.ref.parameters.interfaceName !== undefined ? `${field}.parameters.interfaceName` : `interfaces[${prepared.index}].name`;
  const other = input.request.interfaces.findIndex((x, j) => j !== prepared.index && x.name === name);
  if (other >= 0) throw KnitError.invalid(nameField, `"${name}" is also the name of interfaces[${other}]`);
  // Checked here so that no inverse ever acts on a sandbox interface knit did not put there.
  if (await findLinkIn(ctx.runOps, input.netnsPath, name)) {
    throw new KnitError('ALREADY_EXISTS', `${nameField}: netns ${input.netnsPath} already has an interface named ${name}`, { field: nameField });
  }
  const mtu = prepared.ref.parameters.mtu ?? input.iface.mtu;
  if (mtu !== undefined && dev.vf?.pfName) {
    const pfMtu = await sysfs.readInt(`bus/pci/devices/${dev.vf.pfPciAddress}/net/${dev.vf.pfName}/mtu`);
    if (pfMtu !== undefined && mtu > pfMtu) {
      const mtuField = prepared.ref.parameters.mtu !== undefined ? `${field}.parameters.mtu` : `interfaces[${prepared.index}].mtu`;
      throw KnitError.invalid(mtuField, `${mtu} is above the MTU of its PF ${dev.vf.pfName} (${pfMtu})`);
    }
  }
}

async function checkVfioMode(input: InterfaceInput, sysfs: Sysfs, dev: PciNetDevice, prepared: PreparedDevice, fields: DeviceFields) {
  if (input.iface.mac !== undefined) {
    throw KnitError.invalid(`interfaces[${prepared.index}].mac`, 'a VM owns a vfio device, so knit cannot set its MAC there: set it on the PF with device.parameters.mac');
  }
  await checkVfioViable(sysfs, dev, prepared, fields);
}

/** The device can go to vfio-pci: it has an IOMMU group, the group is viable, the driver is
 * loaded. The first two are facts about the device the caller named; the last is the node's,
 * named by where it was looked for. */
export async function checkVfioViable(sysfs: Sysfs, dev: PciNetDevice, prepared: PreparedDevice, fields: DeviceFields) {
  const field = fields.device;
  if (dev.iommuGroup === undefined) {
    // Without an IOMMU the group appears only when vfio-pci binds (noiommu mode), too late
    // for the plan's answer to name /dev/vfio/<group>.
    throw precondition(field, `${dev.pciAddress} has no IOMMU group: enable the IOMMU (intel_iommu=on or amd_iommu=on); knit does not use VFIO's no-IOMMU mode`);
  }
  const blockers = await groupBlockers(sysfs, dev.iommuGroup, dev.pciAddress);
  if (blockers.length) {
    const list = blockers.map((b) => `${b.device} (bound to ${b.driver})`).join(', ');
    throw precondition(field, `IOMMU group ${dev.iommuGroup} of ${dev.pciAddress} is not viable for VFIO: ${list} share it under a host driver`);
  }
  if (dev.driver !== VFIO_DRIVER && !(await sysfs.exists(`bus/pci/drivers/${VFIO_DRIVER}`))) {
    const where = path.join(sysfs.root, 'bus/pci/drivers', VFIO_DRIVER);
    throw new KnitError('FAILED_PRECONDITION', `the vfio-pci driver is not loaded on this node (no ${where}); ${fields.parameter('mode')} "vfio" binds ${dev.pciAddress} to it: modprobe vfio-pci`);
  }
  prepared.iommuGroup = dev.iommuGroup;
}

/** The PF's current settings for this VF: what the inverse of the PF-side step writes back. */
export async function capturePfSide(ctx: Pick<PrepareContext, 'runOps'>, dev: PciNetDevice, prepared: PreparedDevice, fields: DeviceFields) {
  if (!dev.vf) {
    const key = pfSettingKeys(prepared.ref.parameters)[0]!;
    throw precondition(fields.parameter(key), `PF-side settings (mac, vlan, qos, spoofchk, trust, rates, linkState) need an SR-IOV VF; ${dev.pciAddress} is ${dev.kind === 'pf' ? 'a PF' : 'a NIC without SR-IOV'}`);
  }
  const vf = dev as PciNetDevice & { vf: NonNullable<PciNetDevice['vf']> };
  let query;
  try {
    query = pfQueryOp(vf);
  } catch (err) {
    throw precondition(fields.device, (err as Error).message);
  }
  const [{ link: pfLink }] = await ctx.runOps(undefined, [query]);
  const state = captureVfState(vf, pfLink!);
  prepared.vf = { ...prepared.vf!, pfName: state.pfName, pfSide: state.pfSide };
}
