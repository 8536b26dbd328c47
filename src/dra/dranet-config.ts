// dranet's opaque config (kubernetes-sigs/dranet pkg/apis/types.go, NetworkConfig) read as
// knit's device parameters, so a DeviceClass or claim written for dranet works with knit:
//   interface.name -> interfaceName, interface.addresses -> addresses, interface.mtu -> mtu,
//   interface.hardwareAddr -> mac, routes[].destination/gateway -> routes[].dst/gw.
// What knit does not do (DHCP, VRF, rules, neighbours, ethtool, GSO/GRO sizes, route source,
// scope and table) is refused with UNIMPLEMENTED naming the field, never dropped.
import { KnitError } from '../base/errors.js';

const INTERFACE_KEYS: Record<string, string> = { name: 'interfaceName', addresses: 'addresses', mtu: 'mtu', hardwareAddr: 'mac' };
const ROUTE_KEYS: Record<string, string> = { destination: 'dst', gateway: 'gw' };
const TOP_KEYS = new Set(['interface', 'routes']);

const unimplemented = (field: string, what: string) => new KnitError('UNIMPLEMENTED', `${field}: ${what} is not supported by knit`, { field });

/** Where in dranet's shape each of knit's parameters is spelled (interface.hardwareAddr for mac). */
export function dranetPathOf(knitKey: string): string {
  const iface = Object.entries(INTERFACE_KEYS).find(([, to]) => to === knitKey)?.[0];
  return iface ? `interface.${iface}` : knitKey;
}

/** dranet's shape: an `interface` object, or routes with `destination`. */
export function isDranetConfig(p: object): boolean {
  const o = p as Record<string, unknown>;
  if (typeof o.interface === 'object' && o.interface !== null) return true;
  return Array.isArray(o.routes) && o.routes.some((r) => typeof r === 'object' && r !== null && 'destination' in r);
}

export function fromDranetConfig(p: Record<string, unknown>, field: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(p)) {
    if (!TOP_KEYS.has(key)) throw unimplemented(`${field}.${key}`, `dranet's "${key}"`);
  }
  const iface = (p.interface ?? {}) as Record<string, unknown>;
  if (typeof iface !== 'object' || Array.isArray(iface)) throw KnitError.invalid(`${field}.interface`, 'must be an object');
  for (const [key, value] of Object.entries(iface)) {
    const to = INTERFACE_KEYS[key];
    if (!to) throw unimplemented(`${field}.interface.${key}`, `dranet's interface.${key}`);
    out[to] = value;
  }
  if (p.routes !== undefined) {
    if (!Array.isArray(p.routes)) throw KnitError.invalid(`${field}.routes`, 'must be a list');
    out.routes = p.routes.map((r, i) => {
      if (typeof r !== 'object' || r === null) throw KnitError.invalid(`${field}.routes[${i}]`, 'must be an object');
      const route: Record<string, unknown> = {};
      for (const [key, value] of Object.entries(r as Record<string, unknown>)) {
        const to = ROUTE_KEYS[key];
        if (!to) throw unimplemented(`${field}.routes[${i}].${key}`, `dranet's route ${key}`);
        route[to] = value;
      }
      return route;
    });
  }
  return out;
}
