// The policy table in nftables terms: the whole table for a first start, what the kernel holds
// read back from `nft -j`, and the one transaction (an `nft -f` script) that turns the one
// into the other. Chains are named by their content and never change; sets, maps and the
// self set change element by element, so a pod or a policy changes only what it touches. The
// script is ordered so that every reference is valid at each command (the kernel checks them
// as it goes) and the kernel applies it whole or not at all: no packet sees a state between.
import { tryParseIp, formatIp, type IpFamily } from '../ipam/ip.js';
import { intervalText, type Box, boxText } from './boxes.js';
import { allowCounter, denyCounter, emptyMaps, shortHash, MAP_NAMES, type GroupChain, type MapName, type PolicyRuleset } from './compile.js';
import { chainRank, isTierChain, tierChainRules, type TierChain } from './cluster-policy-nft.js';

/** The base chain's name carries the layout's version: a knit that finds another rebuilds
 * the table whole, in one transaction. 2: the input chain and the local maps. */
export const BASE_CHAIN = 'forward2';
/** The base chain of pods' traffic to their own node (ClusterNetworkPolicy's egress there). */
export const INPUT_CHAIN = 'input2';

/** A set as the kernel holds it. */
export interface KernelSet {
  family: IpFamily;
  kind: 'addr' | 'concat' | 'self';
  elements: Set<string>;
}

/** The table as the kernel holds it, in the compiler's terms. */
export interface KernelPolicy {
  base: boolean;
  sets: Map<string, KernelSet>;
  maps: Record<MapName, Map<string, string>>;
  chains: Set<string>;
  counters: Set<string>;
  limits: Set<string>;
}

const ipKw = (f: IpFamily) => (f === 4 ? 'ip' : 'ip6');
const addrType = (f: IpFamily) => (f === 4 ? 'ipv4_addr' : 'ipv6_addr');

function setDecl(name: string, s: { family: IpFamily; kind: 'addr' | 'concat' | 'self' }): string {
  const t = addrType(s.family);
  if (s.kind === 'self') return `set ${name} { type ${t} . ${t}; }`;
  if (s.kind === 'addr') return `set ${name} { type ${t}; flags interval; }`;
  return `set ${name} { type ${t} . inet_proto . inet_service; flags interval; }`;
}

/** A group chain's rules: the node always reaches its pods; each allowing rule is one lookup;
 * what none allows is counted against each selecting policy, logged (within the rate, with
 * the chain's name as prefix: the log's reader finds the policies by it) and dropped. A tier
 * chain's rules are cluster-policy-nft.ts's. */
export function chainRules(name: string, c: GroupChain | TierChain): string[] {
  if (isTierChain(c)) return tierChainRules(c);
  const ip = ipKw(c.family);
  const peer = c.direction === 'ingress' ? 'saddr' : 'daddr';
  const rules: string[] = [];
  if (c.direction === 'ingress') rules.push('fib saddr type local accept');
  for (const r of c.rules) {
    const counter = `counter name "${allowCounter(r.policy, c.direction)}"`;
    if (!r.set) rules.push(`${counter} return`);
    else if (r.lookup === 'addr') rules.push(`${ip} ${peer} @${r.set} ${counter} return`);
    else rules.push(`${ip} ${peer} . meta l4proto . th dport @${r.set} ${counter} return`);
  }
  for (const p of c.policies) rules.push(`counter name "${denyCounter(p, c.direction)}"`);
  if (c.log) rules.push(`limit name "${c.log.limit}" log prefix "${name}" group ${c.log.group}`);
  rules.push('drop');
  return rules;
}

/** Replies of allowed connections pass; ND and router discovery pass; a pod may reach
 * itself; then each packet to an isolated pod goes through its ingress chain, each packet from
 * one through its egress chain. */
function baseRules(): string[] {
  return [
    'type filter hook forward priority filter; policy accept;',
    'ct state established,related ct direction reply accept',
    'icmpv6 type { nd-router-solicit, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert, nd-redirect } accept',
    'ip saddr . ip daddr @self4 accept',
    'ip6 saddr . ip6 daddr @self6 accept',
    'ip daddr vmap @in4',
    'ip6 daddr vmap @in6',
    'ip saddr vmap @out4',
    'ip6 saddr vmap @out6',
  ];
}

