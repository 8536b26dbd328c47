// The sandbox manager: per-sandbox locks, idempotent attach, plans run under a journal,
// rollback on failure, detach that answers before the kernel's slow deletes.
import { EventEmitter } from 'node:events';
import type { Op, OpResult } from '../net/ops.js';
import type { InterfaceInput, NetworkSpec, PrepareContext, Strategy } from '../../runtimes/types.js';
import { KnitError, CniCode } from './errors.js';
import { KeyedLock } from './keyed-lock.js';
import { runSteps, undoSteps, StepFailed, type ActionRunner, type Failpoint } from './executor.js';
import { type InterfaceAllocation, type NetnsIdentity, type SandboxRecord } from './record.js';
import { allocateInterface, previewInterface, releaseInterfaces } from './addresses.js';
import { checkRecord } from './check.js';
import { sweepLeakedDevices } from './sweep.js';
import { DeviceClaims, type PrepareEnv } from './device-claims.js';
import type { Step } from './plan.js';
import type {
  AttachRequest, AttachResult, CheckReport, Extension, NodeStatus, RuntimeKind, SandboxRecordView, SandboxService, WatchEvent,
} from './types.js';

export interface RecordStorePort<T> {
  get(id: string): T | undefined;
  values(): Iterable<T>;
  put(id: string, doc: T): Promise<void>;
  remove(id: string): Promise<void>;
}

export interface IpamPort {
  allocate(network: string, family: 4 | 6, owner: string): { address: string; prefixLen: number; gateway?: string };
  /** What allocate would answer, taking nothing (knit plan). */
  preview(network: string, family: 4 | 6, owner: string): { address: string; prefixLen: number; gateway?: string };
  /** Holds a given address; answers it in canonical text. */
  reserve(network: string, address: string, owner: string): { address: string };
  release(owner: string): void;
  usage(network: string): { family: 4 | 6; subnet: string; size: number; used: number; free: number }[];
}

export interface NetnsPort {
  /** Throws KnitError INVALID_ARGUMENT naming netns_path when it is not a usable netns. */
  identify(path: string): NetnsIdentity;
}

export interface ExtensionsPort {
  list(): Extension[];
  register(ext: Extension): Promise<void>;
  unregister(name: string): Promise<void>;
  /** Calls every extension of the phase in order; throws when a required one fails. */
  notify(phase: Extension['phase'], result: AttachResult, req: AttachRequest): Promise<void>;
  missingRequired(): string[];
}

export interface ManagerHooks {
  /** Crash tests: fire before this step of every attach / this inverse of every detach. */
  attachFailpoint?: Failpoint;
  detachFailpoint?: Failpoint;
  onAttach?(sandboxId: string, ms: number, error?: KnitError): void;
  onDetach?(sandboxId: string, ms: number, error?: KnitError): void;
}

export interface ManagerDeps {
  networks(): Map<string, NetworkSpec>;
  defaultNetwork(): string;
  /** Networks whose host side could not be set up, with the reason. */
  unreadyNetworks(): Map<string, string>;
  records: RecordStorePort<SandboxRecord>;
  ipam: IpamPort;
  runner: ActionRunner;
  netns: NetnsPort;
  strategies: Partial<Record<RuntimeKind, Strategy>>;
  extensions: ExtensionsPort;
  reaper: { kick(): void };
  /** VM hand-off by fd: adds fresh one-time tokens to answers; forgets them on detach. */
  handoff?: { decorate(result: AttachResult): AttachResult; forget(sandboxId: string): void };
  hooks?: ManagerHooks;
  /** sysfs root for device attachments (config sysfsRoot; default '/sys'). */
  sysfsRoot?: () => string;
}

const sameRequest = (a: AttachRequest, b: AttachRequest) =>
  JSON.stringify({ ...a, labels: {}, annotations: {} }) === JSON.stringify({ ...b, labels: {}, annotations: {} });

export class SandboxManager implements SandboxService {
  private readonly locks = new KeyedLock();
  private readonly deviceClaims = new DeviceClaims();
  private readonly events = new EventEmitter();

