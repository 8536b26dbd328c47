// This node's share of the cluster's policies, kept compiled as the cluster changes: one pod,
// namespace or policy that comes, changes or goes recomputes what it touches and nothing else,
// and says by name what it touched (the sets whose elements changed, the map entries, the
// chains and counters that came or went), so the transaction (ruleset.ts) writes only that.
// What it holds always equals the full compile of the same view (compile.ts, compileRuleset):
// the unit tests apply random changes both ways (docs/network-policy.md, "Changes").
//
// Inputs are the source's objects (pods, namespaces, policies, each by key) and this node's
// pods as their admits left them. Changes mark what they reach dirty; flush() recomputes it:
// first this node's pods whose policies may select them differently (their chains, map
// entries, counters, and the sets those chains look up), then the sets whose peers changed.
import { tryParseIp, formatIp } from '../ipam/ip.js';
import { deniedLog, emptyMaps, fullRange, podShare, ruleSet, type CounterDef, type DeniedLogSettings, type GroupChain, type LocalPod, type PodShare, type PolicyRuleset, type SetDef, type SetSpec } from './compile.js';
import type { Policy } from './normalize.js';
import { groupKeyOfBlock, groupKeyOfPeer, PeerGroups } from './peer-groups.js';
import { noneTouched, type Touched } from './ruleset.js';
import { canonical, isPeerPod, normalized, policySelects } from './view-index.js';
import { NAMESPACE_NAME_LABEL, type NetworkPolicy, type PolicyNamespace, type PolicyPod, type PolicyView } from './types.js';

/** A pod of this node as its admit left it: the addresses knit gave it, and what the source
 * said of it then ('unknown': nothing answered). */
export interface LocalInput {
  namespace: string;
  name: string;
  ips: string[];
  seen: PolicyPod | 'unknown';
}

interface SetRecord {
  def: SetDef;
  /** The peer groups its elements come from. */
  groups: string[];
  /** Chains (of this node's pods) that look it up. */
  refs: number;
}

const podKey = (p: { namespace: string; name: string }) => `${p.namespace}/${p.name}`;
const policyKey = (np: NetworkPolicy) => `${np.metadata.namespace ?? 'default'}/${np.metadata.name}`;
/** Peer ids: a source pod by its key, a local pod by its id (a sandbox). */
const SOURCE = 's:';
const LOCAL = 'l:';

function addTo<K, V>(m: Map<K, Set<V>>, k: K, v: V): void {
  let s = m.get(k);
  if (!s) m.set(k, (s = new Set()));
  s.add(v);
}
function removeFrom<K, V>(m: Map<K, Set<V>>, k: K, v: V): void {
  const s = m.get(k);
  if (!s) return;
  s.delete(v);
  if (!s.size) m.delete(k);
}

export class IncrementalCompiler {
  /** What the node's table should hold; flush() brings it up to date. */
  readonly ruleset: PolicyRuleset = {
    sets: new Map(), chains: new Map(),
    maps: emptyMaps(),
    self: { 4: [], 6: [] }, counters: [], limits: new Map(),
  };

  // The inputs.
  private readonly rawPolicies = new Map<string, NetworkPolicy>();
  private readonly policies = new Map<string, Policy>();
  private readonly policiesByNs = new Map<string, Set<Policy>>();
  private readonly namespaces = new Map<string, PolicyNamespace>();
  /** Each namespace's labels as selectors see them (its name label included), made once. */
  private readonly nsLabels = new Map<string, Record<string, string>>();
  private readonly sources = new Map<string, PolicyPod>();
  private readonly sourcesByIp = new Map<string, Set<string>>();
  private readonly locals = new Map<string, LocalInput>();
  private readonly localIdsByKey = new Map<string, Set<string>>();
  private readonly localIdsByNs = new Map<string, Set<string>>();
  private readonly localIps = new Map<string, number>();

