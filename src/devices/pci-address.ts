// PCI addresses (BDF, "DDDD:BB:DD.F", the sysfs spelling) and the DRA device names derived from
// them. A DRA device name must be a DNS label, so "0000:3b:02.1" is published as
// "pci-0000-3b-02-1"; the mapping is reversible, so a claim's device name leads straight back
// to the sysfs directory without scanning the inventory.
import { KnitError } from '../base/errors.js';

const BDF = /^([0-9a-f]{4}):([0-9a-f]{2}):([01][0-9a-f])\.([0-7])$/i;
const SHORT_BDF = /^([0-9a-f]{2}):([01][0-9a-f])\.([0-7])$/i;
const DEVICE_NAME = /^pci-([0-9a-f]{4})-([0-9a-f]{2})-([01][0-9a-f])-([0-7])$/;

/** Lower-case, domain-qualified BDF; "3b:02.1" gets domain 0000. undefined if not a BDF. */
export function normalizeBdf(text: string): string | undefined {
  const v = text.trim();
  if (BDF.test(v)) return v.toLowerCase();
  if (SHORT_BDF.test(v)) return `0000:${v.toLowerCase()}`;
  return undefined;
}

/** normalizeBdf that throws INVALID_ARGUMENT naming the field. */
export function parseBdf(text: string, field: string): string {
  const bdf = normalizeBdf(text);
  if (!bdf) throw KnitError.invalid(field, `${JSON.stringify(text)} is not a PCI address (DDDD:BB:DD.F)`);
  return bdf;
}

export function isBdf(text: string): boolean {
  return BDF.test(text);
}

/** "0000:3b:02.1" -> "pci-0000-3b-02-1" */
export function draDeviceName(bdf: string): string {
  const m = BDF.exec(bdf);
  if (!m) throw new Error(`draDeviceName: ${JSON.stringify(bdf)} is not a BDF`);
  return `pci-${m[1]}-${m[2]}-${m[3]}-${m[4]}`.toLowerCase();
}

/** "pci-0000-3b-02-1" -> "0000:3b:02.1"; undefined for names knit did not make. */
export function bdfFromDraDeviceName(name: string): string | undefined {
  const m = DEVICE_NAME.exec(name);
  return m ? `${m[1]}:${m[2]}:${m[3]}.${m[4]}` : undefined;
}
