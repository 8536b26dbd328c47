// Decoded knit.v1 requests -> core domain objects (src/base/types.ts). Every rule names the
// field it guards; the first violation becomes KnitError.invalid('<proto field path>', why),
// e.g. `interfaces[0].mac: "zz" is not a MAC address`.
//
// Interfaces: none given means one, eth0, on the default network (what CNI runtimes pass as
// CNI_IFNAME and what KNI callers read back as ipconfigs["eth0"]); an unnamed interface at
// index i is eth<i>, go-cni's naming.
import { z } from 'zod/v3'; // why v3: docs/architecture.md, "What a node loads"
import { KnitError, quote, renameField } from '../base/errors.js';
import { issueText } from '../base/zod-issue.js';
import { RUNTIME_CHOICES, runtimeFromWireName } from '../base/runtime-kinds.js';
import type { AttachRequest, Extension, InterfaceRequest, PortMapping, RuntimeKind, DnsConfig } from '../base/types.js';
import * as rules from './rules.js';
import { applyBandwidthAnnotations, bandwidthSchema } from './bandwidth.js';
import { fromStruct, type StructMsg } from './struct.js';
import { checkAttachLimits, checkInterfaceLimits, LIMITS } from './limits.js';
import { formatIp, tryParseIp } from '../ipam/ip.js';
import type { WireAttachRequest } from './wire-types.js';

type Check<T> = (v: T) => rules.Problem;

function checked<S extends z.ZodTypeAny>(schema: S, ...checks: Check<z.output<S>>[]) {
  return schema.superRefine((v, ctx) => {
    for (const check of checks) {
      const problem = check(v);
      if (problem) {
        ctx.addIssue({ code: 'custom', message: problem });
        return;
      }
    }
  });
}

const optional = <T>(check: Check<T>): Check<T> => (v) => (v === '' ? undefined : check(v));

/** A string map whose keys must be non-empty (labels, annotations, binding). */
const stringMap = z.record(z.string(), z.string()).superRefine((m, ctx) => {
  for (const key of Object.keys(m)) {
    if (key === '') ctx.addIssue({ code: 'custom', message: 'keys must not be empty', path: [key] });
    else if (key.includes('\0')) ctx.addIssue({ code: 'custom', message: 'keys must not contain NUL', path: [key] });
  }
});

const sandboxId = checked(z.string(), rules.sandboxIdProblem).default('');
const optionalName = checked(z.string(), (v) => rules.nameProblem(v)).default('');

const runtime = z
  .union([z.string(), z.number()])
  .superRefine((v, ctx) => {
    if (!runtimeFromWireName(String(v))) {
      ctx.addIssue({ code: 'custom', message: `${quote(String(v))} is not one of ${RUNTIME_CHOICES}` });
    }
  })
  .transform((v): RuntimeKind => runtimeFromWireName(String(v))!);

const protocolNames: Record<string, PortMapping['protocol']> = {
  PROTOCOL_UNSPECIFIED: 'tcp',
  TCP: 'tcp',
  UDP: 'udp',
  SCTP: 'sctp',
};

const portMapping = z
  .object({
    protocol: z
      .union([z.string(), z.number()])
      .superRefine((v, ctx) => {
        if (!(String(v) in protocolNames)) {
          ctx.addIssue({ code: 'custom', message: `${quote(String(v))} is not one of tcp, udp, sctp` });
        }
      })
      .default('PROTOCOL_UNSPECIFIED'),
    container_port: checked(z.number(), (v) => rules.portProblem(v, false)).default(0),
    host_port: checked(z.number(), (v) => rules.portProblem(v, true)).default(0),
    host_ip: checked(z.string(), optional(rules.ipProblem)).default(''),
  })
  .transform(
    (p): PortMapping => ({
      protocol: protocolNames[String(p.protocol)]!,
      containerPort: p.container_port,
      hostPort: p.host_port,
      ...(p.host_ip ? { hostIp: p.host_ip } : {}),
    }),
  );

