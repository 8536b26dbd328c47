// knit.v1.Knit handlers: validate, call core's SandboxService, map the answer back.
import { Metadata, type ServerWritableStream, type UntypedServiceImplementation } from '@grpc/grpc-js';
import type { SandboxService, WatchEvent } from '../base/types.js';
import { unary } from './handler.js';
import { KNI_VERSION } from './version.js';
import type { Logger } from './logger.js';
import { toServiceError } from './status.js';
import { refuseMalformed } from './request-guard.js';
import { KnitError, renameField } from '../base/errors.js';
import { RUNTIME_KINDS } from '../base/runtime-kinds.js';
import { tryParseIp } from '../ipam/ip.js';
import {
  validateAddInterface,
  validateAttach,
  validateDetach,
  validateExtensionName,
  validateExtension,
  validateGarbageCollect,
  validateRemoveInterface,
  validateSandboxId,
} from './validate.js';
import {
  CNI_VERSION,
  extensionToWire,
  nodeStatusToWire,
  planToWire,
  podIpsOf,
  recordToWire,
  resultToWire,
  watchEventToWire,
} from './wire.js';

export { packageVersion, KNI_VERSION } from './version.js';

export interface VersionInfo {
  version: string;
  supportedCniVersions: string[];
}

/** ExplainPolicy, checked: each end a pod ("namespace/name") or an address. */
export interface PolicyQuestion {
  from: { pod: string } | { ip: string };
  to: { pod: string } | { ip: string };
  protocol: 'TCP' | 'UDP' | 'SCTP' | number;
  port?: number;
}

export interface PolicyAnswer {
  allowed: boolean;
  fromIp: string;
  toIp: string;
  egress: { pod?: string; allowed: boolean; selecting: string[]; allowedBy: { policy: string; rule: number }[]; why: string };
  ingress: PolicyAnswer['egress'];
}

function policyQuestion(req: Req): PolicyQuestion {
  const end = (field: 'from' | 'to') => {
    const v = String(req[field] ?? '');
    if (tryParseIp(v)) return { ip: v };
    if (/^[a-z0-9]([-a-z0-9]*[a-z0-9])?\/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(v)) return { pod: v };
    throw KnitError.invalid(field, `${JSON.stringify(v.slice(0, 64))} is neither namespace/pod nor an IP address`);
  };
  const proto = String(req.protocol || 'TCP').toUpperCase();
  let protocol: PolicyQuestion['protocol'];
  if (proto === 'TCP' || proto === 'UDP' || proto === 'SCTP') protocol = proto;
  else if (/^\d{1,3}$/.test(proto) && Number(proto) <= 255) protocol = Number(proto);
  else throw KnitError.invalid('protocol', `${JSON.stringify(proto.slice(0, 16))} is not TCP, UDP, SCTP or a protocol number`);
  const port = Number(req.port ?? 0);
  if (typeof protocol === 'string' && (port < 1 || port > 65535)) throw KnitError.invalid('port', `${protocol} needs a port (1-65535), not ${port}`);
  return { from: end('from'), to: end('to'), protocol, ...(typeof protocol === 'string' && { port }) };
}

const sideToWire = (s: PolicyAnswer['egress']) => ({ pod: s.pod ?? '', allowed: s.allowed, selecting: s.selecting, allowed_by: s.allowedBy, why: s.why });

// A watcher that stops reading must not make the daemon buffer events without bound.
const WATCH_MAX_BUFFERED = 10_000;

// The decoded request shapes are checked by validate.ts; here they are just records.
type Req = Record<string, unknown>;

