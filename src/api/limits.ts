// How much one request may ask for. The bounds sit far above what a pod needs and far below
// what would let one request starve the others (a /16 pool filled by one Attach, a Plan answer
// of 80 MB, records of megabytes). Checked on the decoded request before any other rule, so a
// huge request costs a length check, not a parse of every element. README.md § Errors and limits.
import { KnitError } from '../base/errors.js';

export const LIMITS = {
  /** Whole request, in bytes (grpc.max_receive_message_length): gRPC's own default. */
  requestBytes: 4 * 1024 * 1024,
  /** Interfaces in one Attach (Multus pods use a handful; the kernel does not care). */
  interfaces: 32,
  /** Static addresses on one interface. */
  ipsPerInterface: 16,
  portMappings: 1024,
  /** resolv.conf: glibc reads 3 nameservers and 6 search domains; room for other resolvers. */
  dnsEntries: 32,
  /** labels and annotations: Kubernetes' own bound on an object's annotations (256 KiB). */
  mapBytes: 256 * 1024,
  mapEntries: 1024,
  /** binding: a runtime's options, a few short keys. */
  bindingEntries: 32,
  bindingBytes: 4096,
  /** GarbageCollect's valid attachments: every sandbox on a full node, many times over. */
  validAttachments: 65536,
} as const;

type Wire = Record<string, unknown> | null | undefined;

function count(field: string, v: unknown, max: number): void {
  if (Array.isArray(v) && v.length > max) throw KnitError.invalid(field, `has ${v.length} entries; the limit is ${max}`);
}

function mapSize(field: string, v: unknown, maxEntries: number, maxBytes: number): void {
  if (!v || typeof v !== 'object') return;
  const entries = Object.entries(v as Record<string, unknown>);
  if (entries.length > maxEntries) throw KnitError.invalid(field, `has ${entries.length} entries; the limit is ${maxEntries}`);
  let bytes = 0;
  for (const [k, val] of entries) bytes += Buffer.byteLength(k) + (typeof val === 'string' ? Buffer.byteLength(val) : 0);
  if (bytes > maxBytes) throw KnitError.invalid(field, `holds ${bytes} bytes of keys and values; the limit is ${maxBytes}`);
}

export function checkInterfaceLimits(field: string, iface: Wire): void {
  if (!iface || typeof iface !== 'object') return;
  count(`${field}.ips`, iface.ips, LIMITS.ipsPerInterface);
  mapSize(`${field}.binding`, iface.binding, LIMITS.bindingEntries, LIMITS.bindingBytes);
}

/** An Attach (or Plan's attach) within LIMITS, checked before the schema parses it. */
export function checkAttachLimits(wire: Wire): void {
  if (!wire || typeof wire !== 'object') return;
  count('interfaces', wire.interfaces, LIMITS.interfaces);
  if (Array.isArray(wire.interfaces)) wire.interfaces.forEach((ifc, i) => checkInterfaceLimits(`interfaces[${i}]`, ifc as Wire));
  count('port_mappings', wire.port_mappings, LIMITS.portMappings);
  const dns = wire.dns as Wire;
  if (dns && typeof dns === 'object') for (const k of ['nameservers', 'search', 'options']) count(`dns.${k}`, dns[k], LIMITS.dnsEntries);
  mapSize('labels', wire.labels, LIMITS.mapEntries, LIMITS.mapBytes);
  mapSize('annotations', wire.annotations, LIMITS.mapEntries, LIMITS.mapBytes);
}