/** A pod's packets to its own node: replies and ND pass; the rest through its local chain. */
function inputRules(): string[] {
  return [
    'type filter hook input priority filter; policy accept;',
    'ct state established,related ct direction reply accept',
    'icmpv6 type { nd-router-solicit, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert, nd-redirect } accept',
    'ip saddr vmap @local4',
    'ip6 saddr vmap @local6',
  ];
}

const selfSet = (f: IpFamily, addrs: string[]): KernelSet => ({ family: f, kind: 'self', elements: new Set(addrs.map((a) => `${a} . ${a}`)) });
const SELF_SETS = ['self4', 'self6'] as const;

/** One set of the ruleset in the kernel's shape, the self sets included. */
function wantedSet(r: PolicyRuleset, name: string): KernelSet | undefined {
  if (name === 'self4' || name === 'self6') return selfSet(name === 'self4' ? 4 : 6, r.self[name === 'self4' ? 4 : 6]);
  const s = r.sets.get(name);
  return s && { family: s.family, kind: s.kind, elements: new Set(s.elements) };
}

/** The compiler's ruleset in the kernel's shape (what a diff compares), copied. */
export function wanted(r: PolicyRuleset): KernelPolicy {
  const sets: KernelPolicy['sets'] = new Map();
  for (const name of [...SELF_SETS, ...r.sets.keys()]) sets.set(name, wantedSet(r, name)!);
  const maps = Object.fromEntries(MAP_NAMES.map((m) => [m, new Map(r.maps[m])])) as KernelPolicy['maps'];
  return { base: true, sets, maps, chains: new Set(r.chains.keys()), counters: new Set(r.counters), limits: new Set(r.limits.keys()) };
}

export const emptyKernel = (): KernelPolicy => ({
  base: false, sets: new Map(), maps: emptyMaps(), chains: new Set(), counters: new Set(), limits: new Set(),
});

/** What one incremental change touched, by name (src/policy/incremental.ts): a transaction
 * given it looks at these alone, however large the rest of the table. */
export interface Touched {
  sets: Set<string>;
  chains: Set<string>;
  counters: Set<string>;
  /** The denied log's limit objects (networkPolicy.logDenied). */
  limits: Set<string>;
  maps: Record<MapName, Set<string>>;
  /** The self sets (this node's pods' addresses). */
  self: boolean;
}

export const noneTouched = (): Touched => ({
  sets: new Set(), chains: new Set(), counters: new Set(), limits: new Set(), self: false,
  maps: Object.fromEntries(MAP_NAMES.map((m) => [m, new Set<string>()])) as Record<MapName, Set<string>>,
});

/** Every name any of `ts` names: an incremental pass's own, and the names the tiers hold
 * (cluster-policy-compile.ts, tierNames) before and after it. */
export function mergeTouched(...ts: Touched[]): Touched {
  const out = noneTouched();
  for (const t of ts) {
    for (const k of ['sets', 'chains', 'counters', 'limits'] as const) for (const n of t[k]) out[k].add(n);
    for (const m of MAP_NAMES) for (const a of t.maps[m]) out.maps[m].add(a);
    out.self ||= t.self;
  }
  return out;
}

/** The names a transaction compares: what `only` names, else everything on either side. */
function namesToCompare(have: KernelPolicy, want: PolicyRuleset, only: Touched | undefined) {
  if (only) {
    return {
      sets: [...(only.self ? SELF_SETS : []), ...only.sets],
      chains: [...only.chains],
      counters: [...only.counters],
      limits: [...only.limits],
      maps: (m: MapName) => [...only.maps[m]],
    };
  }
  return {
    sets: [...new Set([...SELF_SETS, ...want.sets.keys(), ...have.sets.keys()])],
    chains: [...new Set([...want.chains.keys(), ...have.chains])].filter((c) => c !== BASE_CHAIN),
    counters: [...new Set([...want.counters, ...have.counters])],
    limits: [...new Set([...want.limits.keys(), ...have.limits])],
    maps: (m: MapName) => [...new Set([...want.maps[m].keys(), ...have.maps[m].keys()])],
  };
}

