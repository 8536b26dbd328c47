// Interfaces added to and removed from an attached sandbox (multus-dynamic-networks, Kata and
// KubeVirt NIC hot-plug). Same journal discipline as Attach: the record says what is about to
// change (`pending`) and holds the new steps before the first kernel change; a failed add is
// rolled back; after a crash, start-up takes back an unfinished add and finishes a remove
// (repairPending). The sandbox's other interfaces are never touched.
import type { NetworkSpec, PrepareContext, Strategy } from '../base/strategy.js';
import type { ActionRunner, Failpoint } from './executor.js';
import { runSteps, undoSteps, StepFailed, planRunError } from './executor.js';
import { KnitError, CniCode } from '../base/errors.js';
import { allocateInterface, previewInterface, releaseInterfaces } from './addresses.js';
import { composeResult, defaultRouteIndex, freeSlot, planInterfaces } from './interface-plans.js';
import { withChainParts } from './cni-steps.js';
import type { IpamPort, ReaperPort, RecordStorePort } from './ports.js';
import { parksIn } from './reaper.js';
import { recordVersionFor, type InterfaceAllocation, type SandboxRecord } from './record.js';
import type { AttachResult, InterfaceRequest, RuntimeKind } from '../base/types.js';

export interface HotplugContext {
  records: RecordStorePort<SandboxRecord>;
  ipam: IpamPort;
  runner: ActionRunner;
  reaper: ReaperPort;
  strategy(runtime: RuntimeKind): Strategy;
  /** The network of an interface (index: where to say what is wrong). */
  network(iface: InterfaceRequest, index: number): NetworkSpec;
  holds(sandboxId: string, readOnly: boolean): { ctx: PrepareContext; release(): void };
  addFailpoint?: Failpoint;
  removeFailpoint?: Failpoint;
}

const sameInterface = (a: InterfaceRequest, b: InterfaceRequest) => JSON.stringify(a) === JSON.stringify(b);

/** Strategies name the field as interfaces[i]; the caller sent it as `interface`. */
function asInterfaceField(err: unknown, index: number): unknown {
  if (!(err instanceof KnitError)) return err;
  const at = `interfaces[${index}]`;
  const field = err.details.field;
  if (!field?.startsWith(at)) return err;
  const renamed = `interface${field.slice(at.length)}`;
  return new KnitError(err.code, err.message.replace(at, 'interface'), { ...err.details, field: renamed });
}

function attachedRecord(hc: HotplugContext, sandboxId: string, op: string): SandboxRecord {
  const rec = hc.records.get(sandboxId);
  if (!rec) throw new KnitError('NOT_FOUND', `sandbox ${sandboxId} is not attached on this node`, { field: 'sandbox_id', cniCode: CniCode.containerUnknown });
  if (rec.state !== 'attached') throw new KnitError('FAILED_PRECONDITION', `sandbox ${sandboxId} is ${rec.state}: ${op} needs it attached`, { field: 'sandbox_id' });
  if (!rec.parts) {
    throw new KnitError('FAILED_PRECONDITION', `sandbox ${sandboxId} was recorded by a knit without interface hot-plug: detach and attach it again to ${op}`, { field: 'sandbox_id' });
  }
  return rec;
}

interface AddPlan {
  record: SandboxRecord;
  allocation: InterfaceAllocation;
  steps: SandboxRecord['steps'];
}

/** The record as it will be once `iface` is added: new steps appended, its part composed in. */
async function planAdd(hc: HotplugContext, rec: SandboxRecord, iface: InterfaceRequest, preview: boolean, ctx: PrepareContext): Promise<AddPlan> {
  const index = rec.request.interfaces.length;
  const request = { ...rec.request, interfaces: [...rec.request.interfaces, iface] };
  let network: NetworkSpec;
  let allocation: InterfaceAllocation;
  try {
    network = hc.network(iface, index);
    allocation = preview ? previewInterface(hc.ipam, rec.sandboxId, iface, index, network) : allocateInterface(hc.ipam, rec.sandboxId, iface, index, network);
  } catch (err) {
    throw asInterfaceField(err, index);
  }
  try {
    const dflt = defaultRouteIndex(rec.request.interfaces);
    const slot = freeSlot(rec.parts!);
    const { steps, parts } = await planInterfaces(hc.strategy(rec.request.runtime), request, [index], [network], [allocation], ctx, dflt, [slot]);
    const allParts = [...rec.parts!, ...parts];
    const record: SandboxRecord = {
      ...rec,
      // The added steps may need a newer format (a bandwidth limit) than the record had.
      version: Math.max(rec.version, recordVersionFor(steps)) as SandboxRecord['version'],
      request,
      allocations: [...rec.allocations, allocation],
      steps: [...rec.steps, ...steps],
      parts: allParts,
      result: composeResult(request, allParts, request.interfaces[dflt].name),
      pending: { op: 'add', ifname: iface.name },
      added: [...(rec.added ?? []), iface.name],
      updatedAt: new Date().toISOString(),
    };
    return { record, allocation, steps };
  } catch (err) {
    if (!preview) releaseInterfaces(hc.ipam, rec.sandboxId, [allocation]);
    throw asInterfaceField(err, index);
  }
}

