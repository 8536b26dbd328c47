// The independent observer for kernel tests: iproute2's JSON output (`ip -j -d`, `tc -j`), run
// with execFileSync, optionally inside a named netns (`ip -n NAME`, `tc -n NAME`).
import { execFileSync } from 'node:child_process';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

function json(cmd: string, args: string[]): Json {
  const out = execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  return out.trim() ? JSON.parse(out) : [];
}

/** `ip -j -d [-n ns] ...args`; leading options ("-6") go before the object, where ip wants them. */
export function ip(ns: string | undefined, ...args: string[]): Json {
  const opts = args.filter((a, i) => a.startsWith('-') && args.slice(0, i).every((b) => b.startsWith('-')));
  return json('ip', ['-j', '-d', ...(ns ? ['-n', ns] : []), ...opts, ...args.slice(opts.length)]);
}

/** `tc -j [-n ns] ...args`. */
export function tc(ns: string | undefined, ...args: string[]): Json {
  return json('tc', ['-j', ...(ns ? ['-n', ns] : []), ...args]);
}

/** One link as `ip -j -d link show dev NAME` sees it, or undefined when there is none. */
export function link(ns: string | undefined, name: string): Json | undefined {
  try {
    return ip(ns, 'link', 'show', 'dev', name)[0];
  } catch {
    return undefined;
  }
}

export function linkNames(ns: string | undefined): string[] {
  return ip(ns, 'link', 'show').map((l: Json) => l.ifname as string);
}

/** "addr/prefix" strings of one link, per `ip -j addr show dev NAME`. */
export function addrs(ns: string | undefined, dev: string): Json[] {
  return ip(ns, 'addr', 'show', 'dev', dev)[0]?.addr_info ?? [];
}

/** `ip -j route show ...args`; a leading "-6" selects IPv6. */
export function routes(ns: string | undefined, ...args: string[]): Json[] {
  const [opts, rest] = splitFamily(args);
  return ip(ns, ...opts, 'route', 'show', ...rest);
}

/** `ip -j neigh show ...args`; a leading "-6" selects IPv6. */
export function neighs(ns: string | undefined, ...args: string[]): Json[] {
  const [opts, rest] = splitFamily(args);
  return ip(ns, ...opts, 'neigh', 'show', ...rest);
}

function splitFamily(args: string[]): [string[], string[]] {
  return args[0] === '-4' || args[0] === '-6' ? [[args[0]], args.slice(1)] : [[], args];
}

export function qdiscs(ns: string | undefined, dev: string): Json[] {
  return tc(ns, 'qdisc', 'show', 'dev', dev);
}

/** Filters on dev's ingress or egress hook (`tc -j filter show dev X ingress`). */
export function filters(ns: string | undefined, dev: string, hook: 'ingress' | 'egress'): Json[] {
  return tc(ns, 'filter', 'show', 'dev', dev, hook);
}

/** A sysctl value inside a netns, read by `ip netns exec NS sysctl -n KEY`. */
export function sysctl(ns: string, key: string): string {
  return execFileSync('ip', ['netns', 'exec', ns, 'sysctl', '-n', key], { encoding: 'utf8' }).trim();
}
