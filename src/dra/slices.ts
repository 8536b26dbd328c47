// This node's devices as a ResourceSlice (resource.k8s.io/v1): one pool named after the node,
// one device per PCI network function of the inventory (src/devices), with the attributes
// src/devices/attributes.ts derives (dranet's names under the configured domain, plus
// resource.kubernetes.io/pcieRoot and pciBusID, so a claim can align a NIC with a GPU under one
// PCIe root). Republished when the inventory changes (VFs created, links renamed, functions
// bound to vfio-pci), with the pool's generation raised; removed on uninstall by
// `kubectl delete resourceslices --field-selector spec.driver=<driver>` (README.md).
import { deviceAttributes, type AttributeValue } from '../devices/attributes.js';
import type { Inventory } from '../devices/inventory.js';
import { RESOURCE_API, isNotFound, type KubeApi } from './kube-port.js';

/** resource.k8s.io/v1 ResourceSliceMaxDevices. */
export const MAX_DEVICES_PER_SLICE = 128;
/** resource.k8s.io/v1 DeviceAttributeMaxValueLength. */
const MAX_STRING = 64;

type WireAttribute = { string: string } | { int: number } | { bool: boolean };

function wireAttribute(v: AttributeValue): WireAttribute | undefined {
  if (typeof v === 'boolean') return { bool: v };
  if (typeof v === 'number') return { int: v };
  return v.length <= MAX_STRING ? { string: v } : undefined;
}

export interface SliceOptions {
  driver: string;
  nodeName: string;
  attributeDomain: string;
}

/** The slice's object name: node and driver, a DNS subdomain. */
export function sliceName(o: SliceOptions): string {
  return `${o.nodeName}-${o.driver}`.toLowerCase().replace(/[^a-z0-9.-]/g, '-').slice(0, 253);
}

export function sliceDevices(inv: Inventory, o: SliceOptions): { name: string; attributes: Record<string, WireAttribute> }[] {
  return inv.devices.slice(0, MAX_DEVICES_PER_SLICE).map((dev) => {
    const attributes: Record<string, WireAttribute> = {};
    // Sorted, as the API server answers them: an unchanged inventory compares equal.
    for (const [k, v] of Object.entries(deviceAttributes(dev, { prefix: o.attributeDomain })).sort(([a], [b]) => (a < b ? -1 : 1))) {
      const w = wireAttribute(v);
      if (w) attributes[k] = w;
    }
    return { name: dev.name, attributes };
  });
}

export function resourceSlice(inv: Inventory, o: SliceOptions, generation: number, resourceVersion?: string): object {
  return {
    apiVersion: 'resource.k8s.io/v1',
    kind: 'ResourceSlice',
    metadata: { name: sliceName(o), ...(resourceVersion ? { resourceVersion } : {}) },
    spec: { driver: o.driver, nodeName: o.nodeName, pool: { name: o.nodeName, generation, resourceSliceCount: 1 }, devices: sliceDevices(inv, o) },
  };
}

interface StoredSlice { metadata: { resourceVersion?: string }; spec: { pool: { generation: number }; devices?: unknown[] } }

/** Creates or updates the slice; unchanged devices write nothing. Answers whether it wrote. */
export async function publishSlice(api: KubeApi, inv: Inventory, o: SliceOptions): Promise<boolean> {
  const path = `${RESOURCE_API}/resourceslices/${sliceName(o)}`;
  let current: StoredSlice | undefined;
  try {
    current = await api.get<StoredSlice>(path);
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  if (!current) {
    await api.create(`${RESOURCE_API}/resourceslices`, resourceSlice(inv, o, 1), { fieldManager: o.driver });
    return true;
  }
  if (JSON.stringify(current.spec.devices ?? []) === JSON.stringify(sliceDevices(inv, o))) return false;
  await api.replace(path, resourceSlice(inv, o, current.spec.pool.generation + 1, current.metadata.resourceVersion));
  return true;
}

export async function removeSlice(api: KubeApi, o: SliceOptions): Promise<void> {
  await api.delete(`${RESOURCE_API}/resourceslices/${sliceName(o)}`);
}
