// Deletes retired devices in bulk. Each veth delete costs the kernel an RCU grace period
// (~20 ms); one RTM_DELLINK for a whole link group pays it once for every device in it.
// Detach and rollback only move devices into the reap group (microseconds) and kick the reaper.
import type { ActionRunner } from './executor.js';
import { reapGroup } from '../base/names.js';

export class Reaper {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private again = false;

  constructor(
    private readonly runner: ActionRunner,
    private readonly onError: (err: Error) => void,
    /** How long to gather retired devices before one bulk delete. */
    private readonly delayMs = 25,
  ) {}

  kick(): void {
    if (this.running) {
      this.again = true;
      return;
    }
    this.timer ??= setTimeout(() => void this.reapNow(), this.delayMs);
  }

  /** Deletes every device in the reap group now; resolves when the kernel is done. */
  async reapNow(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.running) return this.running;
    this.running = this.runner
      .runOps(undefined, [{ op: 'link.delGroup', group: reapGroup() }])
      .then(() => undefined)
      .catch((err) => {
        if ((err as { code?: string }).code !== 'ENODEV') this.onError(err as Error); // ENODEV: group empty
      })
      .finally(() => {
        this.running = undefined;
        if (this.again) {
          this.again = false;
          this.kick();
        }
      });
    return this.running;
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
