// Address management for all networks of a node.
//
// Every method is synchronous on purpose: JS runs one call at a time, so two attaches racing
// cannot both take the same address, with no lock to forget.
//
// Durability is deliberately not here. Core writes each allocation into the sandbox record
// (fsync'd) before it makes any kernel change, and at start-up builds a fresh Ipam and
// reserve()s every address the records hold. The records are the single source of truth; a
// second copy here could only disagree with them after a crash.

import { KnitError, quote } from '../base/errors.js';
import { Pool, type PoolConfig, type PoolUsage } from './pool.js';
import { parseIp, tryParseIp, type IpAddress, type IpFamily } from './ip.js';

/** A network as IPAM sees it; the config's network entries have this shape. */
export interface NetworkPools {
  name: string;
  ipv4?: PoolConfig;
  ipv6?: PoolConfig;
}

export interface Allocation {
  network: string;
  family: IpFamily;
  /** Bare address, canonical text (RFC 5952 for v6). */
  address: string;
  /** The subnet's prefix length. */
  prefixLen: number;
  /** address/prefixLen */
  cidr: string;
  gateway?: string;
  owner: string;
}

export class Ipam {
  private pools = new Map<string, { 4?: Pool; 6?: Pool }>();

  constructor(networks: readonly NetworkPools[] = []) {
    this.pools = buildPools(networks);
  }

  /** The owner's address in network/family, allocating one if it holds none (idempotent). */
  allocate(network: string, family: IpFamily, owner: string): Allocation {
    const pool = this.pool(network, family);
    return describe(pool, pool.allocate(owner), owner);
  }

  /** What allocate() would answer, taking nothing and leaving the cursor alone (`knit plan`). */
  preview(network: string, family: IpFamily, owner: string): Allocation {
    const pool = this.pool(network, family);
    return describe(pool, pool.preview(owner), owner);
  }

  /** Hold a specific address (a static IP, or one read back from a record at start-up).
   * Accepts "10.0.0.5" or "10.0.0.5/24" (the prefix is ignored: the pool's subnet decides). */
  reserve(network: string, address: string, owner: string): Allocation {
    const { pool, ip } = this.poolFor(network, address);
    pool.reserve(ip.value, owner);
    return describe(pool, ip.value, owner);
  }

  /** Throws what reserve() would, taking nothing (knit plan checks static IPs as attach does). */
  checkReserve(network: string, address: string, owner: string): void {
    const { pool, ip } = this.poolFor(network, address);
    const problem = pool.reserveProblem(ip.value, owner);
    if (problem instanceof KnitError) throw problem;
  }

  private poolFor(network: string, address: string) {
    const ip = bareAddress(address);
    const pool = this.pools.get(network)?.[ip.family];
    if (!pool) {
      this.networkPools(network); // NOT_FOUND for an unknown network
      throw KnitError.invalid('address', `${address} is IPv${ip.family}, and network "${network}" has no IPv${ip.family} pool`);
    }
    return { pool, ip };
  }

  /** Give back everything owner holds, in every network. */
  release(owner: string): Allocation[] {
    const released: Allocation[] = [];
    for (const pool of this.allPools()) {
      for (const addr of pool.release(owner)) released.push(describe(pool, addr, owner));
    }
    return released;
  }

  /** Give back one address; returns who held it (undefined if nobody did). */
  releaseAddress(network: string, address: string): string | undefined {
    const ip = bareAddress(address);
    return this.pools.get(network)?.[ip.family]?.releaseAddress(ip.value);
  }

  ownerOf(network: string, address: string): string | undefined {
    const ip = bareAddress(address);
    return this.pools.get(network)?.[ip.family]?.ownerOf(ip.value);
  }

  /** What owner holds (all networks); every holding when owner is omitted. */
  holdings(owner?: string): Allocation[] {
    const out: Allocation[] = [];
    for (const pool of this.allPools()) {
      if (owner !== undefined) {
        for (const addr of pool.heldBy(owner)) out.push(describe(pool, addr, owner));
      } else {
        for (const [addr, who] of pool.entries()) out.push(describe(pool, addr, who));
      }
    }
    return out;
  }

