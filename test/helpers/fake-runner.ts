// A fake ActionRunner for unit tests of core (src/core/executor.ts, src/core/manager.ts): the
// kernel is out of scope here, only what core sends and in what order. It records every batch
// it is handed, takes ops in order like the addon does (a failing op stops its batch, the ops
// before it took effect, the error's `index` names it), and can fail any action on demand.
import type { Op, OpResult } from '../../src/base/ops.js';
import type { HostAction, StepAction } from '../../src/base/plan.js';
import type { ActionRunner } from '../../src/core/executor.js';

export interface Batch {
  kind: 'ops' | 'host';
  netns?: string;
  actions: StepAction[];
}

/** The error a failing op rejects with; `code` as the addon sets it (EEXIST, ENODEV, ...). */
export class FakeOpError extends Error {
  constructor(
    message: string,
    readonly index: number,
    readonly code?: string,
  ) {
    super(message);
  }
}

export class FakeRunner implements ActionRunner {
  /** Every batch handed over, in order (runOps and runHostAction alike). */
  readonly batches: Batch[] = [];
  /** Every action that took effect, in order. */
  readonly applied: { netns?: string; action: StepAction }[] = [];
  /** Netns paths that are gone: netnsUsable answers false for them. */
  readonly gone = new Set<string>();
  /** Every netnsUsable question, with the identity it was asked to expect. */
  readonly usableAsked: { netns: string; expect?: { dev: number; ino: number } }[] = [];
  /** Fails an action when this answers an errno code (or true for a plain failure). */
  failWhen?: (action: StepAction, netns: string | undefined, seq: number) => string | boolean | undefined;
  /** `events`: a log shared with other fakes, to assert the order of what core did. */
  constructor(private readonly events?: string[]) {}

  private seq = 0;

  /** Fails the action with sequence number `seq` (0 = the first action this runner takes). */
  failAtSeq(seq: number, code?: string): this {
    this.failWhen = (_a, _ns, n) => (n === seq ? (code ?? true) : undefined);
    return this;
  }

  /** Fails every action `pick` selects. */
  failEvery(pick: (action: StepAction, netns: string | undefined) => boolean, code?: string): this {
    this.failWhen = (a, ns) => (pick(a, ns) ? (code ?? true) : undefined);
    return this;
  }

  private take(netns: string | undefined, action: StepAction, index: number): OpResult {
    const n = this.seq++;
    const fail = this.failWhen?.(action, netns, n);
    if (fail) {
      throw new FakeOpError(`fake failure of ${action.op} (#${n})`, index, typeof fail === 'string' ? fail : undefined);
    }
    this.applied.push({ netns, action });
    return { index };
  }

  async runOps(netns: string | undefined, ops: Op[]): Promise<OpResult[]> {
    this.batches.push({ kind: 'ops', netns, actions: ops });
    this.events?.push(`runner.ops ${ops.map((o) => o.op).join(',')}`);
    return ops.map((op, i) => this.take(netns, op, i));
  }

  async runHostAction(netns: string | undefined, action: HostAction): Promise<OpResult | void> {
    this.batches.push({ kind: 'host', netns, actions: [action] });
    this.events?.push(`runner.host ${action.op}`);
    this.take(netns, action, 0);
  }

  netnsUsable(netns: string, expect?: { dev: number; ino: number }): boolean {
    this.usableAsked.push({ netns, expect });
    return !this.gone.has(netns);
  }
}
