// Everything a bench run creates in the kernel and on disk, named with one prefix (kb + 3
// characters) and removed at the end, on Ctrl-C or on failure: netns, links, scratch, children.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { exec, ipBatch } from './exec.js';
import type { BenchNetwork } from './contender.js';

/** ip -j route entries, only the field we read. */
interface RouteJson {
  dst: string;
}

function ipToInt(ip: string): number {
  return ip.split('.').reduce((acc, octet) => acc * 256 + Number(octet), 0);
}

function intToIp(n: number): string {
  return [24, 16, 8, 0].map((shift) => Math.floor(n / 2 ** shift) % 256).join('.');
}

function overlaps(a: string, b: string): boolean {
  const [aIp, aLen] = a.split('/');
  const [bIp, bLen] = b.split('/');
  const len = Math.min(Number(aLen ?? 32), Number(bLen ?? 32));
  const mask = len === 0 ? 0 : 2 ** 32 - 2 ** (32 - len);
  const and = (x: number) => Number(BigInt(x) & BigInt(mask));
  return and(ipToInt(aIp)) === and(ipToInt(bIp));
}

export class World {
  readonly prefix: string;
  readonly scratch: string;
  private readonly pids = new Map<number, string>();
  private readonly cleanups: Array<{ what: string; fn: () => Promise<void> }> = [];
  private readonly usedSubnets: string[] = [];
  private cleaned = false;

  /** True once cleanup has started: nothing new may be created after that. */
  get closing(): boolean {
    return this.cleaned;
  }

  private constructor(prefix: string) {
    this.prefix = prefix;
    this.scratch = mkdtempSync(path.join(tmpdir(), `${prefix}-`));
  }

  /** A world whose prefix no existing link or netns starts with. */
  static async create(): Promise<World> {
    const links = (await exec('ip', ['-o', 'link', 'show'])).stdout;
    const netns = (await exec('ip', ['netns', 'list'])).stdout;
    for (let attempt = 0; attempt < 50; attempt++) {
      const prefix = `kb${Math.random().toString(36).slice(2, 5).padEnd(3, '0')}`;
      if (!links.includes(prefix) && !netns.includes(prefix)) return new World(prefix);
    }
    throw new Error('bench: could not find an unused kb??? prefix after 50 tries');
  }

  trackPid(pid: number, what: string): void {
    this.pids.set(pid, what);
  }

  untrackPid(pid: number): void {
    this.pids.delete(pid);
  }

  /** Run at cleanup, last registered first. */
  onCleanup(what: string, fn: () => Promise<void>): void {
    this.cleanups.push({ what, fn });
  }

  /**
   * A /16 for one contender, 10.200-254.0.0/16, overlapping no host route and no other
   * contender; tag is a single character used in link names.
   */
  async network(tag: string, bridgeName?: string): Promise<BenchNetwork> {
    const routes = JSON.parse((await exec('ip', ['-j', 'route', 'show', 'table', 'all'])).stdout || '[]') as RouteJson[];
    const taken = routes.map((r) => r.dst).filter((d) => /^\d+\.\d+\.\d+\.\d+(\/\d+)?$/.test(d));
    for (let second = 200; second < 255; second++) {
      const subnet = `10.${second}.0.0/16`;
      if (taken.some((t) => overlaps(t, subnet)) || this.usedSubnets.includes(subnet)) continue;
      this.usedSubnets.push(subnet);
      const base = ipToInt(`10.${second}.0.0`);
      const prefix = this.prefix;
      return {
        bridge: bridgeName ?? `${prefix}-${tag}br`,
        subnet,
        gateway: intToIp(base + 1),
        prefixLength: 16,
        addressFor: (slot) => {
          if (slot < 0 || slot > 65000) throw new Error(`bench: slot ${slot} outside 0..65000`);
          return `${intToIp(base + 2 + slot)}/16`;
        },
        hostLinkFor: (slot) => `${prefix}${tag}${slot}`,
      };
    }
    throw new Error('bench: no free 10.x.0.0/16 between 10.200 and 10.254 (all overlap host routes)');
  }