  usage(network: string): PoolUsage[] {
    const pools = this.networkPools(network);
    return [pools[4], pools[6]].filter((p): p is Pool => p !== undefined).map((p) => p.usage());
  }

  networks(): string[] {
    return [...this.pools.keys()];
  }

  /** Switch to a new set of networks (config reload), carrying every holding over. If any
   * holding would not fit the new pools (network gone, address outside the new subnet, now
   * the gateway, ...), nothing changes and FAILED_PRECONDITION lists each one. */
  reconfigure(networks: readonly NetworkPools[]): void {
    const next = buildPools(networks);
    const problems: string[] = [];
    for (const held of this.holdings()) {
      const pool = next.get(held.network)?.[held.family];
      if (!pool) {
        problems.push(`${held.address} (held by ${JSON.stringify(held.owner)}): network "${held.network}" has no IPv${held.family} pool any more`);
        continue;
      }
      try {
        pool.reserve(parseIp(held.address).value, held.owner);
      } catch (err) {
        problems.push(`${held.address} (held by ${JSON.stringify(held.owner)}): ${(err as Error).message}`);
      }
    }
    if (problems.length) {
      throw new KnitError('FAILED_PRECONDITION', `new network config does not fit addresses in use:\n  ${problems.join('\n  ')}`);
    }
    for (const [name, pools] of next) {
      for (const family of [4, 6] as const) {
        const old = this.pools.get(name)?.[family];
        const pool = pools[family];
        if (old && pool) pool.nextCandidate = old.nextCandidate;
      }
    }
    this.pools = next;
  }

  private networkPools(network: string): { 4?: Pool; 6?: Pool } {
    const pools = this.pools.get(network);
    if (!pools) {
      throw new KnitError('NOT_FOUND', `network "${network}" is not configured (known: ${this.networks().join(', ') || 'none'})`, {
        field: 'network',
        cniCode: 7,
      });
    }
    return pools;
  }

  private pool(network: string, family: IpFamily): Pool {
    const pool = this.networkPools(network)[family];
    if (!pool) throw KnitError.invalid('family', `network "${network}" has no IPv${family} pool`);
    return pool;
  }

  private *allPools(): Generator<Pool> {
    for (const pools of this.pools.values()) {
      if (pools[4]) yield pools[4];
      if (pools[6]) yield pools[6];
    }
  }
}

function buildPools(networks: readonly NetworkPools[]): Map<string, { 4?: Pool; 6?: Pool }> {
  const pools = new Map<string, { 4?: Pool; 6?: Pool }>();
  for (const net of networks) {
    if (pools.has(net.name)) throw KnitError.invalid('networks', `network "${net.name}" is defined twice`);
    const entry: { 4?: Pool; 6?: Pool } = {};
    for (const [key, family] of [['ipv4', 4], ['ipv6', 6]] as const) {
      const config = net[key];
      if (!config) continue;
      const pool = new Pool(net.name, config);
      if (pool.family !== family) {
        throw KnitError.invalid(`network "${net.name}" ${key}.subnet`, `${config.subnet} is not an IPv${family} subnet`);
      }
      entry[family] = pool;
    }
    pools.set(net.name, entry);
  }
  return pools;
}

function describe(pool: Pool, addr: bigint, owner: string): Allocation {
  const address = pool.text(addr);
  const gateway = pool.gateway === undefined ? undefined : pool.text(pool.gateway);
  return {
    network: pool.network,
    family: pool.family,
    address,
    prefixLen: pool.subnet.prefixLen,
    cidr: `${address}/${pool.subnet.prefixLen}`,
    ...(gateway !== undefined && { gateway }),
    owner,
  };
}

/** "10.0.0.5" or "10.0.0.5/24" as an address; the prefix, if any, is ignored. */
function bareAddress(address: string): IpAddress {
  const slash = address.indexOf('/');
  const ip = tryParseIp(slash < 0 ? address : address.slice(0, slash));
  if (!ip) throw KnitError.invalid('address', `${quote(address)} is not an IP address`);
  return ip;
}