  constructor(private readonly deps: ManagerDeps) {
    this.events.setMaxListeners(0);
  }

  // ---- attach --------------------------------------------------------------------------

  async attach(req: AttachRequest): Promise<AttachResult> {
    const started = performance.now();
    try {
      const result = await this.locks.run(req.sandboxId, () => this.attachLocked(req));
      this.deps.hooks?.onAttach?.(req.sandboxId, performance.now() - started);
      return this.deps.handoff?.decorate(result) ?? result;
    } catch (err) {
      const e = asKnitError(err);
      this.deps.hooks?.onAttach?.(req.sandboxId, performance.now() - started, e);
      throw e;
    }
  }

  private async attachLocked(req: AttachRequest): Promise<AttachResult> {
    const existing = this.deps.records.get(req.sandboxId);
    if (existing) {
      const same = sameRequest(existing.request, req);
      if (existing.state === 'attached' && same) return existing.result;
      throw new KnitError(
        'FAILED_PRECONDITION',
        `sandbox ${req.sandboxId} is already ${existing.state}${same ? '' : ' with a different request'} (netns ${existing.netns.path}); detach it first`,
        { field: 'sandbox_id' },
      );
    }
    const strategy = this.deps.strategies[req.runtime];
    if (!strategy) throw KnitError.invalid('runtime', `runtime ${req.runtime} is not available on this node`);
    refuseBandwidth(req);
    const networks = req.interfaces.map((ifc, i) => this.networkFor(ifc.network, i));

    const netns = this.deps.netns.identify(req.netnsPath);
    for (const otherId of this.sandboxesIn(netns)) {
      const other = this.deps.records.get(otherId);
      // nsfs inode numbers are reused once a netns is gone: only a live one is a conflict.
      if (other && this.deps.runner.netnsUsable(other.netns.path, other.netns)) {
        throw new KnitError('FAILED_PRECONDITION', `netns_path: ${req.netnsPath} is already attached as sandbox ${other.sandboxId}`, {
          field: 'netns_path',
        });
      }
    }

    const allocations: InterfaceAllocation[] = [];
    try {
      req.interfaces.forEach((ifc, i) => allocations.push(allocateInterface(this.deps.ipam, req.sandboxId, ifc, i, networks[i])));
    } catch (err) {
      releaseInterfaces(this.deps.ipam, req.sandboxId, allocations);
      throw err;
    }

    const holds = this.deviceClaims.holds(req.sandboxId, this.prepareEnv());
    try {
      return await this.planAndRun(req, strategy, networks, netns, allocations, holds.ctx);
    } finally {
      holds.release();
    }
  }

  private async planAndRun(
    req: AttachRequest, strategy: Strategy, networks: NetworkSpec[], netns: NetnsIdentity, allocations: InterfaceAllocation[], ctx: PrepareContext,
  ): Promise<AttachResult> {
    let built;
    try {
      built = await this.buildPlan(strategy, req, networks, allocations, ctx);
    } catch (err) {
      releaseInterfaces(this.deps.ipam, req.sandboxId, allocations);
      throw err;
    }
    const { steps, result } = built;
    const now = new Date().toISOString();
    const record: SandboxRecord = {
      version: 1, sandboxId: req.sandboxId, state: 'attaching', request: req, netns, allocations, steps, result, createdAt: now, updatedAt: now,
    };
    try {
      await this.deps.records.put(req.sandboxId, record); // the journal entry: written before any kernel change
      this.indexNetns(record, true);
    } catch (err) {
      releaseInterfaces(this.deps.ipam, req.sandboxId, allocations);
      throw new KnitError('INTERNAL', `cannot write the record of sandbox ${req.sandboxId}: ${(err as Error).message}`, { cniCode: CniCode.ioFailure });
    }

    let done = 0;
    try {
      await runSteps(steps, this.deps.runner, this.deps.hooks?.attachFailpoint);
      done = steps.length;
      await this.deps.extensions.notify('post-attach', result, req);
    } catch (err) {
      const failedAt = err instanceof StepFailed ? err.stepIndex : steps.length;
      const failure = attachError(err, req);
      await this.rollback(record, Math.max(done, failedAt)).catch((rb: KnitError) => {
        throw new KnitError('INTERNAL', `${failure.message}; then ${rb.message}`, { cause: failure });
      });
      throw failure;
    }
    try {
      await this.deps.records.put(req.sandboxId, { ...record, state: 'attached', updatedAt: new Date().toISOString() });
    } catch (err) {
      // Not recorded as attached means not attached: take it back rather than leave it half-known.
      await this.rollback(record, steps.length).catch(() => undefined);
      throw new KnitError('INTERNAL', `cannot record sandbox ${req.sandboxId} as attached: ${(err as Error).message}`, { cniCode: CniCode.ioFailure });
    }
    this.events.emit('event', { type: 'attach', sandboxId: req.sandboxId, result } satisfies WatchEvent);
    return result;
  }

