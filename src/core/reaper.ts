// Deletes retired devices in bulk. Each device delete costs the kernel an RCU grace period
// (~20 ms); one RTM_DELLINK for a whole link group pays it once for every device in it.
// Detach and rollback only move devices into the reap group (microseconds) and kick the reaper.
// Devices that live only inside a sandbox netns (a VM's tap) are parked in the reap group
// there: kick() with that netns, and the next run deletes that netns's group as well.
import type { ActionRunner } from './executor.js';
import type { NetnsIdentity } from './record.js';
import type { Step } from '../base/plan.js';
import { reapGroup } from '../base/names.js';

/** The sandbox netns, when retiring these steps parks a device there that only the reaper
 * deletes (Step.reapInNetns). */
export function parksIn(steps: readonly Step[], netns: NetnsIdentity): NetnsIdentity | undefined {
  return steps.some((s) => s.reapInNetns && s.netns) ? netns : undefined;
}

const key = (ns: NetnsIdentity) => `${ns.dev}:${ns.ino}:${ns.path}`;

export class Reaper {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private again = false;
  /** Sandbox netns holding parked devices, for the next run. */
  private pending = new Map<string, NetnsIdentity>();
  /** Callers waiting for the next run to finish (whenReaped). */
  private waiters: (() => void)[] = [];

  constructor(
    private readonly runner: ActionRunner,
    private readonly onError: (err: Error) => void,
    /** How long to gather retired devices before one bulk delete. */
    private readonly delayMs = 25,
  ) {}

  kick(netns?: NetnsIdentity): void {
    if (netns) this.pending.set(key(netns), netns);
    if (this.running) {
      this.again = true;
      return;
    }
    this.timer ??= setTimeout(() => void this.reapNow(), this.delayMs);
  }

  /** Resolves once a run that started after this call has finished: everything parked and
   * kicked before it is then gone from the kernel (or failed and was reported). */
  whenReaped(): Promise<void> {
    return new Promise((resolve) => {
      this.waiters.push(resolve);
      this.kick();
    });
  }

  /** Deletes every device in the reap group now; resolves when the kernel is done. */
  async reapNow(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.running) {
      // This run may have started before the caller's devices were parked: wait for the next.
      await this.running;
      return this.reapNow();
    }
    const netns = [...this.pending.values()];
    this.pending.clear();
    const waiters = this.waiters;
    this.waiters = [];
    this.running = this.reapAll(netns).finally(() => {
      this.running = undefined;
      for (const w of waiters) w();
      if (this.again || this.waiters.length) {
        this.again = false;
        this.kick();
      }
    });
    return this.running;
  }

  private async reapAll(netns: NetnsIdentity[]): Promise<void> {
    // The host group and each netns's run side by side: every delete waits for its own grace
    // period, and those overlap.
    await Promise.all([undefined, ...netns].map(async (ns) => {
      // A netns that is gone took its parked devices with it; one reused at the same path is
      // not the one the devices were parked in.
      if (ns && !this.runner.netnsUsable(ns.path, ns)) return;
      await this.runner.runOps(ns?.path, [{ op: 'link.delGroup', group: reapGroup() }]).catch((err) => {
        if ((err as { code?: string }).code !== 'ENODEV') this.onError(err as Error); // ENODEV: group empty
      });
    }));
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