export function knitHandlers(service: SandboxService, log: Logger, version: VersionInfo, explainPolicy?: (q: PolicyQuestion) => PolicyAnswer): UntypedServiceImplementation {
  const call = <T>(rpc: string, fn: (req: Req) => Promise<T>) => unary<Req, T>(rpc, log, fn);

  return {
    Attach: call('Attach', async (req) => {
      const result = await service.attach(validateAttach(req));
      return { result: resultToWire(result) };
    }),

    Detach: call('Detach', async (req) => {
      const { sandboxId, netnsPath } = validateDetach(req);
      await service.detach(sandboxId, netnsPath);
      return {};
    }),

    Check: call('Check', async (req) => {
      const report = await service.check(validateSandboxId(req.sandbox_id));
      return { ok: report.ok, differences: report.differences };
    }),

    Query: call('Query', async (req) => {
      const view = await service.query(validateSandboxId(req.sandbox_id));
      return {
        sandbox: recordToWire(view),
        live: { ok: view.live.ok, differences: view.live.differences },
        pod_ips: view.result ? podIpsOf(view.result) : [],
      };
    }),

    List: call('List', async () => ({ sandboxes: (await service.list()).map(recordToWire) })),

    NodeStatus: call('NodeStatus', async (req) => nodeStatusToWire(await service.nodeStatus({ checkNode: req.check_node === true }))),

    GarbageCollect: call('GarbageCollect', async (req) => {
      const gc = validateGarbageCollect(req);
      let valid = gc.valid;
      if (gc.keepRecorded) {
        // Every recorded sandbox counts as valid: only unrecorded leftovers go.
        const recorded = (await service.list()).map((r) => ({ sandboxId: r.request.sandboxId }));
        valid = [...valid, ...recorded];
      }
      const r = await service.garbageCollect(valid);
      return { removed: r.removed, errors: r.errors };
    }),

    Watch: (stream: ServerWritableStream<Req, unknown>) => watch(service, log, stream),

    ExplainPolicy: call('ExplainPolicy', async (req) => {
      const q = policyQuestion(req);
      if (!explainPolicy) throw new KnitError('FAILED_PRECONDITION', 'NetworkPolicy is not on in this knit\'s config (networkPolicy)');
      const a = explainPolicy(q);
      return { allowed: a.allowed, from_ip: a.fromIp, to_ip: a.toIp, egress: sideToWire(a.egress), ingress: sideToWire(a.ingress) };
    }),

    Plan: call('Plan', async (req) => {
      if (req.add_interface && req.attach) throw KnitError.invalid('add_interface', 'give attach or add_interface, not both');
      // Core's errors name fields of the request inside PlanRequest: say where the caller put them.
      const within = (prefix: string) => (err: unknown) => {
        throw err instanceof KnitError ? renameField(err, (f) => prefix + f) : err;
      };
      if (req.add_interface) {
        const add = validateAddInterface(req.add_interface, { prefix: 'add_interface.' });
        return planToWire(await service.planAddInterface(add.sandboxId, add.iface).catch(within('add_interface.')));
      }
      const attach = validateAttach(req.attach as never, { prefix: 'attach.' });
      return planToWire(await service.plan(attach).catch(within('attach.')));
    }),

    AddInterface: call('AddInterface', async (req) => {
      const { sandboxId, iface } = validateAddInterface(req);
      return { result: resultToWire(await service.addInterface(sandboxId, iface)) };
    }),

    RemoveInterface: call('RemoveInterface', async (req) => {
      const { sandboxId, name } = validateRemoveInterface(req);
      await service.removeInterface(sandboxId, name);
      return {};
    }),

    RegisterExtension: call('RegisterExtension', async (req) => {
      await service.registerExtension(validateExtension(req.extension));
      return {};
    }),

    UnregisterExtension: call('UnregisterExtension', async (req) => {
      await service.unregisterExtension(validateExtensionName(req.name));
      return {};
    }),

    ListExtensions: call('ListExtensions', async () => ({
      extensions: (await service.listExtensions()).map(extensionToWire),
    })),

    Version: call('Version', async () => ({
      version: version.version,
      api_version: 'knit.v1',
      cni_version: CNI_VERSION,
      supported_cni_versions: version.supportedCniVersions,
      kni_version: KNI_VERSION,
      runtimes: [...RUNTIME_KINDS],
    })),
  };
}

function watch(service: SandboxService, log: Logger, stream: ServerWritableStream<Req, unknown>): void {
  let sandboxId = '';
  let stop: (() => void) | undefined;
  let done = false;
  const finish = () => {
    if (done) return;
    done = true;
    stop?.();
  };
  stream.on('cancelled', finish);
  stream.on('close', finish);
  stream.on('error', finish);
  stream.on('finish', finish);
  try {
    refuseMalformed(stream.request);
    if (stream.request.sandbox_id) sandboxId = validateSandboxId(stream.request.sandbox_id);
    stop = service.watch((e: WatchEvent) => {
      if (done) return;
      if (sandboxId && !('sandboxId' in e && e.sandboxId === sandboxId)) return;
      if (stream.writableLength > WATCH_MAX_BUFFERED) {
        finish();
        stream.emit(
          'error',
          toServiceError(new KnitError('RESOURCE_EXHAUSTED', `watch client fell more than ${WATCH_MAX_BUFFERED} events behind`), log, 'Watch'),
        );
        return;
      }
      stream.write(watchEventToWire(e));
    });
    if (done) stop(); // cancelled while subscribing
    // Headers now tell the client it is subscribed: whatever it does after seeing them (an
    // Attach, say) is reported on this stream. grpc-js would otherwise hold them back until
    // the first event.
    else stream.sendMetadata(new Metadata());
  } catch (err) {
    finish();
    stream.emit('error', toServiceError(err, log, 'Watch'));
  }
}