  // What they make.
  private readonly localPods = new Map<string, LocalPod>();
  private readonly peers = new PeerGroups((ns) => this.namespaceLabels(ns));
  private readonly shares = new Map<string, PodShare>();
  private readonly setRecords = new Map<string, SetRecord>();
  private readonly chainRefs = new Map<string, number>();
  private readonly counterRefs = new Map<string, { def: CounterDef; refs: number }>();

  // What waits for the next flush.
  private readonly dirtyLocals = new Set<string>();
  private readonly dirtySets = new Set<string>();
  private selfDirty = false;
  private touched = noneTouched();
  private readonly touchSet = (name: string) => this.dirtySets.add(name);

  /** networkPolicy.logDenied: each chain's drop logs, through one limit. */
  private readonly logging: ReturnType<typeof deniedLog>;

  constructor(private readonly nodeName: string, logDenied?: DeniedLogSettings) {
    this.logging = deniedLog(logDenied);
  }

  /** A whole view at once (a first sync): the same as each of its objects set in turn. */
  load(view: Pick<PolicyView, 'policies' | 'namespaces' | 'pods'>): void {
    for (const ns of view.namespaces) this.setNamespace(ns.name, ns);
    for (const pod of view.pods) this.setPod(podKey(pod), pod);
    for (const np of view.policies) this.setPolicy(policyKey(np), np);
  }

  setPolicy(key: string, np: NetworkPolicy | undefined): void {
    const old = this.policies.get(key);
    const next = np && normalized(np);
    if (old === next) return;
    if (old) removeFrom(this.policiesByNs, old.namespace, old);
    if (next) {
      this.policies.set(key, next);
      this.rawPolicies.set(key, np!);
      addTo(this.policiesByNs, next.namespace, next);
    } else {
      this.policies.delete(key);
      this.rawPolicies.delete(key);
    }
    // The pods it selected or selects now; a pod of unknown labels is isolated as long as its
    // namespace has any policy at all.
    for (const ns of new Set([old?.namespace, next?.namespace])) {
      for (const id of this.localIdsByNs.get(ns!) ?? []) {
        const pod = this.localPods.get(id)!;
        if (pod.unknown || (old && policySelects(old, pod)) || (next && policySelects(next, pod))) this.dirtyLocals.add(id);
      }
    }
  }

  setNamespace(name: string, ns: PolicyNamespace | undefined): void {
    const before = this.namespaceLabels(name);
    if (ns) this.namespaces.set(name, ns);
    else this.namespaces.delete(name);
    this.nsLabels.delete(name);
    const after = this.namespaceLabels(name);
    if (JSON.stringify(before) !== JSON.stringify(after)) this.peers.namespaceChanged(name, before, after, this.touchSet);
  }

  /** A pod as the source has it (any node's). */
  setPod(key: string, pod: PolicyPod | undefined): void {
    const old = this.sources.get(key);
    if (old === pod) return;
    for (const ip of old?.ips ?? []) removeFrom(this.sourcesByIp, canonical(ip), key);
    for (const ip of pod?.ips ?? []) addTo(this.sourcesByIp, canonical(ip), key);
    if (pod) this.sources.set(key, pod);
    else this.sources.delete(key);
    const ids = this.localIdsByKey.get(key);
    // A pod of this node: the source's labels and named ports are its labels and ports.
    if (ids) for (const id of ids) this.refreshLocal(id);
    else this.peers.set(SOURCE + key, this.visible(key), this.touchSet);
  }

