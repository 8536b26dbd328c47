// The part of a ResourceClaim (resource.k8s.io/v1) a DRA driver reads at NodePrepareResources:
// its allocation results for this driver, the pods it is reserved for, and the opaque config
// for this driver (KEP-4381 "structured parameters"; kubernetes/kubernetes
// staging/src/k8s.io/api/resource/v1/types.go). Hand-written and partial: knit reads these
// fields and nothing else, and passes the rest by.
import { KnitError } from '../base/errors.js';
import { parseDeviceParameters, type DeviceParameters } from '../devices/params.js';
import { dranetPathOf, fromDranetConfig, isDranetConfig } from './dranet-config.js';

export interface DeviceRequestResult {
  request: string;
  driver: string;
  pool: string;
  device: string;
}

export interface OpaqueConfig {
  source?: 'FromClass' | 'FromClaim';
  requests?: string[];
  opaque?: { driver: string; parameters?: unknown };
}

export interface ResourceClaim {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; namespace: string; uid: string; resourceVersion?: string };
  status?: {
    allocation?: { devices?: { results?: DeviceRequestResult[]; config?: OpaqueConfig[] } };
    reservedFor?: { resource: string; name: string; uid: string; apiGroup?: string }[];
  };
}

/** What the kubelet names in a Prepare/Unprepare: the claim's namespace, name and UID. */
export interface ClaimRef {
  namespace: string;
  name: string;
  uid: string;
}

/** Reads claims from the API. undefined: there is no such claim (404). */
export interface ClaimReader {
  getClaim(namespace: string, name: string): Promise<ResourceClaim | undefined>;
}

/** One device of this driver in a claim's allocation, with the config that applies to it. */
export interface ClaimDevice {
  request: string;
  pool: string;
  device: string;
  parameters: DeviceParameters;
  /** status.allocation.devices.results[N]: the result that named the device (N counts every
   * driver's results, as the API object has them). */
  resultField: string;
  /** For each parameter a config entry set, that entry's field (the last one that set it). */
  parameterFields: Partial<Record<keyof DeviceParameters, string>>;
}

export interface ClaimForNode {
  ref: ClaimRef;
  podUids: string[];
  devices: ClaimDevice[];
}

/** A claim's config applies to a result when it names no requests, or the result's request
 * (a subrequest "req/sub" is also covered by its parent "req"). */
function applies(config: OpaqueConfig, request: string): boolean {
  if (!config.requests?.length) return true;
  const parent = request.split('/')[0]!;
  return config.requests.includes(request) || config.requests.includes(parent);
}

/** knit's own parameter keys, or dranet's NetworkConfig shape translated into them, with the
 * field each key was read from. */
function rawParameters(parameters: unknown, field: string): { raw: Record<string, unknown>; fieldOf: (key: string) => string } {
  if (parameters === undefined || parameters === null) return { raw: {}, fieldOf: (key) => `${field}.${key}` };
  if (typeof parameters !== 'object' || Array.isArray(parameters)) throw KnitError.invalid(field, 'must be an object');
  if (isDranetConfig(parameters)) return { raw: fromDranetConfig(parameters as Record<string, unknown>, field), fieldOf: (key) => `${field}.${dranetPathOf(key)}` };
  return { raw: { ...(parameters as Record<string, unknown>) }, fieldOf: (key) => `${field}.${key}` };
}

const CONFIG_FIELD = 'status.allocation.devices.config';

/**
 * Read what this node must prepare from a claim: refuses (FAILED_PRECONDITION) a claim that is
 * not allocated, not reserved for a pod, or whose UID is not the one the kubelet named (a claim
 * deleted and made again under the same name). Parameters are checked here, naming the field.
 */
export function claimForNode(claim: ResourceClaim, ref: ClaimRef, driver: string): ClaimForNode {
  const what = `ResourceClaim ${ref.namespace}/${ref.name}`;
  if (claim.metadata.uid !== ref.uid) {
    throw new KnitError('FAILED_PRECONDITION', `${what} has UID ${claim.metadata.uid}, not ${ref.uid} as the kubelet asked: it was deleted and made again`);
  }
  const alloc = claim.status?.allocation?.devices;
  if (!claim.status?.allocation) throw new KnitError('FAILED_PRECONDITION', `${what} is not allocated`);
  const podUids = (claim.status.reservedFor ?? []).filter((r) => r.resource === 'pods' && !r.apiGroup).map((r) => r.uid);
  if (!podUids.length) throw new KnitError('FAILED_PRECONDITION', `${what} is reserved for no pod (status.reservedFor)`);

  const configs = (alloc?.config ?? []).map((c, i) => ({ c, field: `${CONFIG_FIELD}[${i}].opaque.parameters` })).filter(({ c }) => c.opaque?.driver === driver);
  // Each config alone must be valid, so an error names the config it is in.
  const checked = configs.map(({ c, field }) => ({ c, field, ...rawParameters(c.opaque!.parameters, field) }));
  for (const { raw, field } of checked) parseDeviceParameters(raw, field);

  const devices: ClaimDevice[] = [];
  for (const [n, r] of (alloc?.results ?? []).entries()) {
    if (r.driver !== driver) continue; // a GPU of the same claim, say
    // Class config first, then the claim's own: later keys win (KEP-4381: claim config overrides).
    const mine = checked.filter(({ c }) => applies(c, r.request));
    const ordered = [...mine.filter(({ c }) => c.source !== 'FromClaim'), ...mine.filter(({ c }) => c.source === 'FromClaim')];
    const merged = Object.assign({}, ...ordered.map(({ raw }) => raw));
    const parameterFields: Record<string, string> = {};
    for (const { raw, fieldOf } of ordered) for (const key of Object.keys(raw)) parameterFields[key] = fieldOf(key);
    const field = ordered.length === 1 ? ordered[0]!.field : `${CONFIG_FIELD} (merged for request ${r.request})`;
    devices.push({
      request: r.request, pool: r.pool, device: r.device, parameters: parseDeviceParameters(merged, field),
      resultField: `status.allocation.devices.results[${n}]`, parameterFields,
    });
  }
  return { ref, podUids, devices };
}
