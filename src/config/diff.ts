// What a config reload changes about the networks: the daemon logs it and removes the bridges
// of dropped networks (IPAM has already refused a drop that would strand held addresses).

import type { KnitConfig, NetworkConfig } from './resolve.js';

export interface NetworkChange {
  name: string;
  /** Top-level keys that differ, e.g. ["mtu", "ipv4"]. */
  keys: string[];
}

export interface NetworkDiff {
  added: string[];
  removed: string[];
  changed: NetworkChange[];
  unchanged: string[];
}

export function diffNetworks(old: readonly NetworkConfig[], next: readonly NetworkConfig[]): NetworkDiff {
  const before = new Map(old.map((n) => [n.name, n]));
  const after = new Map(next.map((n) => [n.name, n]));
  const diff: NetworkDiff = { added: [], removed: [], changed: [], unchanged: [] };
  for (const name of before.keys()) if (!after.has(name)) diff.removed.push(name);
  for (const [name, net] of after) {
    const prev = before.get(name);
    if (!prev) {
      diff.added.push(name);
      continue;
    }
    const keys = [...new Set([...Object.keys(prev), ...Object.keys(net)])].filter(
      (k) => canonicalJson(prev[k as keyof NetworkConfig]) !== canonicalJson(net[k as keyof NetworkConfig]),
    );
    if (keys.length) diff.changed.push({ name, keys });
    else diff.unchanged.push(name);
  }
  return diff;
}

/** Same config, whatever the key order. */
export function sameConfig(a: KnitConfig, b: KnitConfig): boolean {
  return canonicalJson(a) === canonicalJson(b);
}

/** JSON with object keys sorted, so equal values give equal text. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  ) ?? 'undefined';
}