const dns = z
  .object({
    nameservers: z.array(checked(z.string(), rules.ipProblem)).default([]),
    search: z.array(checked(z.string(), rules.searchDomainProblem)).default([]),
    options: z.array(checked(z.string(), (v) => (v === '' ? 'must not be empty' : undefined))).default([]),
    domain: checked(z.string(), optional(rules.searchDomainProblem)).default(''),
  })
  .nullish()
  .transform((d): DnsConfig | undefined => {
    if (!d || (!d.nameservers.length && !d.search.length && !d.options.length && !d.domain)) return undefined;
    return {
      nameservers: d.nameservers,
      search: d.search,
      options: d.options,
      ...(d.domain ? { domain: d.domain } : {}),
    };
  });

const device = z
  .object({
    bdf: checked(z.string(), optional(rules.bdfProblem)).default(''),
    netdev: checked(z.string(), optional(rules.ifnameProblem)).default(''),
    pool: optionalName,
    device: optionalName,
    parameters: z.custom<StructMsg>().nullish(),
  })
  .nullish()
  .transform((d): InterfaceRequest['device'] => {
    if (!d) return undefined;
    const out: NonNullable<InterfaceRequest['device']> = {};
    if (d.bdf) out.bdf = d.bdf.toLowerCase();
    if (d.netdev) out.netdev = d.netdev;
    if (d.pool) out.pool = d.pool;
    if (d.device) out.name = d.device;
    if (d.parameters) out.parameters = fromStruct(d.parameters);
    return Object.keys(out).length ? out : undefined;
  });

const iface = z
  .object({
    name: checked(z.string(), rules.ifnameProblem),
    network: optionalName,
    mac: checked(z.string(), optional(rules.macProblem)).default(''),
    mtu: checked(z.number(), rules.mtuProblem).default(0),
    ips: z.array(checked(z.string(), rules.cidrProblem)).default([]),
    device,
    binding: stringMap.default({}),
    default_route: z.boolean().default(false),
    bandwidth: bandwidthSchema,
  })
  .transform((i): InterfaceRequest => {
    const out: InterfaceRequest = { name: i.name };
    if (i.network) out.network = i.network;
    if (i.mac) out.mac = rules.normalizeMac(i.mac);
    if (i.mtu) out.mtu = i.mtu;
    if (i.ips.length) out.ips = i.ips;
    if (i.device) out.device = i.device;
    if (Object.keys(i.binding).length) out.binding = i.binding;
    if (i.default_route) out.defaultRoute = true;
    if (i.bandwidth) out.bandwidth = i.bandwidth;
    return out;
  });

/** Fill the eth0 default and eth<i> names before the per-interface rules run. */
function defaultInterfaces(v: unknown): unknown {
  const list = Array.isArray(v) && v.length ? v : [{}];
  return list.map((entry, i) => {
    const e = (entry ?? {}) as { name?: string };
    return e.name ? e : { ...e, name: `eth${i}` };
  });
}

const interfaces = z.preprocess(
  defaultInterfaces,
  z.array(iface).superRefine((list, ctx) => {
    const seen = new Map<string, number>();
    list.forEach((i, index) => {
      const first = seen.get(i.name);
      if (first !== undefined) {
        ctx.addIssue({
          code: 'custom',
          message: `${quote(i.name)} is already used by interfaces[${first}]`,
          path: [index, 'name'],
        });
      } else seen.set(i.name, index);
    });
    // The same address twice would fail only in the kernel (or in the pool, naming neither).
    const addresses = new Map<string, string>();
    list.forEach((i, index) =>
      i.ips?.forEach((cidr, j) => {
        const text = cidr.slice(0, cidr.indexOf('/'));
        const parsed = tryParseIp(text);
        const address = parsed ? formatIp(parsed) : text;
        const first = addresses.get(address);
        if (first) ctx.addIssue({ code: 'custom', message: `${address} is already given as ${first}`, path: [index, 'ips', j] });
        else addresses.set(address, `interfaces[${index}].ips[${j}]`);
      }),
    );
    const marked = list.flatMap((i, index) => (i.defaultRoute ? [index] : []));
    if (marked.length > 1) {
      ctx.addIssue({ code: 'custom', message: `only one interface carries the default route, and interfaces[${marked[0]}] already does`, path: [marked[1], 'default_route'] });
    }
  }),
);

