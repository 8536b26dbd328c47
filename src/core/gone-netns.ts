// A sandbox whose network namespace is gone holds nothing. Kubelet does not always call DEL (a
// node crash, a runtime bug, a netns deleted and the DEL lost), and without this its addresses
// would leak, as CNI host-local's famously do. A sweep finds the records whose namespace no
// longer exists anywhere (NetnsPort.goneChecker) and detaches each through the normal inverses.
//
// Sweeps run one at a time. Asking while one runs gets the next one, which starts after it: a
// namespace deleted during a sweep is still seen, and a burst of asks costs one extra sweep.
import type { SandboxRecord } from './record.js';

/** A pool with less than 1/16 of its addresses free runs low: a sweep now may spare the next
 * attach the wait for one (an IPv6 pool never does). */
export const runsLow = (pool: { size: number; free: number }) => pool.free * 16 < pool.size;

/** Low pools ask for a sweep at most this often: every attach into a nearly full pool would. */
const LOW_POOL_GAP_MS = 10_000;

export class GoneNetnsSweeper {
  private running?: Promise<string[]>;
  private queued?: Promise<string[]>;
  private lastLowSweep = -Infinity;

  constructor(
    /** Records whose namespace is gone now. */
    private readonly find: () => SandboxRecord[],
    /** Detaches one of them; false when it changed meanwhile (detached, attached anew). */
    private readonly reap: (gone: SandboxRecord, trigger: string) => Promise<boolean>,
    /** Told of each sweep as it starts (a sweep reads every record: the metrics count them). */
    private readonly onSweep: (trigger: string) => void = () => undefined,
  ) {}

  /** Answers the ids of the sandboxes the sweep detached. */
  sweep(trigger: string): Promise<string[]> {
    if (!this.running) return this.start(trigger);
    this.queued ??= this.running.catch(() => undefined).then(() => {
      this.queued = undefined;
      return this.start(trigger);
    });
    return this.queued;
  }

  /** A pool runs low: a sweep in the background, unless one was asked for this way lately.
   * Failures are reported by reap, as for every sweep. */
  poolLow(): void {
    const now = performance.now();
    if (now - this.lastLowSweep < LOW_POOL_GAP_MS) return;
    this.lastLowSweep = now;
    this.sweep('pool-low').catch(() => undefined);
  }

  private start(trigger: string): Promise<string[]> {
    const run = this.once(trigger).finally(() => {
      if (this.running === run) this.running = undefined;
    });
    this.running = run;
    return run;
  }

  private async once(trigger: string): Promise<string[]> {
    this.onSweep(trigger);
    const reaped: string[] = [];
    for (const rec of this.find()) {
      // reap reports its own failures (the record stays, the next sweep tries again).
      if (await this.reap(rec, trigger).catch(() => false)) reaped.push(rec.sandboxId);
    }
    return reaped;
  }
}
