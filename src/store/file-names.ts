// Record ids (CRI sandbox ids, Kubernetes names, any UTF-8) as file names, reversibly.
// Letters, digits, "_", "-" and non-leading "." stay as they are, so the common ids are
// readable on disk; every other UTF-8 byte becomes %XX (upper-case hex). A leading "." is
// escaped too, so no id can become ".", "..", or a hidden file. Decoding accepts only the
// canonical form, so two file names can never claim the same id.

import { KnitError } from '../base/errors.js';

export const RECORD_SUFFIX = '.json';
/** NAME_MAX (255 bytes) minus the suffix. */
const MAX_ENCODED = 255 - RECORD_SUFFIX.length;

const PLAIN = /[A-Za-z0-9_.-]/;
/** A lone UTF-16 surrogate has no UTF-8 form, so it could not round-trip. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** An id that is its own encoding: plain characters only, not starting with '.'. Sandbox ids
 * are (a runtime's hex, a pod's name), so their names cost one regex test, not a loop. */
const ENCODES_AS_ITSELF = /^[A-Za-z0-9_-][A-Za-z0-9_.-]*$/;

export function encodeId(id: string): string {
  if (id.length <= MAX_ENCODED && ENCODES_AS_ITSELF.test(id)) return id;
  if (id.length === 0) throw KnitError.invalid('id', 'must not be empty');
  if (LONE_SURROGATE.test(id)) throw KnitError.invalid('id', `${JSON.stringify(id)} is not well-formed Unicode`);
  let out = '';
  for (const byte of new TextEncoder().encode(id)) {
    const ch = String.fromCharCode(byte);
    out += byte < 0x80 && PLAIN.test(ch) && !(ch === '.' && out === '') ? ch : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  if (out.length > MAX_ENCODED) {
    throw KnitError.invalid('id', `${JSON.stringify(id.slice(0, 40))}... is too long to store (${out.length} bytes encoded, limit ${MAX_ENCODED})`);
  }
  return out;
}

/** The id a file name stands for, or undefined when it is not a canonical encoding. */
export function decodeId(encoded: string): string | undefined {
  if (encoded.length === 0 || encoded.length > MAX_ENCODED) return undefined;
  const bytes: number[] = [];
  for (let i = 0; i < encoded.length; i++) {
    const ch = encoded[i];
    if (ch === '%') {
      const hex = encoded.slice(i + 1, i + 3);
      if (!/^[0-9A-F]{2}$/.test(hex)) return undefined;
      bytes.push(parseInt(hex, 16));
      i += 2;
    } else if (PLAIN.test(ch)) {
      bytes.push(ch.charCodeAt(0));
    } else {
      return undefined;
    }
  }
  let id: string;
  try {
    id = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(new Uint8Array(bytes));
  } catch {
    return undefined;
  }
  try {
    return encodeId(id) === encoded ? id : undefined;
  } catch {
    return undefined;
  }
}

export const fileNameOf = (id: string): string => encodeId(id) + RECORD_SUFFIX;

/** The id of a record file name, or undefined for anything that is not one. */
export function idOfFileName(name: string): string | undefined {
  return name.endsWith(RECORD_SUFFIX) ? decodeId(name.slice(0, -RECORD_SUFFIX.length)) : undefined;
}
