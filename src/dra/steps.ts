// Runs a claim's steps (src/base/plan.ts) through the daemon's action runner: netlink ops in one
// batch each, host actions (sysfs, files) one by one. On a failure the steps that ran are undone
// in reverse, so nothing half-done stays; undo() runs every inverse, tolerating what is gone.
import { isHostAction, type Step, type StepAction } from '../base/plan.js';
import type { HostAction, Op, OpResult, ResultsOf } from '../base/ops.js';
import type { Failpoint } from '../core/executor.js';

export interface StepRunner {
  runOps<const T extends readonly Op[]>(netns: string | undefined, ops: T): Promise<ResultsOf<T>>;
  runHostAction(netns: string | undefined, action: HostAction): Promise<OpResult | void>;
}

function run(runner: StepRunner, netns: string | undefined, a: StepAction): Promise<unknown> {
  return isHostAction(a) ? runner.runHostAction(netns, a) : runner.runOps(netns, [a as Op]);
}

/** Runs the steps in order; a failure undoes those that ran (in reverse) and rethrows, with the
 * step that failed named. An undo that fails too is added to the message. The crash tests'
 * failpoint fires before step `index` (the step count: after the last). */
export async function runSteps(runner: StepRunner, steps: Step[], failpoint?: Failpoint): Promise<void> {
  let done = 0;
  try {
    for (const step of steps) {
      if (failpoint?.index === done) failpoint.fire();
      await run(runner, step.netns, step.do).catch((err: Error) => {
        err.message = `${step.description}: ${err.message}`;
        throw err;
      });
      done++;
    }
    if (failpoint?.index === steps.length) failpoint.fire();
  } catch (err) {
    const problems = await undoSteps(runner, steps.slice(0, done));
    if (problems.length && err instanceof Error) err.message += ` (undoing what ran also failed: ${problems.join('; ')})`;
    throw err;
  }
}

/** Every inverse, last step first; answers what failed (empty: all undone). */
export async function undoSteps(runner: StepRunner, steps: Step[]): Promise<string[]> {
  const problems: string[] = [];
  for (const step of [...steps].reverse()) {
    if (!step.undo) continue;
    await run(runner, step.netns, step.undo).catch((err: Error) => problems.push(`undo of "${step.description}": ${err.message}`));
  }
  return problems;
}
