// The opaque DRA parameters for one device attached to a sandbox: what a ResourceClaim's
// config[].opaque.parameters (or a knit request's device.parameters) may say. Two halves:
//   - the VF as the sandbox sees it: interfaceName, addresses, routes, mtu, mac;
//   - the PF-side VF settings (`ip link set <pf> vf N ...`): mac, vlan/qos/vlanProto, spoofchk,
//     trust, min/maxTxRate, linkState — the same vocabulary as sriov-cni's config.
// mode picks the attachment: 'netdev' moves the VF netdev into the pod netns; 'vfio' binds the
// VF to vfio-pci for a VM. Unknown keys are rejected (dranet decodes strictly too), so a typo
// does not silently drop a setting. Errors name the field: `parameters.routes[1].gw: ...`.
import { isIP } from 'node:net';
import { z } from 'zod/v3';
import { KnitError } from '../base/errors.js';
import { issueText } from '../base/zod-issue.js';

export type AttachMode = 'netdev' | 'vfio';
export type VlanProto = '802.1Q' | '802.1ad';
export type VfLinkState = 'auto' | 'enable' | 'disable';

export interface DeviceRoute {
  /** CIDR, or "default" (the family then follows gw). */
  dst: string;
  gw?: string;
  mtu?: number;
}

export interface DeviceParameters {
  mode: AttachMode;
  /** Name inside the sandbox (netdev mode). */
  interfaceName?: string;
  /** CIDRs to add to the interface. In vfio mode they are guest configuration for the hand-off. */
  addresses: string[];
  routes: DeviceRoute[];
  mtu?: number;
  /** Lower-case colon form. Set as the VF's admin MAC on the PF and on the netdev. */
  mac?: string;
  vlan?: number;
  qos?: number;
  vlanProto?: VlanProto;
  spoofchk?: boolean;
  trust?: boolean;
  /** Mbps; 0 = no limit. */
  minTxRate?: number;
  maxTxRate?: number;
  linkState?: VfLinkState;
}

type Problem = string | undefined;
const q = (v: unknown) => JSON.stringify(v);

function ifnameProblem(v: string): Problem {
  const bytes = Buffer.byteLength(v);
  if (bytes === 0) return 'must not be empty';
  if (bytes > 15) return `${q(v)} is ${bytes} bytes long; Linux allows 15`;
  if (v === '.' || v === '..') return `${q(v)} is not a valid interface name`;
  if (/[/:\s\0]/.test(v)) return `${q(v)} contains '/', ':', whitespace or NUL, which Linux does not allow in an interface name`;
  return undefined;
}

/** Family of a CIDR, or the reason it is not one. */
function cidrFamily(v: string): 4 | 6 | string {
  const slash = v.indexOf('/');
  if (slash < 0) return `${q(v)} is not a CIDR (address/prefix)`;
  const family = isIP(v.slice(0, slash));
  if (!family) return `${q(v)} is not a CIDR: ${q(v.slice(0, slash))} is not an IP address`;
  const max = family === 4 ? 32 : 128;
  const prefix = v.slice(slash + 1);
  if (!/^\d{1,3}$/.test(prefix) || Number(prefix) > max) return `${q(v)} is not a CIDR: the prefix must be 0..${max}`;
  return family as 4 | 6;
}

function cidrProblem(v: string): Problem {
  const family = cidrFamily(v);
  return typeof family === 'string' ? family : undefined;
}

function macProblem(v: string): Problem {
  if (!/^[0-9a-f]{2}([:-])[0-9a-f]{2}(\1[0-9a-f]{2}){4}$/i.test(v)) return `${q(v)} is not a MAC address`;
  if (parseInt(v.slice(0, 2), 16) & 1) return `${q(v)} is a multicast address; an interface needs a unicast MAC`;
  if (/^(00[:-]){5}00$/.test(v)) return `${q(v)} is the all-zero address`;
  return undefined;
}

