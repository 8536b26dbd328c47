// What the responder hands one guest, read off the hand-off's guest config (the same addresses,
// routes, MTU and DNS Kata's agent would get), in the shapes the DHCP options need.
import type { GuestConfig } from '../base/handoff.js';
import { ipv4Bytes, ipv6Bytes, splitCidr } from './addr.js';

export interface Route4 {
  dst: Buffer;
  prefix: number;
  /** 0.0.0.0 = on-link */
  gateway: Buffer;
}

export interface GuestLease {
  /** The only MAC the responder answers. */
  guestMac: string;
  /** Source MAC of the answers, and the RA's router (its EUI-64 link-local is the RA source). */
  serverMac: string;
  /** Whether serverMac really is the guest's IPv6 router (else the RA names no default router). */
  serverIsRouter6: boolean;
  mtu: number;
  hostname?: string;
  /** Option 15: the config's domain, else the first search domain. */
  domain?: string;
  /** Option 119, DHCPv6 option 24, the RA's DNSSL: the search list, else the domain alone
   * (resolv.conf(5): either names the search list). */
  search: string[];
  v4?: { address: Buffer; prefix: number; serverId: Buffer; router?: Buffer; routes: Route4[]; dns: Buffer[] };
  v6?: { address: Buffer; prefix: number; dns: Buffer[] };
}

/** The address a server without one on the guest's subnet names itself by: KubeVirt's
 * placeholder for its bridge binding's DHCP server (169.254.75.1<index>). */
const PLACEHOLDER_SERVER = '169.254.75.10';

export function leaseFrom(guest: GuestConfig, server: { mac: string; isRouter6: boolean; hostname?: string }): GuestLease {
  const v4 = guest.ips.find((ip) => ip.family === 4);
  const v6 = guest.ips.find((ip) => ip.family === 6);
  const dns = guest.dns?.nameservers ?? [];
  const search = guest.dns?.search ?? [];
  const domain = guest.dns?.domain || search[0];
  const lease: GuestLease = {
    guestMac: guest.mac.toLowerCase(),
    serverMac: server.mac.toLowerCase(),
    serverIsRouter6: server.isRouter6,
    mtu: guest.mtu,
    ...(server.hostname ? { hostname: server.hostname } : {}),
    ...(domain ? { domain } : {}),
    search: search.length ? search : domain ? [domain] : [],
  };
  if (v4) {
    const { address, prefix } = splitCidr(v4.address);
    const routes4 = guest.routes.filter((r) => !r.dst.includes(':'));
    const defaultGw = routes4.find((r) => r.dst === '0.0.0.0/0')?.gateway ?? v4.gateway;
    // The default route last: a client installs in order, and its gateway may need a route first.
    const ordered = [...routes4.filter((r) => r.dst !== '0.0.0.0/0'), ...routes4.filter((r) => r.dst === '0.0.0.0/0')];
    lease.v4 = {
      address: ipv4Bytes(address),
      prefix,
      serverId: ipv4Bytes(defaultGw ?? PLACEHOLDER_SERVER),
      ...(defaultGw ? { router: ipv4Bytes(defaultGw) } : {}),
      routes: ordered.map((r) => {
        const d = splitCidr(r.dst);
        return { dst: ipv4Bytes(d.address), prefix: d.prefix, gateway: ipv4Bytes(r.gateway ?? '0.0.0.0') };
      }),
      dns: dns.filter((s) => !s.includes(':')).map(ipv4Bytes),
    };
  }
  if (v6) {
    const { address, prefix } = splitCidr(v6.address);
    lease.v6 = { address: ipv6Bytes(address), prefix, dns: dns.filter((s) => s.includes(':')).map(ipv6Bytes) };
  }
  return lease;
}

/** True when classless routes (option 121) say more than the router option: any route other
 * than a default via the router. A client that takes option 121 ignores option 3 (RFC 3442). */
export function needsClasslessRoutes(v4: NonNullable<GuestLease['v4']>): boolean {
  return v4.routes.some((r) => r.prefix !== 0 || !v4.router || !r.gateway.equals(v4.router));
}