  /** A pod of this node admitted (or, with no input, released). */
  setLocal(id: string, input: LocalInput | undefined): void {
    const old = this.locals.get(id);
    // Source pods whose standing this may change: the same pod, and pods that still claim an
    // address knit gives (or gave) this one.
    const affected = new Set<string>();
    for (const l of [old, input]) {
      if (!l) continue;
      affected.add(podKey(l));
      for (const ip of l.ips) for (const k of this.sourcesByIp.get(canonical(ip)) ?? []) affected.add(k);
    }
    if (old) {
      removeFrom(this.localIdsByKey, podKey(old), id);
      removeFrom(this.localIdsByNs, old.namespace, id);
      for (const ip of old.ips) {
        const n = this.localIps.get(canonical(ip))! - 1;
        if (n) this.localIps.set(canonical(ip), n);
        else this.localIps.delete(canonical(ip));
      }
    }
    if (input) {
      this.locals.set(id, input);
      addTo(this.localIdsByKey, podKey(input), id);
      addTo(this.localIdsByNs, input.namespace, id);
      for (const ip of input.ips) this.localIps.set(canonical(ip), (this.localIps.get(canonical(ip)) ?? 0) + 1);
    } else this.locals.delete(id);
    for (const k of affected) this.peers.set(SOURCE + k, this.visible(k), this.touchSet);
    this.refreshLocal(id);
    this.selfDirty = true;
  }

  /** Recomputes what the changes since the last flush reach; answers what it touched. */
  flush(): Touched {
    for (const id of this.dirtyLocals) this.recomputeLocal(id);
    this.dirtyLocals.clear();
    // Many policies' rules name the same peers and ports (every namespace's "from the ingress
    // controller on 8080"): their sets hold the same elements, computed once per flush.
    const computed = new Map<string, SetSpec>();
    for (const name of this.dirtySets) {
      const rec = this.setRecords.get(name);
      if (!rec) continue; // gone meanwhile
      const content = setContentKey(rec.def);
      let spec = computed.get(content);
      if (!spec) {
        spec = ruleSet(rec.def, (p, peer) => this.peers.members(groupKeyOfPeer(p, peer)), (ranges, family) => this.peers.members(groupKeyOfBlock(family, ranges)));
        computed.set(content, spec);
      }
      const old = this.ruleset.sets.get(name);
      if (old && sameElements(old, spec)) continue;
      this.ruleset.sets.set(name, spec);
      this.touched.sets.add(name);
    }
    this.dirtySets.clear();
    if (this.selfDirty) {
      this.selfDirty = false;
      const self: PolicyRuleset['self'] = { 4: [], 6: [] };
      for (const l of this.locals.values()) for (const ip of l.ips) {
        const a = tryParseIp(ip);
        if (a) self[a.family].push(formatIp(a));
      }
      for (const f of [4, 6] as const) {
        self[f].sort();
        if (self[f].join() !== this.ruleset.self[f].join()) this.touched.self = true;
      }
      this.ruleset.self = self;
    }
    if (this.touched.counters.size) this.ruleset.counters = [...this.counterRefs.keys()].sort();
    // The log's one limit, while a chain logs through it.
    if (this.logging) {
      const { name, spec } = this.logging.limit;
      const wanted = this.ruleset.chains.size > 0;
      if (wanted !== this.ruleset.limits.has(name)) {
        if (wanted) this.ruleset.limits.set(name, spec);
        else this.ruleset.limits.delete(name);
        this.touched.limits.add(name);
      }
    }
    const done = this.touched;
    this.touched = noneTouched();
    return done;
  }

  /** A normalized policy, for its problems. */
  policy(key: string): Policy | undefined {
    return this.policies.get(key);
  }

  /** The counters of the share and what each counts. */
  counters(): CounterDef[] {
    return [...this.counterRefs.values()].map((c) => c.def);
  }

  /** The view the share is compiled from (source pods a pod of this node replaces left out),
   * for the oracle (ExplainPolicy). */
  view(): PolicyView {
    // Source pods that hold an address knit gave a pod of this node, found by address.
    const shadowed = new Set([...this.localIps.keys()].flatMap((ip) => [...(this.sourcesByIp.get(ip) ?? [])]));
    const pods: PolicyPod[] = [];
    for (const [key, pod] of this.sources) if (!this.localIdsByKey.has(key) && !shadowed.has(key)) pods.push(pod);
    pods.push(...this.localPods.values());
    return { policies: [...this.rawPolicies.values()], namespaces: [...this.namespaces.values()], pods, nodes: {} };
  }