/** The one transaction from `have` to `want`. Empty when nothing differs. A table without
 * this layout's base chain is made anew (created, or deleted and made again, in the same
 * transaction). With `only`, the names an incremental change touched are compared and nothing
 * else; without, the whole table (a start, a table read back from the kernel). */
export function transaction(table: string, have: KernelPolicy, wantRs: PolicyRuleset, only?: Touched): string {
  const T = `inet ${table}`;
  const out: string[] = [];
  if (!have.base) {
    // A first start, or a table of another layout: replaced whole, atomically.
    const want = wanted(wantRs);
    out.push(`table ${T}`, `delete table ${T}`, `table ${T} {`);
    for (const c of want.counters) out.push(`\tcounter ${c} { }`);
    for (const [name, spec] of wantRs.limits) out.push(`\tlimit ${name} { ${spec} }`);
    for (const [name, s] of want.sets) out.push(`\t${setDecl(name, s)}`);
    for (const m of MAP_NAMES) out.push(`\tmap ${m} { type ${addrType(m.endsWith('4') ? 4 : 6)} : verdict; }`);
    for (const name of want.chains) out.push(`\tchain ${name} {`, ...chainRules(name, wantRs.chains.get(name)!).map((r) => `\t\t${r}`), '\t}');
    out.push(`\tchain ${BASE_CHAIN} {`, ...baseRules().map((r) => `\t\t${r}`), '\t}');
    out.push(`\tchain ${INPUT_CHAIN} {`, ...inputRules().map((r) => `\t\t${r}`), '\t}', '}');
    for (const [name, s] of want.sets) if (s.elements.size) out.push(`add element ${T} ${name} { ${[...s.elements].join(', ')} }`);
    for (const m of MAP_NAMES) if (want.maps[m].size) out.push(`add element ${T} ${m} { ${[...want.maps[m]].map(([a, c]) => `${a} : jump ${c}`).join(', ')} }`);
    return `${out.join('\n')}\n`;
  }
  const names = namesToCompare(have, wantRs, only);
  const wantSets = new Map(names.sets.map((n) => [n, wantedSet(wantRs, n)] as const));
  const wantCounters = new Set(wantRs.counters);
  // 1. New counters, limits and sets; a set whose family or kind changed has another name already.
  for (const c of names.counters) if (wantCounters.has(c) && !have.counters.has(c)) out.push(`add counter ${T} ${c}`);
  for (const name of names.limits) if (wantRs.limits.has(name) && !have.limits.has(name)) out.push(`add limit ${T} ${name} { ${wantRs.limits.get(name)} }`);
  for (const [name, s] of wantSets) if (s && !have.sets.has(name)) out.push(`add ${setDecl(name, s).replace(/^set /, `set ${T} `)}`);
  // 2. Elements: what goes first (a disjoint cover may be cut differently now), then what comes.
  for (const [name, s] of wantSets) {
    if (!s) continue;
    const old = have.sets.get(name);
    const gone = old ? [...old.elements].filter((e) => !s.elements.has(e)) : [];
    const come = [...s.elements].filter((e) => !old?.elements.has(e));
    if (gone.length) out.push(`delete element ${T} ${name} { ${gone.join(', ')} }`);
    if (come.length) out.push(`add element ${T} ${name} { ${come.join(', ')} }`);
  }
  // 3. New chains, whole: a chain after the chains it goes to (group, Baseline, then Admin).
  const newChains = names.chains.filter((name) => wantRs.chains.has(name) && !have.chains.has(name));
  for (const name of newChains.sort((a, b) => chainRank(b) - chainRank(a))) out.push(`add chain ${T} ${name}`, ...chainRules(name, wantRs.chains.get(name)!).map((r) => `add rule ${T} ${name} ${r}`));
  // 4. The maps: a pod that moves to another chain is deleted and added in this same step.
  for (const m of MAP_NAMES) {
    const keys = names.maps(m);
    const gone = keys.filter((a) => have.maps[m].has(a) && want(m, a) !== have.maps[m].get(a));
    const come = keys.filter((a) => want(m, a) !== undefined && want(m, a) !== have.maps[m].get(a));
    if (gone.length) out.push(`delete element ${T} ${m} { ${gone.join(', ')} }`);
    if (come.length) out.push(`add element ${T} ${m} { ${come.map((a) => `${a} : jump ${want(m, a)}`).join(', ')} }`);
  }
  // 5. What nothing uses any more: chains, then the sets, counters and limits they used.
  // A tier chain goes before the chains it goes to (the kernel refuses a chain still in use).
  const goneChains = names.chains.filter((name) => have.chains.has(name) && !wantRs.chains.has(name));
  for (const name of goneChains.sort((a, b) => chainRank(a) - chainRank(b))) out.push(`delete chain ${T} ${name}`);
  for (const [name, s] of wantSets) if (!s && have.sets.has(name)) out.push(`delete set ${T} ${name}`);
  for (const c of names.counters) if (have.counters.has(c) && !wantCounters.has(c)) out.push(`delete counter ${T} ${c}`);
  for (const name of names.limits) if (have.limits.has(name) && !wantRs.limits.has(name)) out.push(`delete limit ${T} ${name}`);
  return out.length ? `${out.join('\n')}\n` : '';

  function want(m: MapName, a: string): string | undefined {
    return wantRs.maps[m].get(a);
  }
}

