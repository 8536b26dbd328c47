// The pod annotation `k8s.v1.cni.cncf.io/networks` (and `v1.multus-cni.io/default-network`),
// read as Multus reads it: the Network Plumbing Working Group's "Network Attachment Selection
// Annotation" in its two forms. Text: `[namespace/]name[@ifname]`, comma-separated. JSON: a list
// of selection elements with Multus's field names (multus-cni pkg/types/types.go
// NetworkSelectionElement; parsing in pkg/k8sclient/k8sclient.go parsePodNetworkAnnotation).
// docs/secondary-networks.md has the grammar with examples; every refusal names the annotation,
// the entry and the field.
import { KnitError, quote } from '../base/errors.js';
import { tryParseCidr, tryParseIp } from '../ipam/ip.js';
import { goField } from './go-json.js';

export const NETWORKS_ANNOTATION = 'k8s.v1.cni.cncf.io/networks';
export const DEFAULT_NETWORK_ANNOTATION = 'v1.multus-cni.io/default-network';

/** CNI's portMappings capability entry (the annotation's `portMappings`). */
export interface PortMapEntry {
  hostPort: number;
  containerPort: number;
  protocol?: string;
  hostIP?: string;
}

/** CNI's bandwidth capability (the annotation's `bandwidth`): bits per second, bits. */
export interface BandwidthEntry {
  ingressRate: number;
  ingressBurst: number;
  egressRate: number;
  egressBurst: number;
}

/** One network a pod asks for. `namespace` is always filled in (the pod's, or the one a default
 * applies: Multus's multusNamespace for the default-network annotation). */
export interface NetworkSelection {
  name: string;
  namespace: string;
  /** The interface name in the pod; absent: Multus's `net<position>`. */
  interface?: string;
  mac?: string;
  /** Addresses, each an IP or a CIDR, as the entry gave them. */
  ips?: string[];
  infinibandGuid?: string;
  portMappings?: PortMapEntry[];
  bandwidth?: BandwidthEntry;
  deviceId?: string;
  /** Merged into every plugin's `args.cni` (KubeVirt's `logicNetworkName` arrives this way). */
  cniArgs?: Record<string, unknown>;
  /** `default-route`: the gateways this attachment's default route goes through. */
  defaultRoute?: string[];
}

/** A DNS-1123 label, what Multus requires of a name or namespace in the text form. */
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const IFNAMSIZ = 16;

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);

/** Go's net.ParseMAC: 6, 8 or 20 bytes as xx:xx:…, xx-xx-… or xxxx.xxxx.… */
export function isGoMac(text: string): boolean {
  const colon = /^[0-9a-fA-F]{2}(?:([:-])[0-9a-fA-F]{2})*$/.exec(text);
  const dotted = /^[0-9a-fA-F]{4}(?:\.[0-9a-fA-F]{4})*$/.test(text);
  let bytes = 0;
  if (colon && !(colon[1] && text.includes(colon[1] === ':' ? '-' : ':'))) bytes = (text.length + 1) / 3;
  else if (dotted) bytes = ((text.length + 1) / 5) * 2;
  return bytes === 6 || bytes === 8 || bytes === 20;
}

/** Why an interface name will not do, as Multus checks it: at most 15 bytes, no "/" or white space. */
function ifnameProblem(name: string): string | undefined {
  if (Buffer.byteLength(name) > IFNAMSIZ - 1) return 'is longer than 15 bytes';
  if (/[\s/]/.test(name)) return 'holds "/" or white space';
  return undefined;
}

class Reader {
  constructor(readonly annotation: string) {}

  invalid(at: string, message: string): KnitError {
    return KnitError.invalid(`annotations["${this.annotation}"]${at}`, message);
  }

  string(o: Record<string, unknown>, key: string, at: string): string | undefined {
    const v = goField(o, key);
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'string') throw this.invalid(`${at}.${key}`, 'must be a string');
    return v || undefined;
  }

  strings(o: Record<string, unknown>, key: string, at: string): string[] | undefined {
    const v = goField(o, key);
    if (v === undefined || v === null) return undefined;
    if (!Array.isArray(v) || v.some((s) => typeof s !== 'string')) throw this.invalid(`${at}.${key}`, 'must be a list of strings');
    return v.length ? (v as string[]) : undefined;
  }

  /** A Go int: a JSON number without a fraction. */
  int(o: Record<string, unknown>, key: string, at: string): number {
    const v = goField(o, key) ?? 0;
    if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw this.invalid(`${at}.${key}`, 'must be an integer');
    return v;
  }
}

function portMappings(r: Reader, v: unknown, at: string): PortMapEntry[] | undefined {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v)) throw r.invalid(at, 'must be a list of port mappings');
  const out = v.map((p, i): PortMapEntry => {
    if (!isObject(p)) throw r.invalid(`${at}[${i}]`, 'must be an object');
    const protocol = r.string(p, 'protocol', `${at}[${i}]`);
    const hostIP = r.string(p, 'hostIP', `${at}[${i}]`);
    return { hostPort: r.int(p, 'hostPort', `${at}[${i}]`), containerPort: r.int(p, 'containerPort', `${at}[${i}]`), ...(protocol && { protocol }), ...(hostIP && { hostIP }) };
  });
  return out.length ? out : undefined;
}

function bandwidth(r: Reader, v: unknown, at: string): BandwidthEntry | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isObject(v)) throw r.invalid(at, 'must be an object');
  return { ingressRate: r.int(v, 'ingressRate', at), ingressBurst: r.int(v, 'ingressBurst', at), egressRate: r.int(v, 'egressRate', at), egressBurst: r.int(v, 'egressBurst', at) };
}