  /** This node's pods as the share compiles them (ClusterNetworkPolicy's tiers take the same). */
  localShare(): LocalPod[] {
    return [...this.localPods.values()];
  }

  /** The pod at an address in that view (the denied log names both ends by it). */
  podAt(ip: string): PolicyPod | undefined {
    const c = canonical(ip);
    if (this.localIps.has(c)) {
      for (const pod of this.localPods.values()) if (isPeerPod(pod) && pod.ips.some((a) => canonical(a) === c)) return pod;
    }
    for (const key of this.sourcesByIp.get(c) ?? []) {
      const pod = this.visible(key);
      if (pod) return pod;
    }
    return undefined;
  }

  private namespaceLabels(ns: string): Record<string, string> {
    let labels = this.nsLabels.get(ns);
    if (!labels) this.nsLabels.set(ns, (labels = { ...this.namespaces.get(ns)?.labels, [NAMESPACE_NAME_LABEL]: ns }));
    return labels;
  }

  /** A source pod as a peer: not when a pod of this node is it, or holds one of its addresses
   * (a deleted pod not yet gone from the source). */
  private visible(key: string): PolicyPod | undefined {
    const pod = this.sources.get(key);
    if (!pod || !isPeerPod(pod) || this.localIdsByKey.has(key)) return undefined;
    return pod.ips.some((ip) => this.localIps.has(canonical(ip))) ? undefined : pod;
  }

  /** A pod of this node as policy sees it: the source's labels and ports where it has the pod,
   * else what its admit learned, else unknown; its addresses always knit's. */
  private refreshLocal(id: string): void {
    const l = this.locals.get(id);
    this.dirtyLocals.add(id);
    if (!l) {
      this.localPods.delete(id);
      this.peers.set(LOCAL + id, undefined, this.touchSet);
      return;
    }
    const known = this.sources.get(podKey(l)) ?? (l.seen === 'unknown' ? undefined : l.seen);
    const pod: LocalPod = { namespace: l.namespace, name: l.name, labels: known?.labels ?? {}, ips: l.ips, node: this.nodeName, ports: known?.ports ?? [], ...(!known && { unknown: true }) };
    this.localPods.set(id, pod);
    this.peers.set(LOCAL + id, isPeerPod(pod) ? pod : undefined, this.touchSet);
  }

  /** One pod of this node's chains, map entries, counters and sets, moved from what they were
   * to what they are: what comes is taken before what goes is let go, so what both use stays. */
  private recomputeLocal(id: string): void {
    const old = this.shares.get(id);
    const pod = this.localPods.get(id);
    const next = pod && podShare(pod, this.policiesByNs.get(pod.namespace) ?? [], this.logging?.log);
    for (const c of next?.chains ?? []) {
      for (const s of c.sets) this.acquireSet(s.name, s.def);
      this.acquireChain(c.name, c.chain);
    }
    for (const c of next?.counters ?? []) this.acquireCounter(c);
    for (const c of old?.chains ?? []) {
      for (const s of c.sets) this.releaseSet(s.name);
      this.releaseChain(c.name);
    }
    for (const c of old?.counters ?? []) this.releaseCounter(c.name);
    const entries = (s: PodShare | undefined) => new Map((s?.chains ?? []).flatMap((c) => c.addrs.map((a) => [`${c.map} ${a}`, c.name] as const)));
    const before = entries(old);
    const after = entries(next);
    for (const [k, chain] of [...before, ...after]) {
      if (before.get(k) === after.get(k)) continue;
      const [map, addr] = k.split(' ') as [keyof PolicyRuleset['maps'], string];
      const target = after.get(k);
      if (target) this.ruleset.maps[map].set(addr, target);
      else if (this.ruleset.maps[map].get(addr) === chain) this.ruleset.maps[map].delete(addr);
      this.touched.maps[map].add(addr);
    }
    if (next) this.shares.set(id, next);
    else this.shares.delete(id);
  }

