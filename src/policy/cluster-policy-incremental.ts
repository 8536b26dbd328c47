// The tiers kept compiled from pass to pass (pure): each pass, what changed since the last one
// is found by comparing the pass's view with the last (pods and ClusterNetworkPolicies by
// object: a source hands out the same object until it changes; namespaces' and nodes' labels
// and addresses by value), and only what it reaches is made again: the rule sets a pod that
// came, went or changed counts for (cluster-policy-sets.ts), the sets naming nodes when a node
// changed, and the chains of this node's pods that are new or changed, or whose NetworkPolicy
// entries the incremental compiler touched. A ClusterNetworkPolicy that changes makes every
// pod's chains again (its subject, priority and rules decide them) and its own sets; a
// namespace's labels, which any selector may read, make everything again. What it answers
// always equals compileTierShare's on the same view (test/unit/cluster-policy-incremental.test.ts).
import { tryParseIp, formatIp } from '../ipam/ip.js';
import type { ClusterPolicy } from './cluster-policy.js';
import type { TierIndex } from './cluster-policy-evaluate.js';
import { podTiers, tierShare, type PodTiers, type TierShare } from './cluster-policy-compile.js';
import { TierSets } from './cluster-policy-sets.js';
import { MAP_NAMES, type LocalPod, type PolicyRuleset } from './compile.js';
import type { Touched } from './ruleset.js';
import type { PolicyPod } from './types.js';

const MANY_PODS = 64;

export class IncrementalTiers {
  private sets: TierSets | undefined;
  /** Each pod of this node's part, by the object the share compiles it from. */
  private readonly parts = new Map<LocalPod, PodTiers>();
  // The last pass's view, to compare the next one with.
  private pods = new Set<PolicyPod>();
  private policies = new Map<string, ClusterPolicy>();
  private namespaces = new Map<string, string>();
  private nodes = new Map<string, string>();

  /** The tiers of `local`'s pods on `share`, the NetworkPolicy ruleset the incremental
   * compiler keeps; `touched`: what its flush since the last update touched. */
  update(tix: TierIndex, local: readonly LocalPod[], share: PolicyRuleset, touched: Touched): TierShare {
    const policies = new Map(tix.policies.map((p) => [p.key, p]));
    const changedPolicies = new Set([...this.policies.keys(), ...policies.keys()].filter((k) => this.policies.get(k) !== policies.get(k)));
    const namespaces = new Map(tix.ix.view.namespaces.map((ns) => [ns.name, JSON.stringify(ns.labels)]));
    const nodes = new Map(tix.nodes.map((n) => [n.name, JSON.stringify([n.labels, n.ips])]));
    const pods = new Set(tix.ix.pods);
    const came = tix.ix.pods.filter((p) => !this.pods.has(p));
    const gone = [...this.pods].filter((p) => !pods.has(p));
    const namespacesChanged = differ(this.namespaces, namespaces, '{}');
    const nodesChanged = differ(this.nodes, nodes);
    this.policies = policies;
    this.namespaces = namespaces;
    this.nodes = nodes;
    this.pods = pods;

    // Everything again when a namespace's labels changed, or so many pods at once (a relist)
    // that looking at each costs more than making every set.
    const restart = !this.sets || namespacesChanged || came.length + gone.length > Math.max(MANY_PODS, pods.size / 8);
    const sets = restart ? new TierSets(tix) : this.sets!;
    if (!restart) sets.reindex(tix, came, gone);
    this.sets = sets;
    sets.forget(changedPolicies);
    // This node's pods whose chains may differ: all of them when a policy changed or the sets
    // were made anew, else the new ones and those NetworkPolicy moved to other chains.
    const every = restart || changedPolicies.size > 0;
    const moved = new Set(MAP_NAMES.flatMap((m) => [...touched.maps[m]]));
    const current = new Set(local);
    for (const pod of this.parts.keys()) if (!current.has(pod)) this.parts.delete(pod);
    for (const pod of local) {
      if (every || !this.parts.has(pod) || addresses(pod).some((a) => moved.has(a))) this.parts.set(pod, podTiers(tix, pod, share, sets));
    }
    sets.keepOnly(new Set([...this.parts.values()].flatMap((p) => p.sets)));
    if (!restart) sets.refresh([...came, ...gone], nodesChanged);
    // A copy: the next pass's changes are found against this one (tierChanges).
    return tierShare(this.parts.values(), new Map(sets.built));
  }
}

/** Whether two maps differ, a missing key counting as `missing`. */
function differ(a: Map<string, string>, b: Map<string, string>, missing?: string): boolean {
  for (const k of new Set([...a.keys(), ...b.keys()])) if ((a.get(k) ?? missing) !== (b.get(k) ?? missing)) return true;
  return false;
}

function addresses(pod: PolicyPod): string[] {
  return pod.ips.flatMap((ip) => {
    const a = tryParseIp(ip);
    return a ? [formatIp(a)] : [];
  });
}
