// The KNI POC service (proto/kni/api.proto) mapped onto core, so the KNI kubelet/containerd
// forks and libkni-era clients can talk to knit unchanged.
//
//   AttachInterface / AttachNetwork  -> attach: key = id; netns = isolation.path, else
//                                       extradata["netns"] (libkni reads only the latter, the
//                                       containerd fork sends only the former); one interface,
//                                       eth0, on the default network; runtime from
//                                       extradata["runtime"] (runc when absent)
//   DetachInterface / DetachNetwork  -> detach (a sandbox knit does not know is already detached)
//   QueryPodNetwork                  -> query -> ipconfigs {ifname: {ip[], mac}}; an empty answer
//                                       for a pod knit does not hold, as the POC answers
//   CreateNetwork / DeleteNetwork    -> createNetns / deleteNetns (core decides what it owns);
//                                       DeleteNetwork first detaches the sandbox it names (a
//                                       runtime that owns the netns may never call Detach),
//                                       once it has found nothing to refuse
// Errors name the KNI field the caller sent (asKniError), never the knit.v1 one it became.
// Pod IPs are bare addresses ("10.0.0.2"), as the POC server prints them: its kubelet parses
// each entry as an IP and its containerd copies it into the CRI pod IP.
//   SetupNodeNetwork                 -> nothing to do
//   QueryNodeNetworks                -> nodeStatus().networks
// Requests may name the pod by (name, namespace) instead of id where the POC allowed it.
import type * as grpc from '@grpc/grpc-js';
import { randomUUID } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { KnitError, quote, renameField } from '../base/errors.js';
import { isRuntimeKind, runtimeWireName } from '../base/runtime-kinds.js';
import type { AttachResult, SandboxService } from '../base/types.js';
import { unary } from './handler.js';
import type { Logger } from './logger.js';
import * as rules from './rules.js';
import { validateAttach, validateSandboxId } from './validate.js';
import { ipconfigsOf } from './wire.js';

export interface KniOptions {
  service: SandboxService;
  logger: Logger;
  /** Creates a pinned (bind-mounted) network namespace at path. From core/net. */
  createNetns?: (path: string) => Promise<void>;
  /**
   * Deletes a netns knit created. Given a netns path, or a bare sandbox id (no '/') when
   * neither the request nor a record names the path.
   */
  deleteNetns?: (idOrPath: string) => Promise<void>;
  /** Remembers that the sandbox lives in the netns at path, so DeleteNetwork{id} finds it later. */
  claimNetns?: (path: string, sandboxId: string) => Promise<void>;
  /** Whether knit pinned the netns at path (CreateNetwork). */
  isPinned?: (path: string) => boolean | Promise<boolean>;
  /** Where CreateNetwork pins namespaces when the request gives no prefix. */
  defaultNetnsDir: string;
}

interface Isolation {
  path: string;
  type: string;
  extradata: Record<string, string>;
}
interface KniPodRef {
  name: string;
  id: string;
  namespace: string;
}
type KniAttach = KniPodRef & {
  isolation: Isolation | null;
  dns_config: { servers: string[]; searches: string[]; options: string[] } | null;
  port_mappings: { protocol: string; container_port: number; host_port: number; host_ip: string }[];
  labels: Record<string, string>;
  annotations: Record<string, string>;
  extradata: Record<string, string>;
};
type KniDetach = KniPodRef & { isolation: Isolation | null; extradata: Record<string, string> };
type DeleteNetworkReq = KniPodRef & { netns_path: string; extradata: Record<string, string> };

/** knit.v1 field paths -> the KNI fields they were built from, for error messages. */
function kniFieldNamer(netnsFrom: string) {
  return (p: string): string =>
    p
      .replace(/^sandbox_id/, 'id')
      .replace(/^pod_name/, 'name')
      .replace(/^pod_namespace/, 'namespace')
      .replace(/^netns_path/, netnsFrom)
      .replace(/^runtime/, 'extradata["runtime"]')
      .replace(/^dns\.nameservers/, 'dns_config.servers')
      .replace(/^dns\.search/, 'dns_config.searches')
      .replace(/^dns\.options/, 'dns_config.options');
}

/** The fields of the KNI requests, as error paths start: what a KNI error may name. */
const KNI_FIELD = /^(\(request\)|id|name|namespace|uid|netns_path|netns_path_prefix|isolation\.path|dns_config\.|port_mappings|labels|annotations|extradata)(?![A-Za-z_])/;

