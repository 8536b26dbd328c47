// Reconnect delays: doubling from initialMs, capped at maxMs, jittered within [half, whole] of
// the planned delay, so a cluster's daemons spread out and none hammers a restarting apiserver.
import test from 'ava';
import { backoffDelay, DEFAULT_BACKOFF } from '../../src/kube/backoff.js';

const policy = { initialMs: 100, maxMs: 3000 };

test('no jitter at the extremes: random 0 gives half, random →1 the whole planned delay', (t) => {
  const planned = [100, 200, 400, 800, 1600, 3000, 3000, 3000];
  planned.forEach((ms, i) => {
    t.is(backoffDelay(i + 1, policy, () => 0), ms / 2, `failure ${i + 1}`);
    t.is(backoffDelay(i + 1, policy, () => 0.999999), Math.round(ms / 2 + 0.999999 * (ms / 2)), `failure ${i + 1}`);
  });
});

test('never above the cap, never below half of it once capped, whatever the count', (t) => {
  for (const failures of [6, 50, 1000, Number.MAX_SAFE_INTEGER]) {
    for (const r of [0, 0.25, 0.5, 0.75, 0.999]) {
      const d = backoffDelay(failures, policy, () => r);
      t.true(d >= 1500 && d <= 3000, `failures=${failures} r=${r}: ${d}`);
    }
  }
});

test('a zeroth or negative count is treated as the first failure', (t) => {
  t.is(backoffDelay(0, policy, () => 0), 50);
  t.is(backoffDelay(-3, policy, () => 0), 50);
});

test('the default policy: first retry within a second, at most 30 s apart', (t) => {
  t.true(backoffDelay(1, DEFAULT_BACKOFF) <= 500);
  t.true(backoffDelay(100, DEFAULT_BACKOFF) <= 30_000);
  t.true(backoffDelay(100, DEFAULT_BACKOFF) >= 15_000);
});