/** The kernel's table once a transaction to `want` (with the same `only`) is in: the names it
 * compared now hold what `want` holds. The base chain counts among the chains. */
export function committed(have: KernelPolicy, want: PolicyRuleset, only?: Touched): KernelPolicy {
  if (!only || !have.base) {
    const k = wanted(want);
    k.chains.add(BASE_CHAIN);
    return k;
  }
  const names = namesToCompare(have, want, only);
  for (const name of names.sets) {
    const s = wantedSet(want, name);
    if (s) have.sets.set(name, s);
    else have.sets.delete(name);
  }
  for (const name of names.chains) {
    if (want.chains.has(name)) have.chains.add(name);
    else have.chains.delete(name);
  }
  const counters = new Set(want.counters);
  for (const c of names.counters) {
    if (counters.has(c)) have.counters.add(c);
    else have.counters.delete(c);
  }
  for (const l of names.limits) {
    if (want.limits.has(l)) have.limits.add(l);
    else have.limits.delete(l);
  }
  for (const m of MAP_NAMES) {
    for (const a of names.maps(m)) {
      const c = want.maps[m].get(a);
      if (c) have.maps[m].set(a, c);
      else have.maps[m].delete(a);
    }
  }
  return have;
}

// ---- reading the kernel ---------------------------------------------------------------

type JsonValue = string | number | { prefix: { addr: string; len: number } } | { range: [JsonValue, JsonValue] } | { concat: JsonValue[] };

/** `nft -j -p list table inet <table>` (numeric protocols) in the compiler's shape. Chains
 * count by name (their content is their name); elements are read back into their canonical
 * text, so an element reads as it was written. */
export function parseKernel(json: string): KernelPolicy {
  const k = emptyKernel();
  const objects = (JSON.parse(json) as { nftables: Record<string, any>[] }).nftables;
  for (const o of objects) {
    if (o.chain) {
      if (o.chain.name === BASE_CHAIN) k.base = true;
      else if (o.chain.name !== INPUT_CHAIN) k.chains.add(o.chain.name);
    } else if (o.counter) k.counters.add(o.counter.name);
    else if (o.limit) k.limits.add(o.limit.name);
    else if (o.map && MAP_NAMES.includes(o.map.name)) {
      for (const [key, verdict] of (o.map.elem ?? []) as [string, { jump?: { target: string } }][]) {
        if (verdict.jump) k.maps[o.map.name as MapName].set(formatIp(tryParseIp(key)!), verdict.jump.target);
      }
    } else if (o.set) {
      const type = o.set.type as string | string[];
      const family: IpFamily = (Array.isArray(type) ? type[0] : type) === 'ipv4_addr' ? 4 : 6;
      const kind = !Array.isArray(type) ? 'addr' : type.length === 2 ? 'self' : 'concat';
      const elements = new Set<string>(((o.set.elem ?? []) as JsonValue[]).map((e) => elementText(family, kind, e)));
      k.sets.set(o.set.name, { family, kind, elements });
    }
  }
  return k;
}

