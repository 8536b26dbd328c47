// Single-value checks. Each returns undefined when the value is fine, else the reason, phrased
// to follow "<field>: " (e.g. `"zz" is not a MAC address`). validate.ts wires them to fields.
import { isIP } from 'node:net';
import path from 'node:path';
import { quote } from '../base/errors.js';

const q = quote;

export type Problem = string | undefined;

export function sandboxIdProblem(v: string): Problem {
  if (v === '') return 'is required';
  if (v.length > 253) return `is ${v.length} characters long; the limit is 253`;
  if (v.includes('\0')) return 'contains a NUL byte';
  if (v.includes('/')) return `${q(v)} contains '/'`;
  // The id names files in the store: "." and ".." would name directories instead.
  if (v === '.' || v === '..') return `${q(v)} is not a usable sandbox id`;
  return undefined;
}

/** Free-text identity fields (pod name, namespace, uid, network names): short, one line. */
export function nameProblem(v: string, max = 253): Problem {
  if (v.length > max) return `is ${v.length} characters long; the limit is ${max}`;
  if (v.includes('/')) return `${q(v)} contains '/'`;
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x1f\x7f]/.test(v)) return `${q(v)} contains a control character`;
  return undefined;
}

/** A path the checks below would all pass, told by one regex: components of 1..85 UTF-16 units
 * (at most 255 bytes of UTF-8), none "." or "..", no NUL, no empty one (so normalized, with no
 * trailing slash). Every netns path a runtime sends looks like this; the rest take the long way,
 * which says what is wrong. */
const PLAIN_ABSOLUTE_PATH = /^(?:\/(?!\.\.?(?:\/|$))[^/\0]{1,85})+$/;

export function absolutePathProblem(v: string): Problem {
  if (v.length <= 4095 && PLAIN_ABSOLUTE_PATH.test(v)) return undefined;
  if (v.includes('\0')) return 'contains a NUL byte';
  if (!v.startsWith('/')) return `${q(v)} is not an absolute path`;
  if (v.split('/').includes('..')) return `${q(v)} contains '..'`;
  if (path.posix.normalize(v) !== v || (v.length > 1 && v.endsWith('/'))) {
    return `${q(v)} is not normalized (expected ${q(path.posix.normalize(v).replace(/(.)\/$/, '$1'))})`;
  }
  if (v.length > 4095) return `is ${v.length} bytes long; the limit is 4095`;
  const long = v.split('/').find((part) => Buffer.byteLength(part) > 255);
  if (long !== undefined) return `has a component of ${Buffer.byteLength(long)} bytes (${quote(long, 16)}); Linux allows 255 (NAME_MAX)`;
  return undefined;
}

/**
 * The host's netns (pid 1) and the daemon's own must never be handed to knit: attaching there
 * would rewire the node. This is the textual check; core also compares the nsfs inode.
 */
export function netnsPathProblem(v: string, daemonPid = process.pid): Problem {
  if (v === '') return 'is required';
  const p = absolutePathProblem(v);
  if (p) return p;
  const m = /^\/proc\/([^/]+)(?:\/task\/\d+)?\/ns\/net$/.exec(v);
  if (m) {
    if (m[1] === '1') return `${q(v)} is the host's network namespace`;
    if (m[1] === 'self' || m[1] === 'thread-self' || m[1] === String(daemonPid)) {
      return `${q(v)} is the knit daemon's own network namespace`;
    }
  }
  return undefined;
}

/** Linux interface names: 1..15 bytes (IFNAMSIZ-1), no '/', ':' or whitespace, not "." or "..". */
export function ifnameProblem(v: string): Problem {
  if (v === '') return 'is required';
  const bytes = Buffer.byteLength(v);
  if (bytes > 15) return `${q(v)} is ${bytes} bytes long; Linux allows 15`;
  if (v === '.' || v === '..') return `${q(v)} is not a valid interface name`;
  // The kernel reads a name with '%' as a template ("eth%d": the next free eth<N>), so the
  // device would not get the name asked for.
  if (v.includes('%')) return `${q(v)} contains '%', which Linux reads as a name template`;
  if (/[/:\s\0]/.test(v)) return `${q(v)} contains '/', ':', whitespace or NUL, which Linux does not allow in an interface name`;
  return undefined;
}

export function macProblem(v: string): Problem {
  if (!/^[0-9a-f]{2}([:-])[0-9a-f]{2}(\1[0-9a-f]{2}){4}$/i.test(v)) return `${q(v)} is not a MAC address`;
  const first = parseInt(v.slice(0, 2), 16);
  if (first & 1) return `${q(v)} is a multicast address; an interface needs a unicast MAC`;
  if (/^(00[:-]){5}00$/.test(v)) return `${q(v)} is the all-zero address`;
  return undefined;
}

/** Lower-case, colon-separated: the form the kernel reports. */
export function normalizeMac(v: string): string {
  return v.toLowerCase().replaceAll('-', ':');
}

export function mtuProblem(v: number): Problem {
  if (v === 0) return undefined; // unset: the network's MTU
  if (!Number.isInteger(v) || v < 68 || v > 65535) return `${v} is out of range 68..65535`;
  return undefined;
}

export function ipProblem(v: string): Problem {
  return isIP(v) ? undefined : `${q(v)} is not an IP address`;
}

export function cidrProblem(v: string): Problem {
  const slash = v.indexOf('/');
  if (slash < 0) return `${q(v)} is not a CIDR (address/prefix)`;
  const family = isIP(v.slice(0, slash));
  const prefixText = v.slice(slash + 1);
  if (!family) return `${q(v)} is not a CIDR: ${q(v.slice(0, slash))} is not an IP address`;
  const max = family === 4 ? 32 : 128;
  if (!/^\d{1,3}$/.test(prefixText) || Number(prefixText) > max) {
    return `${q(v)} is not a CIDR: the prefix must be 0..${max}`;
  }
  return undefined;
}

export function portProblem(v: number, allowZero: boolean): Problem {
  const min = allowZero ? 0 : 1;
  if (!Number.isInteger(v) || v < min || v > 65535) return `${v} is out of range ${min}..65535`;
  return undefined;
}

/** PCI address in sysfs form, DDDD:BB:DD.F */
export function bdfProblem(v: string): Problem {
  return /^[0-9a-f]{4}:[0-9a-f]{2}:[0-1][0-9a-f]\.[0-7]$/i.test(v)
    ? undefined
    : `${q(v)} is not a PCI address (DDDD:BB:DD.F)`;
}

export function searchDomainProblem(v: string): Problem {
  if (v === '') return 'must not be empty';
  if (v.length > 253 || /[\s\0]/.test(v)) return `${q(v)} is not a DNS name`;
  return undefined;
}
