// The sandbox manager: per-sandbox locks, idempotent attach, plans run under a journal,
// rollback on failure, detach that answers before the kernel's slow deletes. What it needs from
// the daemon is in ports.ts; node status, GC and the netns index have files of their own.
import { EventEmitter } from 'node:events';
import type { Op, OpResult } from '../base/ops.js';
import type { InterfacePart, NetworkSpec, PrepareContext, Strategy } from '../base/strategy.js';
import type { Step } from '../base/plan.js';
import { KnitError, CniCode, asKnitError, quote } from '../base/errors.js';
import { KeyedLock } from './keyed-lock.js';
import { runSteps, undoSteps, StepFailed, planRunError } from './executor.js';
import { recordVersionFor, type InterfaceAllocation, type NetnsIdentity, type SandboxRecord } from './record.js';
import { allocateInterface, previewInterface, releaseInterfaces } from './addresses.js';
import { checkRecord } from './check.js';
import { garbageCollect, type ValidAttachment } from './gc.js';
import { NetnsIndex } from './netns-index.js';
import { parksIn } from './reaper.js';
import { GoneNetnsSweeper, runsLow } from './gone-netns.js';
import { nodeStatus } from './node-status.js';
import type { ManagerDeps, NetnsRelation } from './ports.js';
import type { PreparedPut } from '../store/record-store.js';
import { checkHostPorts, heldHostPorts, planHostPorts, publishedPorts, refuseHostPortConflicts } from './host-ports.js';
import { checkChains, displaySteps, hasChain, withChainParts } from './cni-steps.js';
import { DeviceClaims, type PrepareEnv } from './device-claims.js';
import { composeResult, defaultRouteIndex, planInterfaces } from './interface-plans.js';
import { addInterface, attachedRequest, planAddInterface, removeInterface, type HotplugContext } from './hotplug.js';
import type {
  AttachRequest, AttachResult, AttachmentChain, CheckReport, Extension, InterfaceRequest, NodeStatus, SandboxRecordView, SandboxService, WatchEvent,
} from '../base/types.js';