/** A core error said to a KNI caller: about the KNI field the knit.v1 one was built from, or,
 * where the caller sent none (the network whose pool ran dry: KNI names no network), about no
 * field; the message says what it is about. */
function asKniError(err: unknown, netnsFrom: string): unknown {
  if (!(err instanceof KnitError)) return err;
  const renamed = renameField(err, kniFieldNamer(netnsFrom));
  const field = renamed.details.field;
  if (!field || KNI_FIELD.test(field)) return renamed;
  return new KnitError(renamed.code, renamed.message, { ...renamed.details, field: undefined });
}

function netnsOf(req: { isolation: Isolation | null; extradata: Record<string, string> }): { path: string; field: string } {
  if (req.isolation?.path) return { path: req.isolation.path, field: 'isolation.path' };
  if (req.extradata?.netns) return { path: req.extradata.netns, field: 'extradata["netns"]' };
  return { path: '', field: 'isolation.path' };
}

export function toKnitAttach(req: KniAttach) {
  const netns = netnsOf(req);
  const runtimeText = req.extradata?.runtime ?? '';
  const wire = {
    sandbox_id: req.id,
    pod_name: req.name,
    pod_namespace: req.namespace,
    pod_uid: '',
    netns_path: netns.path,
    runtime: runtimeText ? (isRuntimeKind(runtimeText) ? runtimeWireName(runtimeText) : runtimeText) : 'RUNTIME_UNSPECIFIED',
    interfaces: [{ name: 'eth0' }],
    port_mappings: (req.port_mappings ?? []).map((p) => ({ ...p, protocol: p.protocol || 'TCP' })),
    dns: req.dns_config
      ? { nameservers: req.dns_config.servers, search: req.dns_config.searches, options: req.dns_config.options, domain: '' }
      : null,
    labels: req.labels ?? {},
    annotations: req.annotations ?? {},
  };
  try {
    return validateAttach(wire as never, { rename: kniFieldNamer(netns.field) });
  } catch (err) {
    if (err instanceof KnitError && err.details.field === 'isolation.path' && !netns.path) {
      throw KnitError.invalid('isolation.path', 'is required (or extradata["netns"]): the pod network namespace');
    }
    throw err;
  }
}

function kniIpconfigs(result: AttachResult | undefined) {
  const out: Record<string, { ip: string[]; mac: string; extradata: Record<string, string> }> = {};
  if (!result) return out;
  for (const [name, cfg] of Object.entries(ipconfigsOf(result))) {
    out[name] = { ...cfg, ip: cfg.ip.map((cidr) => cidr.split('/')[0]), extradata: {} };
  }
  return out;
}

/** Why prefix cannot hold a netns file: it, or a path component, is something other than a
 * directory. A prefix that does not exist yet is fine: knit makes it. */
function notADirectory(prefix: string): string | undefined {
  try {
    const st = statSync(prefix, { throwIfNoEntry: false });
    return st && !st.isDirectory() ? `${quote(prefix)} is not a directory` : undefined;
  } catch (err) {
    return `${quote(prefix)} cannot hold a network namespace: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`;
  }
}

/** A name safe as one path component of a netns file: k8s names are DNS-1123, so this fits them. */
function netnsNamePart(field: string, v: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/.test(v)) {
    throw KnitError.invalid(field, `${quote(v)} cannot name a network namespace (1..100 of A-Z a-z 0-9 . _ -)`);
  }
  return v;
}

function netnsFileName(req: { name: string; namespace: string; uid?: string }): string {
  if (req.name) {
    const ns = req.namespace ? `${netnsNamePart('namespace', req.namespace)}-` : '';
    return `knit-${ns}${netnsNamePart('name', req.name)}`;
  }
  // The containerd "embedded" POC calls CreateNetwork{} with no pod identity at all.
  if (req.uid) return `knit-${netnsNamePart('uid', req.uid)}`;
  return `knit-${randomUUID()}`;
}

