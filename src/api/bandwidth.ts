// Bandwidth limits: InterfaceRequest.bandwidth (bits per second and bits, the units of CNI's
// bandwidth plugin) and the pod annotations kubernetes.io/ingress-bandwidth and
// kubernetes.io/egress-bandwidth (Kubernetes quantities such as "10M"), which apply to the
// default interface (interfaces[0]).
//
// Rules (README "Bandwidth"):
// - a burst needs a rate; a rate without a burst gets the default burst, a tenth of a second at
//   the rate and at least 64 KiB (a burst below one packet would pass nothing);
// - a burst above 4 GiB (in bytes) is refused, as CNI's bandwidth plugin refuses it;
// - annotation values follow the kubelet's bounds, 1k..1P;
// - the request field and an annotation for the same direction must agree: a conflict is
//   refused, naming the annotation, rather than one silently overriding the other.
import { z } from 'zod/v3';
import { KnitError, quote } from '../base/errors.js';
import type { Bandwidth, InterfaceRequest } from '../base/types.js';

export const INGRESS_ANNOTATION = 'kubernetes.io/ingress-bandwidth';
export const EGRESS_ANNOTATION = 'kubernetes.io/egress-bandwidth';

const MAX_BITS = Number.MAX_SAFE_INTEGER;
const MAX_BURST_BITS = 8 * 2 ** 32;
const MIN_DEFAULT_BURST_BITS = 8 * 64 * 1024;

const short = (v: string) => quote(v, 24);

/** The burst used when a rate comes without one. */
export function defaultBurst(rate: number): number {
  return Math.min(MAX_BURST_BITS - 8, Math.max(MIN_DEFAULT_BURST_BITS, Math.ceil(rate / 10)));
}

function bitsProblem(text: string): string | undefined {
  return /^\d{1,16}$/.test(text) && Number(text) <= MAX_BITS ? undefined : `${short(text)} is not a whole number of bits up to 2^53`;
}

/** One uint64 field: a decimal string from the wire (or a number from a JS caller). */
const bits = z
  .union([z.string(), z.number()])
  .default('0')
  .transform((v) => String(v))
  .superRefine((text, ctx) => {
    const problem = bitsProblem(text);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  })
  .transform(Number);

function direction(rate: number, burst: number) {
  return rate ? { rate, burst: burst || defaultBurst(rate) } : undefined;
}

/** InterfaceRequest.bandwidth -> the core form (undefined: no limit either way). */
export const bandwidthSchema = z
  .object({ ingress_rate: bits, ingress_burst: bits, egress_rate: bits, egress_burst: bits })
  .nullish()
  .superRefine((b, ctx) => {
    if (!b) return;
    for (const way of ['ingress', 'egress'] as const) {
      const burst = b[`${way}_burst`];
      if (burst && !b[`${way}_rate`]) ctx.addIssue({ code: 'custom', message: `is set but ${way}_rate is not`, path: [`${way}_burst`] });
      else if (burst >= MAX_BURST_BITS) ctx.addIssue({ code: 'custom', message: `${burst} bits is more than 4 GiB`, path: [`${way}_burst`] });
    }
  })
  .transform((b): Bandwidth | undefined => {
    if (!b) return undefined;
    const ingress = direction(b.ingress_rate, b.ingress_burst);
    const egress = direction(b.egress_rate, b.egress_burst);
    if (!ingress && !egress) return undefined;
    return { ...(ingress ? { ingress } : {}), ...(egress ? { egress } : {}) };
  });

const SUFFIXES: Record<string, number> = {
  '': 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60,
};

/** A Kubernetes quantity ("10M", "1.5Gi", "100000") as bits per second, within 1k..1P. */
export function parseQuantity(text: string, field: string): number {
  const m = /^(\d+(?:\.\d+)?)(k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/.exec(text.trim());
  if (!m) throw KnitError.invalid(field, `${short(text)} is not a quantity such as "10M" (bits per second)`);
  const value = Math.round(Number(m[1]) * SUFFIXES[m[2] ?? '']!);
  if (value < 1e3 || value > 1e15) throw KnitError.invalid(field, `${short(text)} is outside 1k..1P bits per second`);
  return value;
}

/**
 * Merge the pod's bandwidth annotations into the default interface. Returns the interfaces
 * unchanged when no annotation is set.
 */
export function applyBandwidthAnnotations(interfaces: InterfaceRequest[], annotations: Record<string, string>): InterfaceRequest[] {
  const ways = [
    ['ingress', INGRESS_ANNOTATION],
    ['egress', EGRESS_ANNOTATION],
  ] as const;
  const first = interfaces[0];
  if (!first || !ways.some(([, key]) => key in annotations)) return interfaces;
  const bandwidth: Bandwidth = { ...first.bandwidth };
  for (const [way, key] of ways) {
    const text = annotations[key];
    if (text === undefined) continue;
    const field = `annotations[${quote(key)}]`;
    const rate = parseQuantity(text, field);
    const given = bandwidth[way];
    if (given && given.rate !== rate) {
      throw KnitError.invalid(field, `${short(text)} (${rate} bit/s) conflicts with interfaces[0].bandwidth.${way}_rate (${given.rate})`);
    }
    bandwidth[way] = given ?? { rate, burst: defaultBurst(rate) };
  }
  return [{ ...first, bandwidth }, ...interfaces.slice(1)];
}
