// Number formatting and the reference contenders the ratios are taken against.
import type { BenchResults } from '../lib/results.js';

/** Milliseconds with about three significant digits. */
export function ms(v: number | undefined): string {
  if (v === undefined || !Number.isFinite(v)) return '–';
  if (v < 1) return v.toFixed(3);
  if (v < 10) return v.toFixed(2);
  if (v < 100) return v.toFixed(1);
  return v.toFixed(0);
}

/** a ÷ b as "0.42×" (– when either is missing). */
export function ratio(a: number | undefined, b: number | undefined): string {
  if (a === undefined || b === undefined || !Number.isFinite(a) || !Number.isFinite(b) || b === 0) return '–';
  const r = a / b;
  return `${r < 10 ? r.toFixed(2) : r.toFixed(1)}×`;
}

/** The floor the ratios use: the C program when it ran, else ip -batch. */
export function floorName(r: BenchResults): string | undefined {
  return ['floor-c', 'floor-ip'].find((n) => (r.latency[n]?.attach.length ?? 0) > 0);
}

export const COLORS: Record<string, string> = {
  knit: '#c0392b',
  cni: '#1f6fb4',
  'floor-c': '#2e8b3a',
  'floor-ip': '#8c6d1f',
  grpc: '#7a7a7a',
  'knit-c': '#e67e22',
  'knit-cni': '#8e44ad',
  'knit-shim': '#d35400',
  'grpc-c': '#a0a0a0',
  'grpc-addon': '#16a085',
  'grpc-addon-v8default': '#48c9b0',
  'grpc-cni': '#2c3e50',
  'knit-v8default': '#e84393',
};

export function color(name: string): string {
  return COLORS[name] ?? '#555555';
}

export function labelOf(r: BenchResults, name: string): string {
  return r.contenders.find((c) => c.name === name)?.label ?? name;
}