export function kniHandlers(opts: KniOptions): grpc.UntypedServiceImplementation {
  const { service, logger: log } = opts;
  const call = <Req, Res>(rpc: string, fn: (req: Req) => Promise<Res>) => unary<Req, Res>(`kni.${rpc}`, log, fn);

  /** The sandbox id a request names: id, or the newest record for (namespace, name). */
  async function sandboxIdOf(req: KniPodRef): Promise<string | undefined> {
    if (req.id) return validateSandboxId(req.id, 'id');
    if (!req.name) throw KnitError.invalid('id', 'is required (or name and namespace)');
    const matches = (await service.list())
      .filter((r) => r.request.podName === req.name && (r.request.podNamespace ?? '') === req.namespace)
      .sort((a, b) => b.createdAt.localeCompare(a.createdAt));
    return matches[0]?.request.sandboxId;
  }

  async function recordedNetns(id: string): Promise<string | undefined> {
    try {
      return (await service.query(id)).request.netnsPath;
    } catch (err) {
      if (err instanceof KnitError && err.code === 'NOT_FOUND') return undefined;
      throw err;
    }
  }

  const attach = call('AttachInterface', async (req: KniAttach) => {
    const knitReq = toKnitAttach(req);
    // Core's errors name knit.v1 fields (netns_path): say them as the KNI field the caller sent.
    const result = await service.attach(knitReq).catch((err) => {
      throw asKniError(err, netnsOf(req).field);
    });
    // The sandbox is attached by now: a failure to note the pin's owner must not turn that into
    // an error answer. Without the note, DeleteNetwork{id} after DetachInterface falls back to
    // the name CreateNetwork gave the netns; say so in the log.
    await opts.claimNetns?.(result.netnsPath, result.sandboxId).catch((err: Error) =>
      log.warn({ rpc: 'kni.AttachInterface', sandboxId: result.sandboxId, netns: result.netnsPath, err }, `cannot note the sandbox in knit's pinned netns: ${err.message}`),
    );
    return { ipconfigs: kniIpconfigs(result), extradata: { netns: result.netnsPath, sandbox_id: result.sandboxId } };
  });

  /** Detach, treating a sandbox knit does not hold as detached already (like CNI DEL). */
  async function detachQuietly(id: string, netnsPath?: string): Promise<void> {
    try {
      await service.detach(id, netnsPath);
    } catch (err) {
      if (!(err instanceof KnitError && err.code === 'NOT_FOUND')) throw err;
    }
  }

  const detach = call('DetachInterface', async (req: KniDetach) => {
    const id = await sandboxIdOf(req);
    if (!id) return {}; // nothing recorded for that pod: already detached
    const netns = netnsOf(req);
    if (netns.path) {
      const problem = rules.netnsPathProblem(netns.path);
      if (problem) throw KnitError.invalid(netns.field, problem);
    }
    // Core's guard names netns_path: say it as the field this caller sent the path in.
    await detachQuietly(id, netns.path || undefined).catch((err) => {
      throw asKniError(err, netns.field);
    });
    return {};
  });

  /** The sandboxes a DeleteNetwork names (by id, by name, or living in netns_path), each with
   * the netns path it was attached in. Reads only: nothing is detached here. */
  async function sandboxesOf(req: DeleteNetworkReq, id: string | undefined): Promise<Map<string, string>> {
    const ids = new Set<string>();
    if (id) ids.add(id);
    else if (req.name) {
      const named = await sandboxIdOf(req);
      if (named) ids.add(named);
    }
    if (req.netns_path) {
      for (const r of await service.list()) if (r.request.netnsPath === req.netns_path) ids.add(r.request.sandboxId);
    }
    const found = new Map<string, string>();
    for (const each of ids) {
      const netns = await recordedNetns(each);
      if (netns !== undefined) found.set(each, netns);
    }
    return found;
  }

  /** The netns a DeleteNetwork deletes, and the request field it came from (errors name that
   * field). As libkni: netns_path; else the netns recorded for the sandbox `id`; else the one
   * CreateNetwork named after (namespace, name); else the bare id (deleteNetns then decides
   * from what it remembers creating); else extradata["netns"]. */
  function deleteTarget(req: DeleteNetworkReq, id: string | undefined, recorded: string | undefined): { target: string; field: string } {
    const checkedPath = (field: string, value: string) => {
      const problem = rules.netnsPathProblem(value);
      if (problem) throw KnitError.invalid(field, problem);
      return { target: value, field };
    };
    if (req.netns_path) return checkedPath('netns_path', req.netns_path);
    if (id && recorded) return { target: recorded, field: 'id' };
    if (req.name) return { target: `${opts.defaultNetnsDir}/${netnsFileName(req)}`, field: 'name' };
    if (id) return { target: id, field: 'id' };
    if (req.extradata?.netns) return checkedPath('extradata["netns"]', req.extradata.netns);
    throw KnitError.invalid('id', 'is required (or netns_path, or name and namespace)');
  }

  return {
    AttachInterface: attach,
    AttachNetwork: attach,
    DetachInterface: detach,
    DetachNetwork: detach,

    QueryPodNetwork: call('QueryPodNetwork', async (req: KniPodRef) => {
      const id = await sandboxIdOf(req);
      const view = id ? await service.query(id).catch((err) => {
        if (err instanceof KnitError && err.code === 'NOT_FOUND') return undefined;
        throw err;
      }) : undefined;
      if (!view) return { ipconfigs: {}, extradata: {} };
      return {
        ipconfigs: kniIpconfigs(view.result),
        extradata: { netns: view.request.netnsPath, state: view.state, sandbox_id: id },
      };
    }),

    CreateNetwork: call(
      'CreateNetwork',
      async (req: { name: string; uid: string; namespace: string; netns_path_prefix: string }) => {
        if (!opts.createNetns) {
          throw new KnitError('FAILED_PRECONDITION', 'CreateNetwork: this knit daemon was started without network namespace creation');
        }
        const prefix = req.netns_path_prefix || opts.defaultNetnsDir;
        const problem = rules.absolutePathProblem(prefix);
        if (problem) throw KnitError.invalid('netns_path_prefix', problem);
        // knit pins (bind-mounts) namespaces only in its own netns directory, never where a
        // request points: a prefix elsewhere would have it create and mount on the host.
        const root = path.resolve(opts.defaultNetnsDir);
        const wanted = path.resolve(prefix);
        if (wanted !== root && !wanted.startsWith(`${root}/`)) {
          throw KnitError.invalid('netns_path_prefix', `${quote(prefix)} is outside knit's netns directory ${root}; knit pins namespaces only there`);
        }
        const notDir = notADirectory(prefix);
        if (notDir) throw KnitError.invalid('netns_path_prefix', notDir);
        const netnsPath = `${prefix === '/' ? '' : prefix}/${netnsFileName(req)}`;
        await opts.createNetns(netnsPath);
        return { netns_path: netnsPath, extradata: {} };
      },
    ),

    DeleteNetwork: call('DeleteNetwork', async (req: DeleteNetworkReq) => {
      if (!opts.deleteNetns) {
        throw new KnitError('FAILED_PRECONDITION', 'DeleteNetwork: this knit daemon was started without network namespace creation');
      }
      // Every refusal comes before the first change: the request is read in full and the netns
      // judged, then the sandboxes on it are detached, then the netns goes.
      const id = req.id ? validateSandboxId(req.id, 'id') : undefined;
      const sandboxes = await sandboxesOf(req, id);
      const { target, field } = deleteTarget(req, id, id ? sandboxes.get(id) : undefined);
      const named = (err: unknown) => {
        throw err instanceof KnitError ? renameField(err, (f) => (f === 'netns_path' ? field : f)) : err;
      };
      // A netns the runtime made is the runtime's to delete: once the network in it is gone
      // (its sandboxes detached), the answer is OK. One knit did not pin and no sandbox named
      // here lives in is refused now, before anything is detached.
      const runtimes = opts.isPinned !== undefined && target.startsWith('/') && !(await opts.isPinned(target));
      const ownedByRuntime = runtimes && [...sandboxes.values()].includes(target);
      if (runtimes && !ownedByRuntime && existsSync(target)) {
        throw new KnitError('FAILED_PRECONDITION', `${field}: knit did not create ${quote(target)}; it deletes only the namespaces its CreateNetwork pinned; nothing was detached`, { field });
      }
      // The sandboxes on that network go first: their devices, addresses and records.
      for (const each of sandboxes.keys()) await detachQuietly(each);
      if (ownedByRuntime) return {};
      await opts.deleteNetns(target).catch(named);
      return {};
    }),

    SetupNodeNetwork: call('SetupNodeNetwork', async () => ({})),

    QueryNodeNetworks: call('QueryNodeNetworks', async () => {
      const status = await service.nodeStatus();
      return {
        networks: status.networks.map((n) => ({
          name: n.name,
          ready: n.ready,
          extradata: { mode: n.mode, subnets: n.pools.map((p) => p.subnet).join(',') },
        })),
        extradata: {
          ready: String(status.ready),
          reason: status.reason,
          message: status.message,
          schedulable: String(status.schedulable),
        },
      };
    }),
  };
}