/** An integer in [min, max]. */
const int = (min: number, max: number, unit = '') =>
  z.unknown().transform((v, ctx) => {
    if (typeof v !== 'number' || !Number.isInteger(v)) {
      ctx.addIssue({ code: 'custom', message: `${q(v)} is not an integer`, fatal: true });
      return z.NEVER;
    }
    if (v < min || v > max) {
      ctx.addIssue({ code: 'custom', message: `${v} is out of range ${min}..${max}${unit}`, fatal: true });
      return z.NEVER;
    }
    return v;
  });

const text = (check: (v: string) => Problem) =>
  z.unknown().transform((v, ctx) => {
    if (typeof v !== 'string') {
      ctx.addIssue({ code: 'custom', message: `${q(v)} is not a string`, fatal: true });
      return z.NEVER;
    }
    const problem = check(v);
    if (problem) {
      ctx.addIssue({ code: 'custom', message: problem, fatal: true });
      return z.NEVER;
    }
    return v;
  });

const oneOf = <T extends string>(names: Record<string, T>) =>
  z.unknown().transform((v, ctx) => {
    const hit = typeof v === 'string' ? names[v] : undefined;
    if (hit === undefined) {
      ctx.addIssue({ code: 'custom', message: `${q(v)} is not one of ${[...new Set(Object.values(names))].join(', ')}`, fatal: true });
      return z.NEVER;
    }
    return hit;
  });

/** true/false, or sriov-cni's "on"/"off". */
const onOff = z.unknown().transform((v, ctx) => {
  if (typeof v === 'boolean') return v;
  if (v === 'on') return true;
  if (v === 'off') return false;
  ctx.addIssue({ code: 'custom', message: `${q(v)} is not a boolean (true/false or "on"/"off")`, fatal: true });
  return z.NEVER;
});

const mtu = int(68, 65535);

const route = z.strictObject({
  dst: text((v) => (v === 'default' ? undefined : cidrProblem(v))),
  gw: text((v) => (isIP(v) ? undefined : `${q(v)} is not an IP address`)).optional(),
  mtu: mtu.optional(),
});

const fields = z.strictObject({
    mode: oneOf<AttachMode>({ netdev: 'netdev', vfio: 'vfio' }).optional(),
    interfaceName: text(ifnameProblem).optional(),
    addresses: z.array(text(cidrProblem)).optional(),
    routes: z.array(route).optional(),
    mtu: mtu.optional(),
    mac: text(macProblem).optional(),
    vlan: int(0, 4094).optional(),
    qos: int(0, 7).optional(),
    vlanProto: oneOf<VlanProto>({ '802.1Q': '802.1Q', '802.1q': '802.1Q', '802.1ad': '802.1ad', '802.1AD': '802.1ad' }).optional(),
    spoofchk: onOff.optional(),
    trust: onOff.optional(),
    minTxRate: int(0, 0xffffffff, ' Mbps').optional(),
    maxTxRate: int(0, 0xffffffff, ' Mbps').optional(),
    linkState: oneOf<VfLinkState>({ auto: 'auto', enable: 'enable', disable: 'disable' }).optional(),
  });

const schema = fields.superRefine((p, ctx) => {
  const issue = (path: (string | number)[], message: string) => ctx.addIssue({ code: 'custom', path, message });
  const vlan = p.vlan ?? 0;
  if (p.qos !== undefined && p.qos !== 0 && vlan === 0) issue(['qos'], 'needs a vlan (QoS is the 802.1p priority of VLAN-tagged frames)');
  if (p.vlanProto === '802.1ad' && vlan === 0) issue(['vlanProto'], '802.1ad needs a vlan');
  if (p.minTxRate && p.maxTxRate && p.minTxRate > p.maxTxRate) {
    issue(['minTxRate'], `${p.minTxRate} Mbps is above maxTxRate (${p.maxTxRate} Mbps)`);
  }
  if (p.mode === 'vfio' && p.interfaceName !== undefined) {
    issue(['interfaceName'], 'is not used in vfio mode: the VM names its own interfaces');
  }
  p.routes?.forEach((r, i) => {
    const dstFamily = r.dst === 'default' ? undefined : cidrFamily(r.dst);
    const gwFamily = r.gw === undefined ? undefined : isIP(r.gw);
    if (r.dst === 'default' && gwFamily === undefined) issue(['routes', i, 'dst'], '"default" needs a gw (it says whether this is the IPv4 or IPv6 default)');
    if (typeof dstFamily === 'number' && gwFamily !== undefined && gwFamily !== dstFamily) {
      issue(['routes', i, 'gw'], `${q(r.gw)} is IPv${gwFamily} but dst ${q(r.dst)} is IPv${dstFamily}`);
    }
  });
  const seen = new Map<string, number>();
  p.addresses?.forEach((a, i) => {
    const first = seen.get(a);
    if (first !== undefined) issue(['addresses', i], `${q(a)} is already addresses[${first}]`);
    else seen.set(a, i);
  });
});