const attachSchema = z
  .object({
    sandbox_id: sandboxId,
    pod_name: optionalName,
    pod_namespace: optionalName,
    pod_uid: optionalName,
    netns_path: checked(z.string(), (v) => rules.netnsPathProblem(v)).default(''),
    runtime: runtime.default('RUNTIME_UNSPECIFIED'),
    interfaces,
    port_mappings: z.array(portMapping).default([]),
    dns,
    labels: stringMap.default({}),
    annotations: stringMap.default({}),
  })
  .transform((r): AttachRequest => {
    const out: AttachRequest = {
      sandboxId: r.sandbox_id,
      netnsPath: r.netns_path,
      runtime: r.runtime,
      interfaces: r.interfaces,
      portMappings: r.port_mappings,
      labels: r.labels,
      annotations: r.annotations,
    };
    if (r.pod_name) out.podName = r.pod_name;
    if (r.pod_namespace) out.podNamespace = r.pod_namespace;
    if (r.pod_uid) out.podUid = r.pod_uid;
    if (r.dns) out.dns = r.dns;
    return out;
  });

// ---------------------------------------------------------------------------------------------
// Field paths

const MAP_FIELDS = new Set(['labels', 'annotations', 'binding', 'extradata']);

/** ['interfaces', 0, 'mac'] -> 'interfaces[0].mac'; map keys -> labels["key"]. */
export function fieldPath(segments: readonly PropertyKey[]): string {
  let out = '';
  segments.forEach((seg, i) => {
    const prev = segments[i - 1];
    if (typeof seg === 'number') out += `[${seg}]`;
    else if (typeof prev === 'string' && MAP_FIELDS.has(prev)) out += `[${quote(String(seg))}]`;
    else out += (out ? '.' : '') + String(seg);
  });
  return out;
}

export interface ValidateOptions {
  /** Prepended to every field path (e.g. "attach." for PlanRequest.attach). */
  prefix?: string;
  /** Renames a knit.v1 field path for callers speaking another schema (the KNI mapping). */
  rename?: (path: string) => string;
}

function parse<S extends z.ZodTypeAny>(schema: S, input: unknown, opts: ValidateOptions = {}): z.output<S> {
  const r = schema.safeParse(input);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  let field = fieldPath(issue.path);
  if (opts.rename) field = opts.rename(field);
  field = (opts.prefix ?? '') + field;
  throw KnitError.invalid(field || '(request)', issueText(issue));
}

// ---------------------------------------------------------------------------------------------
// Per-request entry points (what the RPC handlers call)

/** Runs fn; an error it throws about a knit.v1 field is said about the field the caller sent
 * (opts.prefix, opts.rename). */
function naming<T>(opts: ValidateOptions | undefined, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (!(err instanceof KnitError)) throw err;
    throw renameField(err, (f) => (opts?.prefix ?? '') + (opts?.rename ? opts.rename(f) : f));
  }
}

export function validateAttach(wire: Partial<WireAttachRequest> | null | undefined, opts?: ValidateOptions): AttachRequest {
  if (!wire) throw KnitError.invalid((opts?.prefix ?? '').replace(/\.$/, '') || '(request)', 'is required');
  naming(opts, () => checkAttachLimits(wire as Record<string, unknown>));
  const req = parse(attachSchema, wire, opts);
  req.interfaces = naming(opts, () => applyBandwidthAnnotations(req.interfaces, req.annotations));
  return req;
}

export function validateSandboxId(value: unknown, field = 'sandbox_id'): string {
  return parse(z.object({ [field]: sandboxId }), { [field]: value })[field] as string;
}