function refuseAdd(rec: SandboxRecord, iface: InterfaceRequest): AttachResult | undefined {
  if (rec.pending) {
    throw new KnitError('FAILED_PRECONDITION', `sandbox ${rec.sandboxId}: ${rec.pending.op} of interface ${rec.pending.ifname} is unfinished; RemoveInterface ${rec.pending.ifname} (or Detach) finishes it`, { field: 'sandbox_id' });
  }
  if (iface.defaultRoute) {
    const dflt = rec.request.interfaces[defaultRouteIndex(rec.request.interfaces)].name;
    throw KnitError.invalid('interface.default_route', `a running sandbox keeps its default route on ${dflt}; an added interface gets its own subnets and routes only`);
  }
  const existing = rec.request.interfaces.find((x) => x.name === iface.name);
  if (!existing) return undefined;
  if (sameInterface(existing, iface)) return rec.result; // idempotent repeat
  throw new KnitError('FAILED_PRECONDITION', `interface.name: sandbox ${rec.sandboxId} already has an interface ${iface.name} with a different request; RemoveInterface it first`, { field: 'interface.name' });
}

export async function addInterface(hc: HotplugContext, sandboxId: string, iface: InterfaceRequest): Promise<{ result: AttachResult; changed: boolean }> {
  const rec = attachedRecord(hc, sandboxId, 'add an interface');
  const repeat = refuseAdd(rec, iface);
  if (repeat) return { result: repeat, changed: false };
  if (!hc.runner.netnsUsable(rec.netns.path, rec.netns)) {
    throw new KnitError('FAILED_PRECONDITION', `sandbox ${sandboxId}: netns ${rec.netns.path} is gone or is no longer the namespace knit attached`, { field: 'sandbox_id' });
  }
  const holds = hc.holds(sandboxId, false);
  try {
    const { record, allocation, steps } = await planAdd(hc, rec, iface, false, holds.ctx);
    try {
      await hc.records.put(sandboxId, record); // the journal entry, before any kernel change
    } catch (err) {
      releaseInterfaces(hc.ipam, sandboxId, [allocation]);
      throw new KnitError('INTERNAL', `cannot write the record of sandbox ${sandboxId}: ${(err as Error).message}`, { cniCode: CniCode.ioFailure });
    }
    let parts = record.parts!;
    try {
      const outcomes = await runSteps(steps, hc.runner, hc.addFailpoint);
      parts = withChainParts(parts, steps, outcomes);
    } catch (err) {
      const failedAt = err instanceof StepFailed ? err.stepIndex : steps.length;
      const failure = planRunError(err);
      await takeBackAdd(hc, rec, record, steps, failedAt, allocation).catch((rb: Error) => {
        throw new KnitError('INTERNAL', `${failure.message}; then ${rb.message}`, { cause: failure });
      });
      throw failure;
    }
    const { pending: _finished, ...rest } = record;
    const done: SandboxRecord = { ...rest, updatedAt: new Date().toISOString() };
    if (parts !== record.parts) {
      // A CNI chain answered with the interface's names and addresses.
      done.parts = parts;
      done.result = composeResult(record.request, parts, record.request.interfaces[defaultRouteIndex(record.request.interfaces)].name);
    }
    try {
      await hc.records.put(sandboxId, done);
    } catch (err) {
      await takeBackAdd(hc, rec, record, steps, steps.length, allocation).catch(() => undefined);
      throw new KnitError('INTERNAL', `cannot record interface ${iface.name} of sandbox ${sandboxId}: ${(err as Error).message}`, { cniCode: CniCode.ioFailure });
    }
    return { result: done.result, changed: true };
  } finally {
    holds.release();
  }
}

/** Undoes the first `count` steps of a failed add and puts the record back as it was. */
async function takeBackAdd(hc: HotplugContext, before: SandboxRecord, during: SandboxRecord, steps: SandboxRecord['steps'], count: number, allocation: InterfaceAllocation): Promise<void> {
  const errors = await undoSteps(steps, count, hc.runner, 'retire', during.netns);
  const parked = parksIn(steps.slice(0, count), during.netns);
  hc.reaper.kick(parked);
  // A device parked in the netns is known only to this record: keep it until the reaper is done.
  if (parked && !errors.length) await hc.reaper.whenReaped();
  if (errors.length) {
    // The record (pending add) keeps what to undo: RemoveInterface, Detach or the next start finish it.
    throw new KnitError('INTERNAL', `rollback of interface ${during.pending!.ifname} is incomplete (${errors.join('; ')}); RemoveInterface, Detach or the next start finishes it`);
  }
  releaseInterfaces(hc.ipam, before.sandboxId, [allocation]);
  await hc.records.put(before.sandboxId, { ...before, updatedAt: new Date().toISOString() });
}