  private acquireSet(name: string, def: SetDef): void {
    let rec = this.setRecords.get(name);
    if (!rec) {
      rec = { def, groups: this.lookUpGroups(name, def), refs: 0 };
      this.setRecords.set(name, rec);
      this.dirtySets.add(name);
    } else if (rec.def.policy !== def.policy) {
      // The policy changed: its sets keep their names (named after the policy and the rule's
      // place), so what they hold is the new rule's. Every pod that looks one up was selected
      // by the old policy, so comes through here again.
      const groups = this.lookUpGroups(name, def);
      for (const g of rec.groups) if (!groups.includes(g)) this.peers.release(g, name);
      rec.def = def;
      rec.groups = groups;
      this.dirtySets.add(name);
    }
    rec.refs++;
  }

  private releaseSet(name: string): void {
    const rec = this.setRecords.get(name)!;
    if (--rec.refs) return;
    for (const g of rec.groups) this.peers.release(g, name);
    this.setRecords.delete(name);
    if (this.ruleset.sets.delete(name)) this.touched.sets.add(name);
  }

  /** The groups a set's elements come from: its selector peers, and for an egress named port
   * the blocks of its family (their pods resolve the name). */
  private lookUpGroups(name: string, def: SetDef): string[] {
    const keys = new Set<string>();
    const egressNamed = def.direction === 'egress' && def.rule.ports !== 'all' && def.rule.ports.some((m) => 'named' in m);
    // A rule without peers is every address: with an egress named port, every pod's number.
    const peers = def.rule.peers === 'all' ? [{ kind: 'block' as const, family: def.family, ranges: [fullRange(def.family)] }] : def.rule.peers;
    for (const peer of peers) {
      if (peer.kind === 'pods') {
        this.peers.acquirePeer(def.policy, peer, name);
        keys.add(groupKeyOfPeer(def.policy, peer));
      } else if (egressNamed && peer.family === def.family) {
        this.peers.acquireBlock(peer.family, peer.ranges, name);
        keys.add(groupKeyOfBlock(peer.family, peer.ranges));
      }
    }
    return [...keys];
  }

  private acquireChain(name: string, chain: GroupChain): void {
    const n = this.chainRefs.get(name) ?? 0;
    this.chainRefs.set(name, n + 1);
    if (n) return;
    this.ruleset.chains.set(name, chain);
    this.touched.chains.add(name);
  }

  private releaseChain(name: string): void {
    const n = this.chainRefs.get(name)! - 1;
    if (n) {
      this.chainRefs.set(name, n);
      return;
    }
    this.chainRefs.delete(name);
    this.ruleset.chains.delete(name);
    this.touched.chains.add(name);
  }

  private acquireCounter(def: CounterDef): void {
    const c = this.counterRefs.get(def.name);
    if (c) {
      c.refs++;
      return;
    }
    this.counterRefs.set(def.name, { def, refs: 1 });
    this.touched.counters.add(def.name);
  }

  private releaseCounter(name: string): void {
    const c = this.counterRefs.get(name)!;
    if (--c.refs) return;
    this.counterRefs.delete(name);
    this.touched.counters.add(name);
  }
}

/** What a set's elements depend on, and nothing else: two sets with the same key hold the same
 * elements (ruleSet reads the policy only through its peers' groups). */
function setContentKey(def: SetDef): string {
  const { policy, rule, direction, family, named } = def;
  const peers = rule.peers === 'all' ? 'all' : rule.peers.map((peer) => (peer.kind === 'pods' ? groupKeyOfPeer(policy, peer) : groupKeyOfBlock(peer.family, peer.ranges)));
  return JSON.stringify([family, direction, peers, rule.ports, named]);
}

function sameElements(a: SetSpec, b: SetSpec): boolean {
  return a.elements.length === b.elements.length && a.elements.every((e, i) => e === b.elements[i]);
}