function interval(family: IpFamily, v: JsonValue): [bigint, bigint] {
  if (typeof v === 'string') {
    const a = tryParseIp(v)!.value;
    return [a, a];
  }
  if (typeof v === 'object' && 'prefix' in v) {
    const base = tryParseIp(v.prefix.addr)!.value;
    const host = BigInt((family === 4 ? 32 : 128) - v.prefix.len);
    return [base, base + (1n << host) - 1n];
  }
  if (typeof v === 'object' && 'range' in v) return [interval(family, v.range[0])[0], interval(family, v.range[1])[1]];
  throw new Error(`nft element part ${JSON.stringify(v)} is not an address`);
}

function numbers(v: JsonValue): [number, number] {
  if (typeof v === 'number') return [v, v];
  if (typeof v === 'object' && 'range' in v) return [numbers(v.range[0])[0], numbers(v.range[1])[1]];
  throw new Error(`nft element part ${JSON.stringify(v)} is not a number (list with -p)`);
}

function elementText(family: IpFamily, kind: 'addr' | 'concat' | 'self', e: JsonValue): string {
  if (kind === 'addr') return intervalText(family, ...interval(family, e));
  const parts = (e as { concat: JsonValue[] }).concat;
  if (kind === 'self') return parts.map((p) => intervalText(family, ...interval(family, p))).join(' . ');
  const [lo, hi] = interval(family, parts[0]!);
  const [plo, phi] = numbers(parts[1]!);
  const [tlo, thi] = numbers(parts[2]!);
  const b: Box = { lo, hi, plo, phi, tlo, thi };
  return boxText(family, b);
}

/** The chain of a pod nothing is known of: the node reaches it, nothing else passes. */
export function isolationChain(direction: GroupChain['direction'], family: IpFamily): [string, GroupChain] {
  const chain: GroupChain = { direction, family, rules: [], policies: [] };
  return [`g${direction[0]}${family}_${shortHash(JSON.stringify(chain))}`, chain];
}

/** While the cluster is not known yet (a start with the API down): the table as the kernel
 * holds it, with the addresses of pods that came meanwhile isolated both ways (fail closed)
 * and those of pods that went taken out of the maps. Nothing else changes. */
export function heldWithChanges(have: KernelPolicy, keep: (ip: string) => boolean, isolate: string[]): PolicyRuleset {
  const rs: PolicyRuleset = {
    sets: new Map(), chains: new Map(),
    maps: emptyMaps(),
    self: { 4: [], 6: [] }, counters: [...have.counters],
    // Kept as they are: the chains that use them stay (their spec is never written again).
    limits: new Map([...have.limits].map((name) => [name, ''])),
  };
  for (const [name, s] of have.sets) if (s.kind !== 'self') rs.sets.set(name, { family: s.family, kind: s.kind, elements: [...s.elements] });
  // Chains the kernel holds stay as they are (their content is their name).
  for (const name of have.chains) if (name !== BASE_CHAIN) rs.chains.set(name, { direction: 'ingress', family: 4, rules: [], policies: [] });
  for (const m of MAP_NAMES) for (const [ip, c] of have.maps[m]) if (keep(ip)) rs.maps[m].set(ip, c);
  for (const f of [4, 6] as const) for (const e of have.sets.get(`self${f}`)?.elements ?? []) if (keep(e.split(' . ')[0]!)) rs.self[f].push(e.split(' . ')[0]!);
  for (const text of isolate) {
    const ip = tryParseIp(text);
    if (!ip) continue;
    const a = formatIp(ip);
    if (!rs.self[ip.family].includes(a)) rs.self[ip.family].push(a);
    for (const d of ['ingress', 'egress'] as const) {
      const [name, chain] = isolationChain(d, ip.family);
      rs.chains.set(name, chain);
      rs.maps[`${d === 'ingress' ? 'in' : 'out'}${ip.family}` as MapName].set(a, name);
    }
  }
  return rs;
}
