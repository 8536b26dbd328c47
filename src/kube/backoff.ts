// How long to wait before the next attempt after `failures` failures in a row: doubling from
// initialMs, capped at maxMs, with "equal jitter" (half fixed, half random) so the daemons of a
// whole cluster, cut off by one apiserver restart, do not all come back in the same instant,
// yet none retries sooner than half the planned delay.

export interface BackoffPolicy {
  initialMs: number;
  maxMs: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { initialMs: 500, maxMs: 30_000 };

/** The delay before attempt failures+1; failures starts at 1. random() is in [0, 1). */
export function backoffDelay(failures: number, policy: BackoffPolicy, random: () => number = Math.random): number {
  const exponent = Math.min(Math.max(failures - 1, 0), 30); // 2^30 already exceeds any sane cap
  const planned = Math.min(policy.maxMs, policy.initialMs * 2 ** exponent);
  return Math.round(planned / 2 + random() * (planned / 2));
}