  /** Sandbox ids by their netns identity, so the conflict check costs the same with 10 records
   * or 10,000. Built from the records on first use, then kept in step with every write. */
  private netnsIndex?: Map<string, Set<string>>;

  private sandboxesIn(id: { dev: number; ino: number }): Iterable<string> {
    if (!this.netnsIndex) {
      this.netnsIndex = new Map();
      for (const r of this.deps.records.values()) this.indexNetns(r, true);
    }
    return this.netnsIndex.get(`${id.dev}:${id.ino}`) ?? [];
  }

  private indexNetns(rec: SandboxRecord, present: boolean): void {
    if (!this.netnsIndex) return; // built lazily from the records, which already say it
    const key = `${rec.netns.dev}:${rec.netns.ino}`;
    const ids = this.netnsIndex.get(key) ?? new Set<string>();
    if (present) ids.add(rec.sandboxId);
    else ids.delete(rec.sandboxId);
    if (ids.size) this.netnsIndex.set(key, ids);
    else this.netnsIndex.delete(key);
  }

  private readonly bridgeOf = (network: string) => {
    const net = this.deps.networks().get(network);
    return net?.mode === 'bridge' ? net.bridge : undefined;
  };

  private networkFor(name: string | undefined, i: number): NetworkSpec {
    const networkName = name || this.deps.defaultNetwork();
    const net = this.deps.networks().get(networkName);
    if (!net) throw KnitError.invalid(`interfaces[${i}].network`, `no network named "${networkName}" on this node`);
    const unready = this.deps.unreadyNetworks().get(networkName);
    if (unready) throw new KnitError('UNAVAILABLE', `network ${networkName} is not ready: ${unready}`, { cniCode: CniCode.tryAgainLater });
    return net;
  }

  private prepareEnv(): PrepareEnv {
    return {
      runOps: (ns, ops) => this.deps.runner.runOps(ns, ops),
      sysfsRoot: this.deps.sysfsRoot?.() ?? '/sys',
      records: () => this.deps.records.values(),
    };
  }

  private async buildPlan(strategy: Strategy, req: AttachRequest, networks: NetworkSpec[], allocations: InterfaceAllocation[], ctx: PrepareContext) {
    const steps: Step[] = [];
    const result: AttachResult = { sandboxId: req.sandboxId, netnsPath: req.netnsPath, runtime: req.runtime, interfaces: [], ips: [], routes: [], dns: req.dns };
    for (const [i, iface] of req.interfaces.entries()) {
      const input: InterfaceInput = { sandboxId: req.sandboxId, netnsPath: req.netnsPath, request: req, iface, network: networks[i], addresses: allocations[i].addresses };
      if (strategy.prepare) input.prepared = await strategy.prepare(input, ctx);
      const plan = strategy.planInterface(input);
      const offset = result.interfaces.length;
      steps.push(...plan.steps);
      result.interfaces.push(...plan.interfaces);
      result.ips.push(...plan.ips.map((ip) => ({ ...ip, interface: ip.interface + offset })));
      result.routes.push(...plan.routes);
    }
    return { steps, result };
  }