  /** Create named netns in one exec (before any clock starts). */
  async addNetns(names: readonly string[]): Promise<void> {
    // a phase still running after Ctrl-C must not make netns the sweep has already passed
    if (this.cleaned) throw new Error('bench: run is being cleaned up');
    for (let i = 0; i < names.length; i += 500) {
      await ipBatch(names.slice(i, i + 500).map((n) => `netns add ${n}`));
    }
  }

  /** Delete named netns; a netns still holding a veth end takes the pair with it. */
  async deleteNetns(names: readonly string[]): Promise<void> {
    for (let i = 0; i < names.length; i += 500) {
      await ipBatch(names.slice(i, i + 500).map((n) => `netns del ${n}`), undefined, true);
    }
  }

  /**
   * Remove everything: registered cleanups, then tracked children (SIGTERM, then SIGKILL),
   * then whatever netns and links still carry the prefix, then the scratch directory.
   * Safe to call twice; never throws (reports what it could not remove).
   */
  async cleanup(log: (line: string) => void = () => {}): Promise<void> {
    if (this.cleaned) return;
    this.cleaned = true;
    for (const { what, fn } of this.cleanups.reverse()) {
      try {
        await fn();
      } catch (e) {
        log(`cleanup: ${what}: ${(e as Error).message}`);
      }
    }
    for (const [pid, what] of this.pids) {
      try {
        process.kill(pid, 'SIGTERM');
      } catch {
        this.pids.delete(pid); // already gone
        continue;
      }
      log(`cleanup: stopped ${what} (pid ${pid})`);
    }
    if (this.pids.size) {
      await new Promise((r) => setTimeout(r, 300));
      for (const pid of this.pids.keys()) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          /* exited after SIGTERM */
        }
      }
    }
    await this.sweep(log);
    rmSync(this.scratch, { recursive: true, force: true });
  }

  /** Delete every netns and link whose name starts with the prefix (or that knit tagged with one of the run's sandbox ids). */
  async sweep(log: (line: string) => void = () => {}): Promise<void> {
    await sweepPrefix(this.prefix, log);
  }
}

/** Remove the netns and links of a run by prefix (also `npm run bench -- --cleanup kbXXX`). */
export async function sweepPrefix(prefix: string, log: (line: string) => void = () => {}): Promise<void> {
  if (!/^kb[a-z0-9]{3}$/.test(prefix)) throw new Error(`bench: refusing to sweep '${prefix}': not a kb??? run prefix`);
  const netns = (await exec('ip', ['netns', 'list'])).stdout
    .split('\n')
    .map((l) => l.split(' ')[0])
    .filter((n) => n.startsWith(prefix));
  if (netns.length) {
    await ipBatch(netns.map((n) => `netns del ${n}`), undefined, true);
    log(`cleanup: deleted ${netns.length} netns ${prefix}*`);
  }
  // knit names host links from a hash of the sandbox id but tags them (ifalias sandbox=<id>;)
  const links = (JSON.parse((await exec('ip', ['-j', 'link', 'show'])).stdout || '[]') as Array<{ ifname: string; ifalias?: string }>)
    .filter((l) => l.ifname.startsWith(prefix) || l.ifalias?.includes(`sandbox=${prefix}-`))
    .map((l) => l.ifname);
  if (links.length) {
    // veth ends go with their peers; ignore "Cannot find device" for those
    await ipBatch(links.map((n) => `link del ${n}`), undefined, true);
    log(`cleanup: deleted ${links.length} links ${prefix}*`);
  }
}

/** Creates a contender's bridge with the gateway address, up (what CNI's isGateway does on its
 * first ADD), for contenders that bring their own bridge. */
export async function createBridge(net: BenchNetwork): Promise<void> {
  await ipBatch([
    `link add ${net.bridge} type bridge`,
    `addr add ${net.gateway}/${net.prefixLength} dev ${net.bridge}`,
    `link set ${net.bridge} up`,
  ]);
}