const detachSchema = z.object({
  sandbox_id: sandboxId,
  netns_path: checked(z.string(), (v) => (v === '' ? undefined : rules.netnsPathProblem(v))).default(''),
});

export function validateDetach(wire: { sandbox_id?: string; netns_path?: string }): { sandboxId: string; netnsPath?: string } {
  const r = parse(detachSchema, wire);
  return r.netns_path ? { sandboxId: r.sandbox_id, netnsPath: r.netns_path } : { sandboxId: r.sandbox_id };
}

const gcSchema = z.object({
  valid_attachments: z
    .array(
      z.object({
        sandbox_id: sandboxId,
        interface_name: checked(z.string(), optional(rules.ifnameProblem)).default(''),
      }),
    )
    .default([]),
  keep_recorded: z.boolean().default(false),
});

export interface GcRequest {
  valid: { sandboxId: string; interface?: string }[];
  keepRecorded: boolean;
}

export function validateGarbageCollect(wire: unknown): GcRequest {
  const list = (wire as { valid_attachments?: unknown } | null)?.valid_attachments;
  if (Array.isArray(list) && list.length > LIMITS.validAttachments) {
    throw KnitError.invalid('valid_attachments', `has ${list.length} entries; the limit is ${LIMITS.validAttachments}`);
  }
  const r = parse(gcSchema, wire ?? {});
  return {
    keepRecorded: r.keep_recorded,
    valid: r.valid_attachments.map((v) =>
      v.interface_name ? { sandboxId: v.sandbox_id, interface: v.interface_name } : { sandboxId: v.sandbox_id },
    ),
  };
}

const phases: Record<string, Extension['phase']> = { POST_ATTACH: 'post-attach', PRE_DETACH: 'pre-detach' };

const extensionSchema = z.object({
  name: checked(z.string(), (v) =>
    /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/.test(v) ? undefined : `${quote(v)} is not a valid extension name (1..63 of A-Z a-z 0-9 . _ -)`,
  ),
  endpoint: checked(z.string(), (v) => (v === '' ? 'is required' : rules.absolutePathProblem(v))),
  phase: z.union([z.string(), z.number()]).superRefine((v, ctx) => {
    if (!(String(v) in phases)) ctx.addIssue({ code: 'custom', message: 'must be POST_ATTACH or PRE_DETACH' });
  }),
  required: z.boolean().default(false),
  order: z.number().int().default(0),
});

export function validateExtension(wire: unknown): Extension {
  if (!wire) throw KnitError.invalid('extension', 'is required');
  const r = parse(extensionSchema, wire, { prefix: 'extension.' });
  return { name: r.name, endpoint: r.endpoint, phase: phases[String(r.phase)]!, required: r.required, order: r.order };
}

export function validateExtensionName(value: unknown): string {
  return parse(z.object({ name: extensionSchema.shape.name }), { name: value }).name;
}

const addInterfaceSchema = z.object({
  sandbox_id: sandboxId,
  interface: z.preprocess((v) => v ?? {}, iface),
});

export function validateAddInterface(wire: unknown, opts?: ValidateOptions): { sandboxId: string; iface: InterfaceRequest } {
  if (!wire) throw KnitError.invalid((opts?.prefix ?? '').replace(/\.$/, '') || '(request)', 'is required');
  naming(opts, () => checkInterfaceLimits('interface', (wire as { interface?: Record<string, unknown> }).interface));
  const r = parse(addInterfaceSchema, wire, opts);
  return { sandboxId: r.sandbox_id, iface: r.interface };
}

const removeInterfaceSchema = z.object({
  sandbox_id: sandboxId,
  name: checked(z.string(), rules.ifnameProblem).default(''),
});

export function validateRemoveInterface(wire: unknown): { sandboxId: string; name: string } {
  const r = parse(removeInterfaceSchema, wire ?? {});
  return { sandboxId: r.sandbox_id, name: r.name };
}