const KNOWN = Object.keys(fields.shape).join(', ');

/** ['routes', 1, 'gw'] -> 'routes[1].gw' */
function joinPath(base: string, segments: readonly PropertyKey[]): string {
  let out = base;
  for (const s of segments) out += typeof s === 'number' ? `[${s}]` : (out ? '.' : '') + String(s);
  return out;
}

/**
 * Validate opaque device parameters. `field` prefixes every error's field path. null/undefined
 * mean "all defaults" (netdev mode, nothing else set).
 */
export function parseDeviceParameters(input: unknown, field = 'parameters'): DeviceParameters {
  const r = schema.safeParse(input ?? {});
  if (!r.success) {
    const issue = r.error.issues[0]!;
    if (issue.code === 'unrecognized_keys') {
      const key = issue.keys[0]!;
      const known = issue.path.length ? 'dst, gw, mtu' : KNOWN;
      throw KnitError.invalid(joinPath(field, [...issue.path, key]), `is not a known parameter (known: ${known})`);
    }
    if (issue.code === 'invalid_type' && issue.path.length === 0) {
      throw KnitError.invalid(field, `must be an object, not ${Array.isArray(input) ? 'an array' : typeof input}`);
    }
    throw KnitError.invalid(joinPath(field, issue.path), issueText(issue));
  }
  const p = r.data;
  const out: DeviceParameters = { mode: p.mode ?? 'netdev', addresses: p.addresses ?? [], routes: [] };
  for (const rt of p.routes ?? []) {
    const r2: DeviceRoute = { dst: rt.dst };
    if (rt.gw !== undefined) r2.gw = rt.gw;
    if (rt.mtu !== undefined) r2.mtu = rt.mtu;
    out.routes.push(r2);
  }
  if (p.interfaceName !== undefined) out.interfaceName = p.interfaceName;
  if (p.mtu !== undefined) out.mtu = p.mtu;
  if (p.mac !== undefined) out.mac = p.mac.toLowerCase().replaceAll('-', ':');
  if (p.vlan !== undefined) out.vlan = p.vlan;
  if (p.qos !== undefined) out.qos = p.qos;
  if (p.vlanProto !== undefined) out.vlanProto = p.vlanProto;
  if (p.spoofchk !== undefined) out.spoofchk = p.spoofchk;
  if (p.trust !== undefined) out.trust = p.trust;
  if (p.minTxRate !== undefined) out.minTxRate = p.minTxRate;
  if (p.maxTxRate !== undefined) out.maxTxRate = p.maxTxRate;
  if (p.linkState !== undefined) out.linkState = p.linkState;
  return out;
}

/** The parameters set on the PF for a VF (ip link set <pf> vf N ...). */
const PF_SETTING_KEYS = ['mac', 'vlan', 'qos', 'vlanProto', 'spoofchk', 'trust', 'minTxRate', 'maxTxRate', 'linkState'] as const;

/** Those of the PF-side parameters the request sets, in a fixed order. */
export function pfSettingKeys(p: DeviceParameters): (typeof PF_SETTING_KEYS)[number][] {
  return PF_SETTING_KEYS.filter((k) => p[k] !== undefined);
}

/** True when the parameters change anything on the PF side (so the original must be captured). */
export function hasPfSettings(p: DeviceParameters): boolean {
  return pfSettingKeys(p).length > 0;
}
