// The independent observer for kernel tests: iproute2's JSON output (`ip -j -d`, `tc -j`), run
// with execFileSync, optionally inside a named netns (`ip -n NAME`, `tc -n NAME`).
import { execFileSync, spawnSync } from 'node:child_process';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

function json(cmd: string, args: string[]): Json {
  const out = execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 256 << 20 });
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

/** A tun/tap's owner and group as numbers, from sysfs: `ip -j` prints a name when the id
 * resolves (bird2 and libvirt-daemon-system each create a group that may take gid 107). */
export function tunOwner(ns: string | undefined, dev: string): { user: number; group: number } {
  const read = (file: string) => {
    const path = `/sys/class/net/${dev}/${file}`;
    const out = ns ? execFileSync('ip', ['netns', 'exec', ns, 'cat', path], { encoding: 'utf8' }) : execFileSync('cat', [path], { encoding: 'utf8' });
    return Number(out.trim());
  };
  return { user: read('owner'), group: read('group') };
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

const NLM_FLAG_NAMES: Record<string, number> = {
  NLM_F_REQUEST: 0x1, NLM_F_MULTI: 0x2, NLM_F_ACK: 0x4, NLM_F_ECHO: 0x8, NLM_F_DUMP_INTR: 0x10, NLM_F_DUMP_FILTERED: 0x20,
  NLM_F_ROOT: 0x100, NLM_F_MATCH: 0x200, NLM_F_ATOMIC: 0x400, NLM_F_DUMP: 0x300,
  NLM_F_REPLACE: 0x100, NLM_F_EXCL: 0x200, NLM_F_CREATE: 0x400, NLM_F_APPEND: 0x800,
};

/**
 * The netlink requests a command sends, as raw bytes with seq and pid zeroed, captured with
 * `strace -f -e trace=sendmsg -xx`. strace decodes the nlmsghdr into fields and prints the rest
 * as escaped bytes; the header is rebuilt from those fields. The command's exit status does not
 * matter (a refused request still shows what was asked).
 */
export function netlinkRequests(cmd: string, args: string[]): Buffer[] {
  const r = spawnSync('strace', ['-f', '-qq', '-e', 'trace=sendmsg', '-xx', '-s', '65536', cmd, ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  if (r.error) throw new Error(`cannot run strace: ${r.error.message}`);
  const text = r.stderr;
  const out: Buffer[] = [];
  const re = /\{nlmsg_len=(\d+), nlmsg_type=(0x[0-9a-f]+|\d+)[^,]*, nlmsg_flags=([^,]+), nlmsg_seq=\d+, nlmsg_pid=\d+\}, "((?:\\x[0-9a-f]{2})*)"/g;
  for (const m of text.matchAll(re)) {
    const flags = m[3].split('|').reduce((acc, f) => acc | (NLM_FLAG_NAMES[f] ?? Number(f)), 0);
    const body = Buffer.from(m[4].replace(/\\x/g, ''), 'hex');
    const hdr = Buffer.alloc(16);
    hdr.writeUInt32LE(Number(m[1]), 0);
    hdr.writeUInt16LE(Number(m[2]), 4);
    hdr.writeUInt16LE(flags, 6);
    out.push(Buffer.concat([hdr, body]));
  }
  return out;
}
