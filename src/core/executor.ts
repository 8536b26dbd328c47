// Runs plans. Consecutive netlink ops for the same netns go to the kernel as one batch (one
// crossing into the addon, one pool-thread hop); the journal entry covering them was written
// before the batch started, so a crash anywhere inside it is repaired by the same inverses.
import type { Op, OpResult, ResultsOf } from '../base/ops.js';
import { isHostAction, tolerant, type HostAction, type Step, type StepAction } from '../base/plan.js';
import { KnitError, CniCode, asKnitError } from '../base/errors.js';

export interface ActionRunner {
  /** One batch inside netns (undefined = host). Rejects with an error whose `index` names the
   * failing op; ops before it took effect. */
  runOps<const T extends readonly Op[]>(netns: string | undefined, ops: T): Promise<ResultsOf<T>>;
  /** Host actions answer nothing, except a CNI chain's ADD (its result). */
  runHostAction(netns: string | undefined, action: HostAction): Promise<OpResult | void>;
  /** False once the netns file is gone, is not a netns, or (given `expect`) is no longer the
   * namespace the plan was made for: a new pod may have been pinned at the same path. */
  netnsUsable(netns: string, expect?: { dev: number; ino: number }): boolean;
  /** This knit's host-port nft tables in the host netns (src/core/host-ports.ts). */
  hostPortTables?(): Promise<string[]>;
}

/** Raised when step `stepIndex` failed; steps before it took effect. */
export class StepFailed extends Error {
  constructor(
    readonly stepIndex: number,
    readonly step: Step,
    override readonly cause: unknown,
  ) {
    super(`step ${stepIndex + 1} (${step.description}) failed: ${(cause as Error)?.message ?? cause}`);
    this.name = 'StepFailed';
  }
}

/** A failed plan run, said in terms of the request: a kernel refusal (EEXIST is a name already
 * taken) or a plan action's own error, which already said what went wrong in API terms (a
 * device claimed by another sandbox, a non-viable IOMMU group) and keeps its code. */
export function planRunError(err: unknown): KnitError {
  if (err instanceof KnitError) return err;
  if (err instanceof StepFailed) {
    if (err.cause instanceof KnitError) return new KnitError(err.cause.code, err.message, { ...err.cause.details, cause: err });
    const code = (err.cause as { code?: string })?.code;
    if (code === 'EEXIST') return new KnitError('ALREADY_EXISTS', `${err.message} (in ${err.step.netns ?? 'the host netns'})`, { cause: err });
    return new KnitError('INTERNAL', err.message, { cause: err, cniCode: CniCode.ioFailure });
  }
  return asKnitError(err);
}

/** Crash-test hook: `fire` runs just before action `index` (the tests make it SIGKILL the
 * daemon); batches are split there so everything before it has reached the kernel. */
export interface Failpoint { index: number; fire(): void }

interface Batch { netns?: string; start: number; actions: StepAction[] }

function batches(items: { netns?: string; action: StepAction }[], stopAt = Infinity): Batch[] {
  const out: Batch[] = [];
  items.forEach(({ netns, action }, i) => {
    const last = out[out.length - 1];
    const joinable = last && !isHostAction(action) && !isHostAction(last.actions[0]) && last.netns === netns && i !== stopAt;
    if (joinable) last.actions.push(action);
    else out.push({ netns, start: i, actions: [action] });
  });
  return out;
}

async function runBatch(runner: ActionRunner, b: Batch): Promise<OpResult[]> {
  const first = b.actions[0];
  if (isHostAction(first)) {
    return [(await runner.runHostAction(b.netns, first)) ?? {}];
  }
  return runner.runOps(b.netns, b.actions as Op[]);
}

/** Runs every step; returns one result per step. */
export async function runSteps(steps: Step[], runner: ActionRunner, failpoint?: Failpoint): Promise<OpResult[]> {
  const results: OpResult[] = [];
  for (const b of batches(steps.map((s) => ({ netns: s.netns, action: s.do })), failpoint?.index)) {
    if (b.start === failpoint?.index) failpoint.fire();
    try {
      results.push(...(await runBatch(runner, b)));
    } catch (err) {
      const at = b.start + ((err as { index?: number }).index ?? 0);
      throw new StepFailed(at, steps[at], err);
    }
  }
  if (failpoint?.index === steps.length) failpoint.fire(); // all done, not yet recorded as done
  return results;
}

/** Takes back steps [0, count) in reverse, best effort: every inverse is tried, failures are
 * collected. Inverses inside a netns that is gone are skipped: their objects went with it. */
export async function undoSteps(
  steps: Step[],
  count: number,
  runner: ActionRunner,
  mode: 'undo' | 'retire',
  expectNetns?: { dev: number; ino: number },
  failpoint?: Failpoint,
): Promise<string[]> {
  const inverse: { netns?: string; action: StepAction; step: number }[] = [];
  for (let i = Math.min(count, steps.length) - 1; i >= 0; i--) {
    const s = steps[i];
    const actions = mode === 'retire' && s.retire ? s.retire : s.undo ? [s.undo] : [];
    for (const a of actions) inverse.push({ netns: s.netns, action: tolerant(a), step: i });
  }
  const usable = new Map<string, boolean>();
  const alive = (ns?: string) => {
    if (ns === undefined) return true;
    if (!usable.has(ns)) usable.set(ns, runner.netnsUsable(ns, expectNetns));
    return usable.get(ns)!;
  };
  const errors: string[] = [];
  const todo = inverse.filter((x) => alive(x.netns));
  for (const b of batches(todo, failpoint?.index)) {
    if (b.start === failpoint?.index) failpoint.fire();
    // A failed op stops its batch; retry the rest of the batch one by one so one stubborn
    // object does not leave the others behind.
    try {
      await runBatch(runner, b);
    } catch (err) {
      const failedAt = (err as { index?: number }).index ?? 0;
      errors.push(`${steps[todo[b.start + failedAt].step].description}: ${(err as Error).message}`);
      for (let j = failedAt + 1; j < b.actions.length; j++) {
        try {
          await runBatch(runner, { netns: b.netns, start: b.start + j, actions: [b.actions[j]] });
        } catch (e) {
          errors.push(`${steps[todo[b.start + j].step].description}: ${(e as Error).message}`);
        }
      }
    }
  }
  if (failpoint?.index === todo.length) failpoint.fire();
  return errors;
}
