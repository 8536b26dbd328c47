// Unique names for kernel tests, and throwaway network namespaces made with `ip netns add`
// (iproute2 is the independent tool here) that are removed in teardown even when a test fails.
import type { ExecutionContext } from 'ava';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';

/**
 * A short prefix unique to one test: tag (2-4 chars naming the test) plus 2 random hex chars
 * and a dash, e.g. "knl1a7-". Link names built as prefix + role must stay within 15 bytes, so
 * keep roles short.
 */
export function uniquePrefix(tag: string): string {
  if (!/^[a-z0-9]{2,5}$/.test(tag)) throw new Error(`test tag '${tag}': 2-5 lowercase letters/digits`);
  return `${tag}${randomBytes(1).toString('hex')}-`;
}

export interface TestNetns {
  /** Name under /run/netns. */
  name: string;
  /** Path for knit (netns files are referred to by path). */
  path: string;
}

/** Creates /run/netns/<prefix><suffix>; teardown deletes it (and so every link inside). */
export function makeNetns(t: Pick<ExecutionContext, 'teardown'>, prefix: string, suffix: string): TestNetns {
  const name = `${prefix}${suffix}`;
  execFileSync('ip', ['netns', 'add', name], { stdio: ['ignore', 'ignore', 'pipe'] });
  t.teardown(() => removeNetns(name));
  return { name, path: `/run/netns/${name}` };
}

export function removeNetns(name: string): void {
  try {
    execFileSync('ip', ['netns', 'del', name], { stdio: 'ignore' });
  } catch {
    // already gone
  }
}