  /** Takes back the first `count` steps and everything the record holds. */
  private async rollback(record: SandboxRecord, count: number): Promise<void> {
    const errors = await undoSteps(record.steps, count, this.deps.runner, 'retire', record.netns);
    this.deps.reaper.kick();
    if (errors.length) {
      // The record is the only copy of what to restore (a device's original name, MAC,
      // driver): keep it, with its addresses, for Detach or the next start to finish.
      throw new KnitError('INTERNAL', `rollback of ${record.sandboxId} is incomplete (${errors.join('; ')}); its record is kept: Detach or the next start finishes it`);
    }
    releaseInterfaces(this.deps.ipam, record.sandboxId, record.allocations);
    await this.deps.records.remove(record.sandboxId);
    this.indexNetns(record, false);
  }

  // ---- detach --------------------------------------------------------------------------

  async detach(sandboxId: string): Promise<void> {
    const started = performance.now();
    try {
      await this.locks.run(sandboxId, () => this.detachLocked(sandboxId));
      this.deps.hooks?.onDetach?.(sandboxId, performance.now() - started);
    } catch (err) {
      const e = asKnitError(err);
      this.deps.hooks?.onDetach?.(sandboxId, performance.now() - started, e);
      throw e;
    }
  }

  private async detachLocked(sandboxId: string): Promise<void> {
    const stored = this.deps.records.get(sandboxId);
    if (!stored) return; // idempotent: nothing of this sandbox is left
    if (stored.state === 'attached') {
      await this.deps.extensions.notify('pre-detach', stored.result, stored.request).catch(() => undefined);
    }
    // A copy: the store's object changes only once the write has succeeded.
    const record: SandboxRecord = { ...stored, state: 'detaching', updatedAt: new Date().toISOString() };
    await this.deps.records.put(sandboxId, record);
    const errors = await undoSteps(record.steps, record.steps.length, this.deps.runner, 'retire', record.netns, this.deps.hooks?.detachFailpoint);
    this.deps.reaper.kick();
    if (errors.length) {
      // The record stays 'detaching': a retry, or the next start-up, finishes the job.
      throw new KnitError('INTERNAL', `detach of ${sandboxId} is incomplete: ${errors.join('; ')}`);
    }
    releaseInterfaces(this.deps.ipam, sandboxId, record.allocations);
    await this.deps.records.remove(sandboxId);
    this.indexNetns(record, false);
    this.deps.handoff?.forget(sandboxId);
    this.events.emit('event', { type: 'detach', sandboxId } satisfies WatchEvent);
  }

  // ---- questions -----------------------------------------------------------------------

  async check(sandboxId: string): Promise<CheckReport> {
    const record = this.mustGet(sandboxId);
    return checkRecord(record, this.deps.runner, this.bridgeOf);
  }

  async query(sandboxId: string) {
    const record = this.mustGet(sandboxId);
    const live = await checkRecord(record, this.deps.runner, this.bridgeOf);
    const v = view(record);
    return { ...v, result: v.result && (this.deps.handoff?.decorate(v.result) ?? v.result), live };
  }

  async list(): Promise<SandboxRecordView[]> {
    return [...this.deps.records.values()].map(view);
  }

  async nodeStatus(): Promise<NodeStatus> {
    const unready = this.deps.unreadyNetworks();
    const networks = [...this.deps.networks().values()].map((n) => {
      const pools = this.deps.ipam.usage(n.name);
      return { name: n.name, mode: n.mode, ready: !unready.has(n.name), pools };
    });
    const missing = this.deps.extensions.missingRequired();
    const reasons = [
      ...[...unready].map(([n, why]) => `network ${n}: ${why}`),
      ...missing.map((m) => `required extension ${m} is not registered`),
    ];
    const exhausted = networks.flatMap((n) => n.pools.filter((p) => p.free === 0).map((p) => `${n.name} ${p.subnet}`));
    return {
      ready: reasons.length === 0,
      reason: reasons.length ? 'NetworkPluginNotReady' : '',
      message: [...reasons, ...exhausted.map((p) => `pool ${p} is exhausted`)].join('; '),
      schedulable: exhausted.length === 0,
      networks,
      sandboxes: [...this.deps.records.values()].filter((r) => r.state === 'attached').length,
    };
  }

