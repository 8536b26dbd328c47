// How a request names the device to attach, and how that name leads to the device in sysfs.
// Three forms (exactly one per request):
//   { bdf: "0000:3b:02.1" }                    the PCI address
//   { netdev: "ens1f0v1" }                     the VF's netdev name in the host netns
//   { pool, device (or name), parameters }     a DRA claim's allocation result
// Resolution reads only that device's sysfs directory (no inventory scan on the attach path);
// a DRA device name decodes back to its BDF (pci-address.ts).
import path from 'node:path';
import { KnitError } from '../base/errors.js';
import { describeDevice, isNetworkClass, type PciNetDevice } from './inventory.js';
import { parseDeviceParameters, type DeviceParameters } from './params.js';
import { bdfFromDraDeviceName, normalizeBdf } from './pci-address.js';
import type { Sysfs } from './sysfs.js';

export type DeviceRef =
  | { by: 'bdf'; bdf: string; parameters: DeviceParameters }
  | { by: 'netdev'; netdev: string; parameters: DeviceParameters }
  | { by: 'claim'; pool: string; device: string; driver?: string; parameters: DeviceParameters };

/** What the wire may carry: InterfaceRequest.device, or a claim result {pool, device, parameters}. */
export interface DeviceRefInput {
  bdf?: string;
  netdev?: string;
  pool?: string;
  device?: string;
  /** InterfaceRequest.device spells the DRA device name `name`. */
  name?: string;
  driver?: string;
  parameters?: unknown;
}

const notFound = (field: string, message: string) => new KnitError('NOT_FOUND', `${field}: ${message}`, { field });

/** Validate a reference: exactly one form, well-formed values, parameters checked. */
export function parseDeviceRef(input: DeviceRefInput | null | undefined, field = 'device'): DeviceRef {
  if (!input || typeof input !== 'object') throw KnitError.invalid(field, 'is required');
  const device = input.device ?? input.name;
  const forms = [input.bdf !== undefined, input.netdev !== undefined, input.pool !== undefined || device !== undefined];
  const given = forms.filter(Boolean).length;
  if (given !== 1) {
    throw KnitError.invalid(
      field,
      given === 0
        ? 'names no device: give bdf, netdev, or pool and device'
        : 'names the device more than one way: give only one of bdf, netdev, or pool and device',
    );
  }
  const parameters = parseDeviceParameters(input.parameters, `${field}.parameters`);
  if (input.bdf !== undefined) {
    const bdf = normalizeBdf(String(input.bdf));
    if (!bdf) throw KnitError.invalid(`${field}.bdf`, `${JSON.stringify(input.bdf)} is not a PCI address (DDDD:BB:DD.F)`);
    return { by: 'bdf', bdf, parameters };
  }
  if (input.netdev !== undefined) {
    const netdev = String(input.netdev);
    // The name becomes a sysfs path component: refuse anything that could climb out of class/net.
    if (!netdev || netdev.length > 15 || /[/\s\0:]/.test(netdev) || netdev === '.' || netdev === '..') {
      throw KnitError.invalid(`${field}.netdev`, `${JSON.stringify(netdev)} is not an interface name`);
    }
    return { by: 'netdev', netdev, parameters };
  }
  if (!input.pool) throw KnitError.invalid(`${field}.pool`, 'is required with a DRA device name');
  if (!device) throw KnitError.invalid(`${field}.device`, 'is required with a DRA pool');
  const ref: DeviceRef = { by: 'claim', pool: input.pool, device, parameters };
  if (input.driver) ref.driver = input.driver;
  return ref;
}

export interface ResolveOptions {
  /** This node's DRA pool name; claim references for another pool are NOT_FOUND here. */
  pool?: string;
  /** This node's DRA driver name; claim results of other drivers are NOT_FOUND here. */
  driver?: string;
  /** Field path for errors (default "device"). */
  field?: string;
}

/** The PCI address a reference spells out (a BDF, or a DRA name decoding to one), without a
 * read; undefined for a netdev name, which only sysfs can map, or a name knit did not make. */
export function bdfOf(ref: DeviceRef): string | undefined {
  if (ref.by === 'bdf') return ref.bdf;
  return ref.by === 'claim' ? bdfFromDraDeviceName(ref.device) : undefined;
}

/** The PCI network function a reference names, read fresh from sysfs: what an attach or a
 * Prepare needs of it, not what only the inventory publishes. */
export async function resolveDevice(sysfs: Sysfs, ref: DeviceRef, opts: ResolveOptions = {}): Promise<PciNetDevice> {
  const field = opts.field ?? 'device';
  let bdf: string;
  let what: string;
  switch (ref.by) {
    case 'bdf':
      bdf = ref.bdf;
      what = `PCI device ${bdf}`;
      break;
    case 'netdev': {
      if (!(await sysfs.exists(`class/net/${ref.netdev}`))) {
        throw notFound(`${field}.netdev`, `no interface ${JSON.stringify(ref.netdev)} in the host network namespace`);
      }
      const real = await sysfs.realpath(`class/net/${ref.netdev}/device`);
      const found = real && normalizeBdf(path.basename(real));
      if (!found) {
        throw notFound(`${field}.netdev`, `interface ${JSON.stringify(ref.netdev)} is not backed by a PCI function (a virtual interface?)`);
      }
      bdf = found;
      what = `PCI device ${bdf} (interface ${ref.netdev})`;
      break;
    }
    case 'claim': {
      if (opts.driver && ref.driver && ref.driver !== opts.driver) {
        throw notFound(`${field}.driver`, `${JSON.stringify(ref.driver)} is not this driver (${JSON.stringify(opts.driver)})`);
      }
      if (opts.pool !== undefined && ref.pool !== opts.pool) {
        throw notFound(`${field}.pool`, `${JSON.stringify(ref.pool)} is not this node's pool ${JSON.stringify(opts.pool)}`);
      }
      const decoded = bdfFromDraDeviceName(ref.device);
      if (!decoded) {
        throw notFound(`${field}.device`, `${JSON.stringify(ref.device)} is not a device name this node publishes (pci-DDDD-BB-DD-F)`);
      }
      bdf = decoded;
      what = `DRA device ${JSON.stringify(ref.device)} (PCI ${bdf}) in pool ${JSON.stringify(ref.pool)}`;
      break;
    }
  }
  const dev = await describeDevice(sysfs, bdf, { inventory: false });
  const at = ref.by === 'bdf' ? `${field}.bdf` : ref.by === 'netdev' ? `${field}.netdev` : `${field}.device`;
  if (!dev) throw notFound(at, `${what} does not exist on this node`);
  if (!isNetworkClass(dev.classCode)) {
    throw notFound(at, `${what} is not a network device (PCI class ${dev.classCode ?? 'unknown'})`);
  }
  return dev;
}

/** resolveDevice, and the device must be an SR-IOV VF. */
export async function resolveVf(sysfs: Sysfs, ref: DeviceRef, opts: ResolveOptions = {}): Promise<PciNetDevice & { vf: NonNullable<PciNetDevice['vf']> }> {
  const dev = await resolveDevice(sysfs, ref, opts);
  if (!dev.vf) {
    const field = opts.field ?? 'device';
    throw new KnitError(
      'FAILED_PRECONDITION',
      `${field}: ${dev.pciAddress} is ${dev.kind === 'pf' ? 'an SR-IOV physical function' : 'a NIC without SR-IOV'}, not a VF`,
      { field },
    );
  }
  return dev as PciNetDevice & { vf: NonNullable<PciNetDevice['vf']> };
}