const attachedRecord = (journal: SandboxRecord, result: AttachResult, parts: SandboxRecord['parts']): SandboxRecord =>
  ({ ...journal, result, parts, state: 'attached', updatedAt: new Date().toISOString() });

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
      const same = sameRequest(attachedRequest(existing), req);
      if (existing.state === 'attached' && same) return existing.result;
      throw new KnitError(
        'FAILED_PRECONDITION',
        `sandbox_id: sandbox ${req.sandboxId} is already ${existing.state}${same ? '' : ' with a different request'} (netns ${existing.netns.path}); detach it first`,
        { field: 'sandbox_id' },
      );
    }
    let admitted;
    try {
      admitted = this.admitAndAllocate(req);
    } catch (err) {
      // A pool ran dry: sandboxes whose netns is gone may hold addresses. Sweep them now rather
      // than at the next timer, and try once more if that freed anything.
      if (!(err instanceof KnitError && err.code === 'RESOURCE_EXHAUSTED')) throw err;
      if (!(await this.reapGoneNetns('pool-exhausted')).length) throw err;
      admitted = this.admitAndAllocate(req);
    }
    const { strategy, networks, publishes, netns, allocations } = admitted;
    // Only networks with pools of knit's (not a CNI chain's, not a device network without subnets).
    if (networks.some((n) => n.mode !== 'cni' && (n.ipv4 || n.ipv6) && this.deps.ipam.usage(n.name).some(runsLow))) this.goneSweeper.poolLow();

    const holds = this.deviceClaims.holds(req.sandboxId, this.prepareEnv());
    // Claimed until the record (which then holds them) is written or the attach gave up: a
    // concurrent attach of another sandbox sees them either way.
    if (publishes) this.hostPortClaims.set(req.sandboxId, req.portMappings);
    try {
      return await this.planAndRun(req, strategy, networks, netns, allocations, holds.ctx);
    } finally {
      holds.release();
      this.hostPortClaims.delete(req.sandboxId);
    }
  }

  /** admit's checks, then every interface's addresses (or none), with nothing awaited between. */
  private admitAndAllocate(req: AttachRequest) {
    const admitted = this.admit(req);
    const allocations: InterfaceAllocation[] = [];
    try {
      req.interfaces.forEach((ifc, i) => allocations.push(allocateInterface(this.deps.ipam, req.sandboxId, ifc, i, admitted.networks[i])));
    } catch (err) {
      releaseInterfaces(this.deps.ipam, req.sandboxId, allocations);
      throw err;
    }
    return { ...admitted, allocations };
  }

  /**
   * Everything attach refuses before it takes anything, and all that plan checks: one path, so
   * a plan answers OK only for a request attach would accept. Synchronous, so nothing another
   * attach does can come between these checks and attach's allocations.
   */
  private admit(req: AttachRequest) {
    const strategy = this.deps.strategies[req.runtime];
    if (!strategy) throw KnitError.invalid('runtime', `runtime ${req.runtime} is not available on this node`);
    refuseBandwidth(req.interfaces);
    const networks = req.interfaces.map((ifc, i) => this.networkFor(ifc, i));
    const publishes = publishesHostPorts(req, networks[defaultRouteIndex(req.interfaces)]);
    if (publishes) refuseHostPortConflicts(req.sandboxId, req.portMappings, this.hostPortHolders());
    // Static addresses as the pools would take them (previewInterface holds nothing). A pool's
    // next address is not looked up here: attach takes it right after, plan previews it itself.
    req.interfaces.forEach((ifc, i) => {
      if (ifc.ips?.length) previewInterface(this.deps.ipam, req.sandboxId, ifc, i, networks[i]);
    });

    const netns = this.deps.netns.identify(req.netnsPath);
    for (const otherId of this.netnsIndex.sandboxesIn(netns)) {
      if (otherId === req.sandboxId) continue; // plan of an attached sandbox (attach answers it earlier)
      const other = this.deps.records.get(otherId);
      // nsfs inode numbers are reused once a netns is gone: only a live one is a conflict.
      if (other && this.deps.runner.netnsUsable(other.netns.path, other.netns)) {
        throw new KnitError('FAILED_PRECONDITION', `netns_path: ${req.netnsPath} is already attached as sandbox ${other.sandboxId}`, {
          field: 'netns_path',
        });
      }
    }
    return { strategy, networks, publishes, netns };
  }

  /** Host ports being attached right now, by sandbox: not yet in a record. */
  private readonly hostPortClaims = new Map<string, AttachRequest['portMappings']>();

  private *hostPortHolders(): Iterable<{ sandboxId: string; mappings: AttachRequest['portMappings'] }> {
    for (const [sandboxId, mappings] of this.hostPortClaims) yield { sandboxId, mappings };
    for (const rec of this.deps.records.values()) yield heldHostPorts(rec);
  }

  /** route_localnet of a shared device (the bridge) before knit's first host port set it: a
   * record that already set it knows; otherwise it is the value now. */
  private async localnetOriginal(device: string): Promise<string> {
    for (const rec of this.deps.records.values()) {
      for (const s of rec.steps) if (s.undo?.op === 'localnet.restore' && s.undo.device === device) return s.undo.value;
    }
    const [{ value = '0' }] = await this.deps.runner.runOps(undefined, [{ op: 'sysctl.get', key: `net.ipv4.conf.${device}.route_localnet` }]);
    return value.trim();
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
    const { steps, result: planned, parts: plannedParts } = built;
    const now = new Date().toISOString();
    const record: SandboxRecord = {
      version: recordVersionFor(steps), sandboxId: req.sandboxId, state: 'attaching', request: req, netns, allocations, steps, result: planned, parts: plannedParts, createdAt: now, updatedAt: now,
    };
    try {
      await this.deps.records.put(req.sandboxId, record); // the journal entry: written before any kernel change
      this.netnsIndex.update(record, true);
    } catch (err) {
      releaseInterfaces(this.deps.ipam, req.sandboxId, allocations);
      throw new KnitError('INTERNAL', `cannot write the record of sandbox ${req.sandboxId}: ${(err as Error).message}`, { cniCode: CniCode.ioFailure });
    }

    let done = 0;
    let result = planned;
    let parts = plannedParts;
    let attachedWrite: PreparedPut | undefined;
    try {
      const running = runSteps(steps, this.deps.runner, this.deps.hooks?.attachFailpoint);
      // Without a CNI chain the plan's result is the answer, so the 'attached' record is
      // serialized while the first batch is with the kernel and the JS thread would only wait.
      if (!hasChain(steps)) attachedWrite = this.deps.records.prepare?.(req.sandboxId, attachedRecord(record, result, parts));
      const outcomes = await running;
      done = steps.length;
      // A CNI chain's interfaces, addresses and routes are known only now.
      parts = withChainParts(plannedParts, steps, outcomes);
      if (parts !== plannedParts) result = composeResult(req, parts, req.interfaces[defaultRouteIndex(req.interfaces)].name);
      await this.deps.extensions.notify('post-attach', result, req);
    } catch (err) {
      const failedAt = err instanceof StepFailed ? err.stepIndex : steps.length;
      const failure = planRunError(err);
      await this.rollback(record, Math.max(done, failedAt)).catch((rb: KnitError) => {
        throw new KnitError('INTERNAL', `${failure.message}; then ${rb.message}`, { cause: failure });
      });
      throw failure;
    }
    try {
      await (attachedWrite?.commit() ?? this.deps.records.put(req.sandboxId, attachedRecord(record, result, parts)));
    } catch (err) {
      // Not recorded as attached means not attached: take it back rather than leave it half-known.
      await this.rollback(record, steps.length).catch(() => undefined);
      throw new KnitError('INTERNAL', `cannot record sandbox ${req.sandboxId} as attached: ${(err as Error).message}`, { cniCode: CniCode.ioFailure });
    }
    this.events.emit('event', { type: 'attach', sandboxId: req.sandboxId, result } satisfies WatchEvent);
    return result;
  }

  /** Sandbox ids by their netns identity (netns-index.ts). */
  private readonly netnsIndex = new NetnsIndex(() => this.deps.records.values());

  private readonly networkOf = (network: string) => this.deps.networks().get(network);

  private networkFor(ifc: InterfaceRequest, i: number): NetworkSpec {
    const chain = ifc.attachment?.chain;
    if (chain) return attachmentNetwork(ifc.attachment!.name, chain);
    const networkName = ifc.network || this.deps.defaultNetwork();
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
      ...(this.deps.danDir && { danDir: this.deps.danDir() }),
      ...(this.deps.pathExists && { pathExists: this.deps.pathExists }),
      records: () => this.deps.records.values(),
    };
  }

  private async buildPlan(strategy: Strategy, req: AttachRequest, networks: NetworkSpec[], allocations: InterfaceAllocation[], ctx: PrepareContext) {
    const dflt = defaultRouteIndex(req.interfaces);
    const { steps, parts } = await planInterfaces(strategy, req, req.interfaces.map((_, i) => i), networks, allocations, ctx, dflt);
    // The pod is in the policy table before its first interface exists: isolated from its first packet.
    const admit = this.policyAdmit(req, networks[dflt], allocations[dflt]);
    if (admit) steps.unshift(admit);
    if (publishesHostPorts(req, networks[dflt])) steps.push(...(await this.planHostPorts(req, networks[dflt], allocations[dflt], parts[dflt])));
    return { steps, parts, result: composeResult(req, parts, req.interfaces[dflt].name) };
  }

  /** The NetworkPolicy step of a Kubernetes pod (it has a namespace and a name) whose default
   * interface is on an enforced network with addresses of knit's: the pod's addresses into
   * the policy table, undone by taking them out (docs/network-policy.md). */
  private policyAdmit(req: AttachRequest, network: NetworkSpec, allocation: InterfaceAllocation): Step | undefined {
    const ips = allocation.addresses.map((a) => a.address);
    if (!this.deps.policy?.enforces(network.name) || !req.podNamespace || !req.podName || !ips.length) return undefined;
    return {
      description: `NetworkPolicy for pod ${req.podNamespace}/${req.podName} (${ips.join(', ')}) in place before its interface exists`,
      do: { op: 'policy.admit', sandboxId: req.sandboxId, namespace: req.podNamespace, name: req.podName, ips },
      undo: { op: 'policy.release', sandboxId: req.sandboxId, ignoreMissing: true },
      iface: allocation.ifname,
    };
  }

  /** Host ports go to the addresses of the interface with the default route (the one a CNI
   * chain gets them on, and one RemoveInterface never takes away). 127.0.0.1 DNAT leaves by
   * the bridge, or by the routed pod's own host veth. */
  private async planHostPorts(req: AttachRequest, network: NetworkSpec, allocation: InterfaceAllocation, part: InterfacePart) {
    const address = (f: 4 | 6) => allocation.addresses.find((a) => a.family === f)?.address;
    const hostEnd = part.interfaces.find((i) => !i.sandbox)?.name;
    const device = network.mode === 'bridge' ? network.bridge! : hostEnd;
    if (!device) throw KnitError.invalid('port_mappings', `runtime ${req.runtime} leaves no host device on ${network.name} to publish host ports through`);
    const original = network.mode === 'bridge' ? await this.localnetOriginal(device) : undefined;
    const hairpinPort = network.mode === 'bridge' && !network.hairpin ? hostEnd : undefined;
    return planHostPorts({ sandboxId: req.sandboxId, mappings: req.portMappings, pod4: address(4), pod6: address(6), localnet: { device, original }, hairpinPort });
  }

  /** Takes back the first `count` steps and everything the record holds. */
  private async rollback(record: SandboxRecord, count: number): Promise<void> {
    const errors = await undoSteps(record.steps, count, this.deps.runner, 'retire', record.netns);
    const parked = parksIn(record.steps.slice(0, count), record.netns);
    this.deps.reaper.kick(parked);
    // A device parked in the netns is known only to this record: keep it until the reaper is done.
    if (parked && !errors.length) await this.deps.reaper.whenReaped();
    if (errors.length) {
      // The record is the only copy of what to restore (a device's original name, MAC,
      // driver): keep it, with its addresses, for Detach or the next start to finish.
      throw new KnitError('INTERNAL', `rollback of ${record.sandboxId} is incomplete (${errors.join('; ')}); its record is kept: Detach or the next start finishes it`);
    }
    releaseInterfaces(this.deps.ipam, record.sandboxId, record.allocations);
    await this.deps.records.remove(record.sandboxId);
    this.netnsIndex.update(record, false);
  }

  // ---- interfaces added to and removed from an attached sandbox ----------------------

  private hotplug(): HotplugContext {
    return {
      records: this.deps.records,
      ipam: this.deps.ipam,
      runner: this.deps.runner,
      reaper: this.deps.reaper,
      strategy: (runtime) => {
        const s = this.deps.strategies[runtime];
        if (!s) throw KnitError.invalid('runtime', `runtime ${runtime} is not available on this node`);
        return s;
      },
      network: (ifc, i) => this.networkFor(ifc, i),
      holds: (id, readOnly) => this.deviceClaims.holds(id, this.prepareEnv(), readOnly),
      addFailpoint: this.deps.hooks?.addInterfaceFailpoint,
      removeFailpoint: this.deps.hooks?.removeInterfaceFailpoint,
    };
  }

  async addInterface(sandboxId: string, iface: InterfaceRequest): Promise<AttachResult> {
    refuseBandwidth([iface], 'interface');
    const { result, changed } = await this.locks.run(sandboxId, () => addInterface(this.hotplug(), sandboxId, iface));
    if (changed) this.events.emit('event', { type: 'interface-added', sandboxId, result } satisfies WatchEvent);
    return this.deps.handoff?.decorate(result) ?? result;
  }

  async removeInterface(sandboxId: string, name: string): Promise<void> {
    const result = await this.locks.run(sandboxId, () => removeInterface(this.hotplug(), sandboxId, name));
    if (result) this.events.emit('event', { type: 'interface-removed', sandboxId, result } satisfies WatchEvent);
  }

  async planAddInterface(sandboxId: string, iface: InterfaceRequest) {
    refuseBandwidth([iface], 'interface');
    return planAddInterface(this.hotplug(), sandboxId, iface);
  }

  // ---- detach --------------------------------------------------------------------------

  /** netnsPath, when the caller gives one, must not name another live namespace, the host's
   * included: a caller that says where the sandbox is and is wrong is told so, instead of a
   * sandbox being detached that it did not mean. A path with no live namespace behind it (the
   * pod's netns already deleted, the usual order for runtimes) does not stand in the way. */
  async detach(sandboxId: string, netnsPath?: string): Promise<void> {
    const started = performance.now();
    try {
      // Answered once the devices are inert; the lock is held until the record is gone.
      await new Promise<void>((answer, fail) => {
        this.locks.run(sandboxId, () => this.detachLocked(sandboxId, netnsPath, answer)).then(answer, fail);
      });
      this.deps.hooks?.onDetach?.(sandboxId, performance.now() - started);
    } catch (err) {
      const e = asKnitError(err);
      this.deps.hooks?.onDetach?.(sandboxId, performance.now() - started, e);
      throw e;
    }
  }

  /** knit's own detach of a sandbox found with its netns gone (gone-netns.ts), under its lock. */
  private async reapGone(found: SandboxRecord, trigger: string): Promise<boolean> {
    // A sandbox with an operation under way is left to the next sweep. Waiting for its lock could
    // wait forever: an attach that holds it may itself be waiting for this sweep (pool-exhausted).
    if (this.locks.busy(found.sandboxId)) return false;
    try {
      const reaped = await this.locks.run(found.sandboxId, async () => {
        const now = this.deps.records.get(found.sandboxId);
        // Detached meanwhile, or detached and attached anew (in a namespace that may reuse the
        // gone one's inode): not the sandbox that was found gone.
        if (!now || now.createdAt !== found.createdAt || now.state === 'attaching') return false;
        await this.detachLocked(found.sandboxId, undefined, () => {}, 'netns-gone');
        return true;
      });
      if (reaped) this.deps.hooks?.onReaped?.(found.sandboxId, found.netns, trigger);
      return reaped;
    } catch (err) {
      this.deps.hooks?.onReaped?.(found.sandboxId, found.netns, trigger, asKnitError(err));
      throw err;
    }
  }

  private readonly goneSweeper = new GoneNetnsSweeper(
    () => {
      const gone = this.deps.netns.goneChecker();
      // An 'attaching' record is an attach in flight (start-up rolled back the crashed ones).
      return [...this.deps.records.values()].filter((r) => r.state !== 'attaching' && gone(r.netns));
    },
    (rec, trigger) => this.reapGone(rec, trigger),
    (trigger) => this.deps.hooks?.onGoneNetnsSweep?.(trigger),
  );

  /** Detaches every sandbox whose netns is gone; answers their ids. `trigger` is for the log. */
  reapGoneNetns(trigger: string): Promise<string[]> {
    return this.goneSweeper.sweep(trigger);
  }

  /** Sandboxes whose Detach has answered while the reaper still deletes their parked devices. */
  private readonly answeredDetaches = new Set<string>();

  /** Detaches under the sandbox's lock; `answer` is called as soon as the devices are inert. */
  private async detachLocked(sandboxId: string, netnsPath: string | undefined, answer: () => void, reason?: 'netns-gone'): Promise<void> {
    const stored = this.deps.records.get(sandboxId);
    if (!stored) return; // idempotent: nothing of this sandbox is left
    if (netnsPath && netnsPath !== stored.netns.path) refuseOtherNetns(this.deps.netns.relation(netnsPath, stored.netns), netnsPath, stored);
    if (stored.state === 'attached') {
      await this.deps.extensions.notify('pre-detach', stored.result, stored.request).catch(() => undefined);
    }
    // A copy: the store's object changes only once the write has succeeded.
    const record: SandboxRecord = { ...stored, state: 'detaching', updatedAt: new Date().toISOString() };
    await this.deps.records.put(sandboxId, record);
    const errors = await undoSteps(record.steps, record.steps.length, this.deps.runner, 'retire', record.netns, this.deps.hooks?.detachFailpoint);
    const parked = parksIn(record.steps, record.netns);
    this.deps.reaper.kick(parked);
    if (errors.length) {
      // The record stays 'detaching': a retry, or the next start-up, finishes the job.
      throw new KnitError('INTERNAL', `detach of ${sandboxId} is incomplete: ${errors.join('; ')}`);
    }
    releaseInterfaces(this.deps.ipam, sandboxId, record.allocations);
    this.netnsIndex.update(record, false);
    this.deps.handoff?.forget(sandboxId);
    if (parked) {
      // Every device is down, renamed and in the reap group: answer now, as a runc detach does,
      // instead of after the kernel's deletes. The 'detaching' record is the only note of the
      // devices parked inside the netns, so it goes once the reaper has deleted them; a crash
      // before that finishes the detach at start-up (recovery.ts). The lock stays held meanwhile,
      // and Query and List already answer as if the record were gone: for the caller it is.
      this.answeredDetaches.add(sandboxId);
      answer();
      await this.deps.reaper.whenReaped().finally(() => this.answeredDetaches.delete(sandboxId));
    }
    await this.deps.records.remove(sandboxId);
    this.events.emit('event', { type: 'detach', sandboxId, ...(reason && { reason }) } satisfies WatchEvent);
  }

  // ---- questions -----------------------------------------------------------------------

  async check(sandboxId: string): Promise<CheckReport> {
    const record = this.mustGet(sandboxId);
    return this.compare(record);
  }

  /** The record against the kernel, plus each CNI chain's own CHECK. */
  private async compare(record: SandboxRecord): Promise<CheckReport> {
    const report = await checkRecord(record, this.deps.runner, this.networkOf);
    if (record.state !== 'attached') return report;
    const differences = [...report.differences, ...(await checkHostPorts(record, this.deps.runner)), ...(await checkChains(record.steps))];
    return { ok: differences.length === 0, differences };
  }

  async query(sandboxId: string) {
    const record = this.mustGet(sandboxId);
    const live = await this.compare(record);
    return { ...this.decorated(view(record)), live };
  }

  lookup(sandboxId: string, opts: { tokens?: boolean } = {}): SandboxRecordView | undefined {
    const record = this.found(sandboxId);
    if (!record) return undefined;
    return opts.tokens ? this.decorated(view(record)) : view(record);
  }

  private decorated(v: SandboxRecordView): SandboxRecordView {
    return { ...v, result: v.result && (this.deps.handoff?.decorate(v.result) ?? v.result) };
  }

  async list(): Promise<SandboxRecordView[]> {
    return [...this.deps.records.values()].filter((r) => !this.answeredDetaches.has(r.sandboxId)).map(view);
  }

  nodeStatus(opts?: { checkNode?: boolean }): Promise<NodeStatus> {
    return nodeStatus(this.deps, opts);
  }

  garbageCollect(valid: ValidAttachment[]) {
    return garbageCollect(
      { ...this.deps, detach: (id: string) => this.detach(id), removeInterface: (id: string, name: string) => this.removeInterface(id, name) },
      valid,
    );
  }

  async plan(req: AttachRequest) {
    const { strategy, networks } = this.admit(req);
    // Show the addresses the pools would hand out next, without taking them.
    const allocations = req.interfaces.map((ifc, i) => previewInterface(this.deps.ipam, req.sandboxId, ifc, i, networks[i]));
    const { steps } = await this.buildPlan(strategy, req, networks, allocations, this.deviceClaims.holds(req.sandboxId, this.prepareEnv(), true).ctx);
    return { steps: displaySteps(steps) };
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

  /** The record, unless its Detach has answered: for the caller it is gone. */
  private found(sandboxId: string): SandboxRecord | undefined {
    return this.answeredDetaches.has(sandboxId) ? undefined : this.deps.records.get(sandboxId);
  }

  private mustGet(sandboxId: string): SandboxRecord {
    const record = this.found(sandboxId);
    if (!record) throw new KnitError('NOT_FOUND', `sandbox ${sandboxId} is not attached on this node`, { field: 'sandbox_id', cniCode: CniCode.containerUnknown });
    return record;
  }
}