  async garbageCollect(valid: { sandboxId: string; interface?: string }[]) {
    const keep = new Set(valid.map((v) => v.sandboxId));
    const removed: string[] = [];
    const errors: string[] = [];
    for (const rec of [...this.deps.records.values()]) {
      if (keep.has(rec.sandboxId)) continue;
      try {
        await this.detach(rec.sandboxId);
        removed.push(`sandbox ${rec.sandboxId}`);
      } catch (err) {
        errors.push(`sandbox ${rec.sandboxId}: ${(err as Error).message}`);
      }
    }
    try {
      const leaked = await sweepLeakedDevices(this.deps.runner, this.deps.records.values());
      removed.push(...leaked.map((name) => `device ${name} (tagged by knit, owned by no record)`));
      this.deps.reaper.kick();
    } catch (err) {
      errors.push(`device sweep: ${(err as Error).message}`);
    }
    return { removed, errors };
  }

  async plan(req: AttachRequest) {
    const strategy = this.deps.strategies[req.runtime];
    if (!strategy) throw KnitError.invalid('runtime', `runtime ${req.runtime} is not available on this node`);
    const networks = req.interfaces.map((ifc, i) => this.networkFor(ifc.network, i));
    // Show the addresses the pools would hand out next, without taking them.
    const allocations = req.interfaces.map((ifc, i) => previewInterface(this.deps.ipam, req.sandboxId, ifc, networks[i]));
    const { steps } = await this.buildPlan(strategy, req, networks, allocations, this.deviceClaims.holds(req.sandboxId, this.prepareEnv(), true).ctx);
    return { steps: steps.map((s) => ({ description: s.description, netns: s.netns, op: s.do, undo: s.undo })) };
  }

  watch(listener: (e: WatchEvent) => void): () => void {
    this.events.on('event', listener);
    return () => this.events.off('event', listener);
  }

  /** Events from outside core (link/address monitor) go to watchers too. */
  publish(e: WatchEvent): void {
    this.events.emit('event', e);
  }

  registerExtension(ext: Extension) { return this.deps.extensions.register(ext); }
  unregisterExtension(name: string) { return this.deps.extensions.unregister(name); }
  async listExtensions() { return this.deps.extensions.list(); }

  private mustGet(sandboxId: string): SandboxRecord {
    const record = this.deps.records.get(sandboxId);
    if (!record) throw new KnitError('NOT_FOUND', `sandbox ${sandboxId} is not attached on this node`, { field: 'sandbox_id', cniCode: CniCode.containerUnknown });
    return record;
  }
}

function view(r: SandboxRecord): SandboxRecordView {
  return { request: r.request, result: r.result, state: r.state, createdAt: r.createdAt };
}

export function asKnitError(err: unknown): KnitError {
  if (err instanceof KnitError) return err;
  return new KnitError('INTERNAL', (err as Error)?.message ?? String(err), { cause: err });
}

/** A kernel refusal during attach, said in terms of the request. */
function attachError(err: unknown, req: AttachRequest): KnitError {
  if (err instanceof KnitError) return err;
  if (err instanceof StepFailed) {
    // A plan action that already said what went wrong in API terms (a device claimed by another
    // sandbox, a non-viable IOMMU group) keeps its code.
    if (err.cause instanceof KnitError) return new KnitError(err.cause.code, err.message, { ...err.cause.details, cause: err });
    const code = (err.cause as { code?: string })?.code;
    if (code === 'EEXIST') return new KnitError('ALREADY_EXISTS', `${err.message} (in ${err.step.netns ?? 'the host netns'})`, { cause: err });
    return new KnitError('INTERNAL', err.message, { cause: err, cniCode: CniCode.ioFailure });
  }
  return asKnitError(err);
}

export type { Op, OpResult };

/** Bandwidth limits are accepted by the API but not yet enforced: say so instead of ignoring them. */
function refuseBandwidth(req: AttachRequest): void {
  const index = req.interfaces.findIndex((i) => i.bandwidth);
  if (index < 0) return;
  throw new KnitError('UNIMPLEMENTED', `interfaces[${index}].bandwidth: rate limits are not enforced by this knit yet`, {
    field: `interfaces[${index}].bandwidth`,
  });
}