/** One element of the JSON form, checked as Multus checks it after Go's decoding. */
function jsonElement(r: Reader, v: unknown, i: number, defaultNamespace: string): NetworkSelection {
  const at = `[${i}]`;
  if (!isObject(v)) throw r.invalid(at, 'must be an object with a "name"');
  const name = r.string(v, 'name', at);
  if (!name) throw r.invalid(`${at}.name`, 'names no network');
  const out: NetworkSelection = { name, namespace: r.string(v, 'namespace', at) ?? defaultNamespace };
  // "interfaceRequest" is Multus's pre-3.2 name for "interface", still read when "interface" is not given.
  const ifname = r.string(v, 'interface', at) ?? r.string(v, 'interfaceRequest', at);
  if (ifname !== undefined) {
    const why = ifnameProblem(ifname);
    if (why) throw r.invalid(`${at}.interface`, `${quote(ifname)} ${why}`);
    out.interface = ifname;
  }
  const mac = r.string(v, 'mac', at);
  if (mac !== undefined) {
    if (!isGoMac(mac)) throw r.invalid(`${at}.mac`, `${quote(mac)} is not a MAC address`);
    out.mac = mac;
  }
  const ips = r.strings(v, 'ips', at);
  ips?.forEach((ip, j) => {
    if (!(ip.includes('/') ? tryParseCidr(ip) : tryParseIp(ip))) throw r.invalid(`${at}.ips[${j}]`, `${quote(ip)} is not an IP address or CIDR`);
  });
  if (ips) out.ips = ips;
  const guid = r.string(v, 'infiniband-guid', at);
  if (guid !== undefined) {
    if (!isGoMac(guid)) throw r.invalid(`${at}.infiniband-guid`, `${quote(guid)} is not a GUID`);
    out.infinibandGuid = guid;
  }
  const pm = portMappings(r, goField(v, 'portMappings'), `${at}.portMappings`);
  if (pm) out.portMappings = pm;
  const bw = bandwidth(r, goField(v, 'bandwidth'), `${at}.bandwidth`);
  if (bw) out.bandwidth = bw;
  const deviceId = r.string(v, 'deviceID', at);
  if (deviceId) out.deviceId = deviceId;
  const cniArgs = goField(v, 'cni-args');
  if (cniArgs !== undefined && cniArgs !== null) {
    if (!isObject(cniArgs)) throw r.invalid(`${at}.cni-args`, 'must be an object');
    out.cniArgs = cniArgs;
  }
  const gateways = r.strings(v, 'default-route', at);
  gateways?.forEach((gw, j) => {
    if (!tryParseIp(gw)) throw r.invalid(`${at}.default-route[${j}]`, `${quote(gw)} is not an IP address`);
  });
  if (gateways) out.defaultRoute = gateways;
  return out;
}

/** One item of the text form: [namespace/]name[@ifname]. */
function textItem(r: Reader, item: string, i: number, defaultNamespace: string): NetworkSelection {
  const at = `[${i}]`;
  const slash = item.split('/');
  if (slash.length > 2) throw r.invalid(at, `${quote(item)} has more than one "/"`);
  const namespace = slash.length === 2 ? slash[0]!.trim() : '';
  const at2 = slash[slash.length - 1]!.split('@');
  if (at2.length > 2) throw r.invalid(at, `${quote(item)} has more than one "@"`);
  const name = at2[0]!.trim();
  const ifname = at2.length === 2 ? at2[1]!.trim() : '';
  if (!name) throw r.invalid(at, `${quote(item)} names no network`);
  for (const part of [namespace, name]) {
    if (part && !DNS_LABEL.test(part)) throw r.invalid(at, `${quote(part)} is not a DNS-1123 label (lower-case letters, digits and "-", starting and ending with a letter or digit)`);
  }
  if (ifname) {
    const why = ifnameProblem(ifname);
    if (why) throw r.invalid(at, `interface ${quote(ifname)} ${why}`);
  }
  return { name, namespace: namespace || defaultNamespace, ...(ifname && { interface: ifname }) };
}

/**
 * The networks an annotation asks for, in its order. JSON when the text holds any of `[`, `{`
 * or `"` (Multus's test); otherwise the text form. `defaultNamespace` fills in a missing namespace.
 */
export function parseNetworkSelections(text: string, defaultNamespace: string, annotation = NETWORKS_ANNOTATION): NetworkSelection[] {
  const r = new Reader(annotation);
  if (!text.trim()) return [];
  if (/[[{"]/.test(text)) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (err) {
      throw r.invalid('', `is not a JSON list of networks (${(err as Error).message})`);
    }
    if (!Array.isArray(parsed)) throw r.invalid('', 'must be a JSON list of networks, [{"name": …}, …]');
    return parsed.map((v, i) => jsonElement(r, v, i, defaultNamespace));
  }
  return text.split(',').map((item, i) => textItem(r, item.trim(), i, defaultNamespace));
}

/** The pod's `v1.multus-cni.io/default-network`: one network, its namespace defaulting to
 * `namespace` (Multus: multusNamespace, where the cluster's networks are kept). */
export function parseDefaultNetwork(text: string, namespace: string): NetworkSelection | undefined {
  const all = parseNetworkSelections(text, namespace, DEFAULT_NETWORK_ANNOTATION);
  if (all.length > 1) throw KnitError.invalid(`annotations["${DEFAULT_NETWORK_ANNOTATION}"]`, `names ${all.length} networks; a pod has one default network`);
  return all[0];
}
