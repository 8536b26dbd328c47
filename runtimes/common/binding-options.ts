// Reading InterfaceRequest.binding (a string map of strategy options) with errors that name
// the exact field: "interfaces[1].binding.queues: ...".
import { KnitError, quote } from '../../src/base/errors.js';
import type { InterfaceRequest } from '../../src/base/types.js';
import type { InterfaceInput } from '../../src/base/strategy.js';

/** Position of the interface in the request (core passes the request's own object). */
export function interfaceIndex(input: InterfaceInput): number {
  const i = input.request.interfaces.indexOf(input.iface);
  return i >= 0 ? i : input.request.interfaces.findIndex((x) => x.name === input.iface.name);
}

export class BindingReader {
  readonly options: Record<string, string>;

  constructor(
    readonly index: number,
    iface: InterfaceRequest,
    known: readonly string[],
    runtime: string,
  ) {
    this.options = iface.binding ?? {};
    for (const key of Object.keys(this.options)) {
      if (known.includes(key)) continue;
      throw this.invalid(key, known.length ? `unknown ${runtime} option; known options: ${known.join(', ')}` : `${runtime} takes no binding options`);
    }
  }

  field(key: string): string {
    return `interfaces[${this.index}].binding.${key}`;
  }

  invalid(key: string, message: string): KnitError {
    return KnitError.invalid(this.field(key), message);
  }

  oneOf<T extends string>(key: string, allowed: readonly T[], fallback: T): T {
    const v = this.options[key];
    if (v === undefined) return fallback;
    if (!(allowed as readonly string[]).includes(v)) throw this.invalid(key, `"${v}" is not one of ${allowed.join(', ')}`);
    return v as T;
  }

  /** A decimal integer in [min, max]. */
  int(key: string, min: number, max: number, fallback: number): number {
    const v = this.options[key];
    if (v === undefined) return fallback;
    if (!/^\d{1,10}$/.test(v) || Number(v) < min || Number(v) > max) {
      throw this.invalid(key, `"${v}" is not an integer from ${min} to ${max}`);
    }
    return Number(v);
  }

  /** An absolute, normalised directory path. */
  dir(key: string, fallback: string): string {
    const v = this.options[key];
    if (v === undefined) return fallback;
    const parts = v.split('/');
    if (!v.startsWith('/') || v.includes('\0') || parts.some((p) => p === '..' || p === '.')) {
      throw this.invalid(key, `"${v}" is not an absolute directory path without . or .. segments`);
    }
    return v.length > 1 ? v.replace(/\/+$/, '') : v;
  }

  /** dir(), and it must be root (the default) or lie below it; `what` says what root is. */
  dirWithin(key: string, root: string, what: string): string {
    const v = this.dir(key, root);
    const r = root.length > 1 ? root.replace(/\/+$/, '') : root;
    if (v !== r && !v.startsWith(r === '/' ? '/' : `${r}/`)) {
      throw this.invalid(key, `${quote(this.options[key] ?? v)} is outside ${r}, ${what}`);
    }
    return v;
  }
}

/** Kernel link names: 1-15 bytes, no '/', ':', whitespace; '.' too, because sysctl keys that
 * name the device would split on it. */
export function checkLinkName(field: string, name: string): void {
  if (Buffer.byteLength(name) > 15 || !/^[A-Za-z0-9_-]+$/.test(name)) {
    throw KnitError.invalid(field, `"${name}" does not make a valid device name (1-15 of A-Z a-z 0-9 _ -)`);
  }
}
