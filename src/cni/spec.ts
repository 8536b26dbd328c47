// CNI spec helpers for knit acting as a plugin (https://github.com/containernetworking/cni/blob/main/SPEC.md):
// version negotiation, results in the version a config asks for, and error objects.
import type { AttachResult } from '../base/types.js';
import { CniCode } from '../base/errors.js';

/** The versions knit answers in, oldest first. 0.3.0 and 0.3.1 share 0.4.0's result shape. */
export const SUPPORTED_VERSIONS = ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] as const;
export type CniVersion = (typeof SUPPORTED_VERSIONS)[number];

export class CniError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly details = '',
  ) {
    super(message);
    this.name = 'CniError';
  }
}

/**
 * The version to answer in: the config's cniVersion, or for a conflist with cniVersions (CNI
 * 1.1) the newest listed one knit knows. Anything else is CNI code 1.
 */
export function negotiateVersion(conf: { cniVersion?: unknown; cniVersions?: unknown }): CniVersion {
  const known = (v: unknown): v is CniVersion => typeof v === 'string' && (SUPPORTED_VERSIONS as readonly string[]).includes(v);
  if (Array.isArray(conf.cniVersions)) {
    const usable = SUPPORTED_VERSIONS.filter((v) => (conf.cniVersions as unknown[]).includes(v));
    if (usable.length) return usable[usable.length - 1]!;
  }
  if (known(conf.cniVersion)) return conf.cniVersion;
  const asked = JSON.stringify(conf.cniVersion ?? conf.cniVersions ?? null).slice(0, 40);
  throw new CniError(CniCode.incompatibleVersion, `cniVersion ${asked} is not supported`, `knit answers in ${SUPPORTED_VERSIONS.join(', ')}`);
}

const atLeast = (v: CniVersion, min: CniVersion) => SUPPORTED_VERSIONS.indexOf(v) >= SUPPORTED_VERSIONS.indexOf(min);

/** A CNI result object as the spec version prints it. */
export interface CniResult {
  cniVersion: string;
  interfaces?: Record<string, unknown>[];
  ips?: Record<string, unknown>[];
  routes?: Record<string, unknown>[];
  dns?: Record<string, unknown>;
}

/** knit's attach result rendered in `version`. */
export function renderResult(r: AttachResult, version: CniVersion): CniResult {
  const v11 = atLeast(version, '1.1.0');
  const pre1 = !atLeast(version, '1.0.0');
  const interfaces = r.interfaces.map((i) => ({
    name: i.name,
    ...(i.mac ? { mac: i.mac } : {}),
    ...(v11 && i.mtu ? { mtu: i.mtu } : {}),
    ...(i.sandbox ? { sandbox: i.sandbox } : {}),
    ...(v11 && i.socketPath ? { socketPath: i.socketPath } : {}),
    ...(v11 && i.pciId ? { pciID: i.pciId } : {}),
  }));
  const ips = r.ips.map((ip) => ({
    ...(pre1 ? { version: String(ip.family) } : {}),
    address: ip.address,
    ...(ip.gateway ? { gateway: ip.gateway } : {}),
    interface: ip.interface,
  }));
  const routes = r.routes.map((rt) => ({
    dst: rt.dst,
    ...(rt.gw ? { gw: rt.gw } : {}),
    ...(v11 && rt.mtu ? { mtu: rt.mtu } : {}),
    ...(v11 && rt.priority ? { priority: rt.priority } : {}),
    ...(v11 && rt.table ? { table: rt.table } : {}),
    ...(v11 && rt.scope !== undefined ? { scope: rt.scope } : {}),
  }));
  const dns = r.dns
    ? {
        ...(r.dns.nameservers.length ? { nameservers: r.dns.nameservers } : {}),
        ...(r.dns.domain ? { domain: r.dns.domain } : {}),
        ...(r.dns.search.length ? { search: r.dns.search } : {}),
        ...(r.dns.options.length ? { options: r.dns.options } : {}),
      }
    : undefined;
  return { cniVersion: version, interfaces, ips, routes, ...(dns && Object.keys(dns).length ? { dns } : {}) };
}

/**
 * knit's result after a previous plugin's (knit not first in a chain): the earlier
 * interfaces stay first and knit's ips point past them.
 */
export function appendToPrevResult(prev: unknown, mine: CniResult, version: CniVersion): CniResult {
  if (!prev || typeof prev !== 'object') return mine;
  const p = prev as CniResult;
  const offset = p.interfaces?.length ?? 0;
  return {
    cniVersion: version,
    interfaces: [...(p.interfaces ?? []), ...(mine.interfaces ?? [])],
    ips: [...(p.ips ?? []), ...(mine.ips ?? []).map((ip) => ({ ...ip, interface: (ip.interface as number) + offset }))],
    routes: [...(p.routes ?? []), ...(mine.routes ?? [])],
    ...(p.dns || mine.dns ? { dns: p.dns ?? mine.dns } : {}),
  };
}

/** The error object CNI prints on stdout with a non-zero exit. */
export function errorObject(err: CniError, version: string): { cniVersion: string; code: number; msg: string; details?: string } {
  return { cniVersion: version, code: err.code, msg: err.message, ...(err.details ? { details: err.details } : {}) };
}