export async function planAddInterface(hc: HotplugContext, sandboxId: string, iface: InterfaceRequest) {
  const rec = attachedRecord(hc, sandboxId, 'add an interface');
  if (refuseAdd(rec, iface)) return { steps: [] }; // already there: nothing to do
  const { steps } = await planAdd(hc, rec, iface, true, hc.holds(sandboxId, true).ctx);
  return { steps: steps.map((s) => ({ description: s.description, netns: s.netns, op: s.do, undo: s.undo })) };
}

/** The record without interface `ifname`: its steps, addresses, request entry and part. */
export function withoutInterface(rec: SandboxRecord, ifname: string): SandboxRecord {
  const request = { ...rec.request, interfaces: rec.request.interfaces.filter((x) => x.name !== ifname) };
  const parts = (rec.parts ?? []).filter((p) => p.ifname !== ifname);
  const out: SandboxRecord = {
    ...rec,
    request,
    allocations: rec.allocations.filter((a) => a.ifname !== ifname),
    steps: rec.steps.filter((s) => s.iface !== ifname),
    parts,
    added: (rec.added ?? []).filter((n) => n !== ifname),
    result: composeResult(request, parts, request.interfaces.length ? request.interfaces[defaultRouteIndex(request.interfaces)].name : undefined),
    updatedAt: new Date().toISOString(),
  };
  delete out.pending;
  return out;
}

export async function removeInterface(hc: HotplugContext, sandboxId: string, name: string): Promise<AttachResult | undefined> {
  if (!hc.records.get(sandboxId)) return undefined; // idempotent: the whole sandbox is gone
  const rec = attachedRecord(hc, sandboxId, 'remove an interface');
  if (!rec.request.interfaces.some((x) => x.name === name)) return undefined; // idempotent
  if (rec.pending && rec.pending.ifname !== name) {
    throw new KnitError('FAILED_PRECONDITION', `sandbox ${sandboxId}: ${rec.pending.op} of interface ${rec.pending.ifname} is unfinished; RemoveInterface ${rec.pending.ifname} (or Detach) finishes it`, { field: 'name' });
  }
  const dflt = rec.request.interfaces[defaultRouteIndex(rec.request.interfaces)].name;
  if (name === dflt) {
    throw new KnitError('FAILED_PRECONDITION', `name: ${name} carries the default route of sandbox ${sandboxId}; Detach the sandbox to remove it`, { field: 'name' });
  }
  const record: SandboxRecord = { ...rec, pending: { op: 'remove', ifname: name }, updatedAt: new Date().toISOString() };
  await hc.records.put(sandboxId, record);
  const steps = rec.steps.filter((s) => s.iface === name);
  const errors = await undoSteps(steps, steps.length, hc.runner, 'retire', rec.netns, hc.removeFailpoint);
  const parked = parksIn(steps, rec.netns);
  hc.reaper.kick(parked);
  // A device parked in the netns is known only to this record: keep it until the reaper is done.
  if (parked && !errors.length) await hc.reaper.whenReaped();
  if (errors.length) {
    // The record stays pending: a retry, Detach or the next start finishes the job.
    throw new KnitError('INTERNAL', `removal of interface ${name} of ${sandboxId} is incomplete: ${errors.join('; ')}`);
  }
  const after = withoutInterface(record, name);
  releaseInterfaces(hc.ipam, sandboxId, rec.allocations.filter((a) => a.ifname === name));
  await hc.records.put(sandboxId, after);
  return after.result;
}

/** Start-up: an add that did not finish is taken back, a remove is finished. Answers the
 * repaired record, or the errors (the record is then kept as it is, for a later try). */
export async function repairPending(rec: SandboxRecord, runner: ActionRunner): Promise<{ record?: SandboxRecord; errors: string[] }> {
  const { ifname } = rec.pending!;
  const steps = rec.steps.filter((s) => s.iface === ifname);
  const errors = await undoSteps(steps, steps.length, runner, 'undo', rec.netns);
  if (errors.length) return { errors };
  return { record: withoutInterface(rec, ifname), errors: [] };
}

/** The request as Attach made it: a repeated Attach is compared with this, not with the
 * interfaces AddInterface added since. */
export function attachedRequest(rec: SandboxRecord): SandboxRecord['request'] {
  if (!rec.added?.length) return rec.request;
  return { ...rec.request, interfaces: rec.request.interfaces.filter((i) => !rec.added!.includes(i.name)) };
}
