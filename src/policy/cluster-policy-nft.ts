// The ClusterNetworkPolicy tiers as nftables chains (docs/network-policy.md,
// "ClusterNetworkPolicy"): the chain shape the compiler makes (cluster-policy-compile.ts), its
// rules as text (ruleset.ts writes them), and its counters. A tier chain holds, in order, the
// rules of the policies of one tier that select a group of pods in one direction and family,
// each one set lookup with its action as the verdict: Accept `return`s (this direction is
// allowed, the other is still judged), Deny drops, Pass `goto`s what follows the tier. What
// follows the Admin tier is the pod's NetworkPolicy chain if one selects it, else its Baseline
// chain, else nothing; nothing follows the Baseline tier (allowed by default).
import type { IpFamily } from '../ipam/ip.js';
import type { Action, Tier } from './cluster-policy.js';
import type { Direction } from './types.js';
import { shortHash } from './compile.js';

export interface TierRule {
  policy: string;
  rule: number;
  action: Action;
  /** The set of what the rule matches; none: it matches everything (a rule failed closed). */
  set?: string;
  lookup?: 'addr' | 'concat';
}

export interface TierChain {
  tier: Tier;
  direction: Direction;
  family: IpFamily;
  rules: TierRule[];
  /** The chain after this tier (a Pass, or no rule matched); none: the direction is allowed. */
  next?: string;
}

const verdictLetter: Record<Action, string> = { Accept: 'a', Deny: 'd', Pass: 'p' };

/** Packets each ClusterNetworkPolicy accepted, denied and passed on, per direction. */
export const tierCounter = (policy: string, d: Direction, action: Action) => `t${verdictLetter[action]}${d[0]}_${shortHash(policy)}`;

export const isTierChain = (c: object): c is TierChain => 'tier' in c;

/** Tier chains are named a…/b… (Admin, Baseline); NetworkPolicy's group chains g…. */
export const tierChainName = (c: TierChain) => `${c.tier === 'Admin' ? 'a' : 'b'}${c.direction[0]}${c.family}_${shortHash(JSON.stringify(c))}`;

/** A chain goes only to chains of a higher rank (Admin 0, Baseline 1, group chains 2): one
 * transaction deletes chains by rank, and adds them the other way round. */
export const chainRank = (name: string) => (name.startsWith('a') ? 0 : name.startsWith('b') ? 1 : 2);

export function tierChainRules(c: TierChain): string[] {
  const ip = c.family === 4 ? 'ip' : 'ip6';
  const peer = c.direction === 'ingress' ? 'saddr' : 'daddr';
  // The node reaches its own pods: no ingress peer can name it (NetworkPolicy's chains alike).
  const rules: string[] = c.direction === 'ingress' ? ['fib saddr type local accept'] : [];
  const onward = c.next ? `goto ${c.next}` : 'return';
  for (const r of c.rules) {
    const match = !r.set ? '' : r.lookup === 'addr' ? `${ip} ${peer} @${r.set} ` : `${ip} ${peer} . meta l4proto . th dport @${r.set} `;
    const verdict = r.action === 'Accept' ? 'return' : r.action === 'Deny' ? 'drop' : onward;
    rules.push(`${match}counter name "${tierCounter(r.policy, c.direction, r.action)}" ${verdict}`);
  }
  if (c.next) rules.push(`goto ${c.next}`);
  return rules;
}