/** Detach's guard (see detach): namespaces compared by (dev, inode), never by path, so a bind
 * mount or a symlink of the host's namespace is the host's. */
function refuseOtherNetns(relation: NetnsRelation, netnsPath: string, stored: SandboxRecord): void {
  if (relation === 'same' || relation === 'none') return;
  const theirs = `sandbox ${stored.sandboxId}'s (${stored.netns.path})`;
  const why =
    relation === 'host' ? `is the host's network namespace (or knit's own), not ${theirs}`
    : relation === 'other' ? `is another network namespace, not ${theirs}`
    : `cannot be opened, so knit cannot tell whether it is ${theirs}`;
  throw KnitError.invalid('netns_path', `${quote(netnsPath)} ${why}; nothing was detached`);
}

function view(r: SandboxRecord): SandboxRecordView {
  return { request: r.request, result: r.result, state: r.state, createdAt: r.createdAt };
}

export type { Op, OpResult };

/** Host ports on knit's own networks are knit's to publish (src/core/host-ports.ts); a CNI
 * network's chain publishes them with its portmap plugin. */
function publishesHostPorts(req: AttachRequest, network: NetworkSpec): boolean {
  return network.mode !== 'cni' && publishedPorts(req.portMappings).length > 0;
}

/** The network of an interface a pod's annotation asked for: the definition's CNI chain as
 * recorded at ADD (NetworkAttachment.chain), never a network of knit's config. */
function attachmentNetwork(name: string, chain: AttachmentChain): NetworkSpec {
  const { conflist, pluginDirs, cacheDir, timeoutMs } = chain;
  return { name, mode: 'cni', cni: { conflist, pluginDirs, cacheDir, timeoutMs }, mtu: 1500, hairpin: false, routes: [] };
}

/** Bandwidth limits are shaped on the host-side device knit puts in the sandbox's path
 * (runtimes/common/bandwidth.ts), and a CNI network hands them to its chain. An interface that
 * takes a device (SR-IOV VF, VFIO, a host netdev) has no such host-side device: its traffic
 * leaves through the NIC. Say so instead of ignoring the limit. */
function refuseBandwidth(interfaces: InterfaceRequest[], field = 'interfaces[i]'): void {
  const index = interfaces.findIndex((i) => i.bandwidth && i.device);
  if (index < 0) return;
  const name = `${field.replace('[i]', `[${index}]`)}.bandwidth`;
  throw new KnitError('UNIMPLEMENTED', `${name}: rate limits are not enforced on an interface that takes a device (its traffic passes no host-side device knit could shape)`, { field: name });
}
