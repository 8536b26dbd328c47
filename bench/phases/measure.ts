// Timing one contender call: client-observed wall time, unless the contender reports its own
// (more exact) figure.
import type { Contender, Flavor, Sandbox } from '../lib/contender.js';
import { nowMs } from '../lib/stats.js';
import { goneAfter } from '../lib/gone.js';

export async function timed(call: () => Promise<number | void>): Promise<number> {
  const t0 = nowMs();
  const own = await call();
  const wall = nowMs() - t0;
  return typeof own === 'number' ? own : wall;
}

export interface CycleOutcome {
  attachMs?: number;
  detachMs?: number;
  /** From the start of the detach call until the sandbox's devices are gone from the kernel. */
  goneMs?: number;
  error?: string;
}

/**
 * Attach then detach one sandbox, timing both. A failed attach is still followed by a detach
 * (best effort, untimed) so nothing half-made stays behind. `watchGone` also clocks the devices
 * gone; churn turns it off: there nothing waits, and deferred deletes are part of the rate.
 */
export async function attachDetach(c: Contender, sb: Sandbox, flavor: Flavor = 'runc', watchGone = true): Promise<CycleOutcome> {
  let attachMs: number;
  try {
    attachMs = await timed(() => c.attach(sb, flavor));
  } catch (e) {
    await c.detach(sb).catch(() => {});
    return { error: `attach: ${(e as Error).message}` };
  }
  try {
    const t0 = nowMs();
    const detachMs = await timed(() => c.detach(sb));
    const goneMs = watchGone && sb.netnsPath ? await goneAfter(sb.netnsPath, t0) : undefined;
    return { attachMs, detachMs, goneMs };
  } catch (e) {
    return { attachMs, error: `detach: ${(e as Error).message}` };
  }
}

/** Rotate a list by k (round-robin order that changes every iteration, so no one is always first). */
export function rotate<T>(items: readonly T[], k: number): T[] {
  if (items.length === 0) return [];
  const s = k % items.length;
  return [...items.slice(s), ...items.slice(0, s)];
}
