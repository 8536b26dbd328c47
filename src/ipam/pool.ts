// One address pool: one network, one family. It knows its subnet, the dynamic range it hands
// addresses out of, what it must never hand out, and who holds what.

import { CniCode, KnitError } from '../base/errors.js';
import { Intervals, type Interval } from './intervals.js';
import { makeOccupancy, type Occupancy } from './occupancy.js';
import {
  cidrContains, cidrLast, formatCidr, formatIp, tryParseCidr, tryParseIp,
  type Cidr, type IpFamily,
} from './ip.js';

/** What a pool is built from; the config's ipv4/ipv6 blocks have this shape. */
export interface PoolConfig {
  subnet: string;
  /** Excluded from allocation and handed to holders as their gateway. */
  gateway?: string;
  /** First and last address of the dynamic range (default: the whole usable subnet). */
  rangeStart?: string;
  rangeEnd?: string;
  /** Addresses or CIDRs never handed out dynamically (they may still be reserved statically). */
  reserved?: readonly string[];
}

export interface PoolUsage {
  family: IpFamily;
  subnet: string;
  /** Addresses the dynamic range can hand out (gateway and reserved ones not counted).
   * A plain number for the API: exact up to 2^53, approximate beyond (a v6 /64). */
  size: number;
  /** Addresses of the dynamic range that are held. */
  used: number;
  free: number;
}

export class Pool {
  readonly family: IpFamily;
  readonly subnet: Cidr;
  readonly gateway?: bigint;
  readonly rangeStart: bigint;
  readonly rangeEnd: bigint;
  /** Never handed out dynamically: gateway and reserved, clipped to the range. */
  private readonly excluded: Intervals;
  private readonly occupancy: Occupancy;
  /** Addresses the dynamic range can hand out. */
  readonly size: bigint;
  private usedInRange = 0n;
  private cursor: bigint;
  private readonly holders = new Map<bigint, string>();
  private readonly byOwner = new Map<string, bigint[]>();

  constructor(readonly network: string, config: PoolConfig) {
    const where = (key: string) => `network "${network}" ${key}`;
    const subnet = tryParseCidr(config.subnet);
    if (!subnet) throw KnitError.invalid(where('subnet'), `${JSON.stringify(config.subnet)} is not a valid CIDR`);
    this.subnet = subnet;
    this.family = subnet.family;
    const inSubnet = (key: string, text: string): bigint => {
      const ip = tryParseIp(text);
      if (!ip || !cidrContains(subnet, ip)) {
        throw KnitError.invalid(where(key), `${JSON.stringify(text)} is not an address in ${formatCidr(subnet)}`);
      }
      return ip.value;
    };

    const [usableLo, usableHi] = usableBounds(subnet);
    this.gateway = config.gateway === undefined ? undefined : inSubnet('gateway', config.gateway);
    this.rangeStart = config.rangeStart === undefined ? usableLo : inSubnet('rangeStart', config.rangeStart);
    this.rangeEnd = config.rangeEnd === undefined ? usableHi : inSubnet('rangeEnd', config.rangeEnd);
    if (this.rangeStart < usableLo || this.rangeEnd > usableHi || this.rangeStart > this.rangeEnd) {
      throw KnitError.invalid(where('range'),
        `${this.text(this.rangeStart)}-${this.text(this.rangeEnd)} is not an ordered range of usable addresses in ${formatCidr(subnet)}`);
    }

    const never: Interval[] = [];
    if (this.gateway !== undefined) never.push([this.gateway, this.gateway]);
    for (const [i, text] of (config.reserved ?? []).entries()) {
      const block = text.includes('/') ? tryParseCidr(text) : undefined;
      if (block) {
        if (block.family !== subnet.family || block.network < subnet.network || cidrLast(block) > cidrLast(subnet)) {
          throw KnitError.invalid(where(`reserved[${i}]`), `${JSON.stringify(text)} is not inside ${formatCidr(subnet)}`);
        }
        never.push([block.network, cidrLast(block)]);
      } else {
        const one = inSubnet(`reserved[${i}]`, text);
        never.push([one, one]);
      }
    }
    this.excluded = new Intervals(never).clip(this.rangeStart, this.rangeEnd);
    this.size = this.rangeEnd - this.rangeStart + 1n - this.excluded.count();
    this.occupancy = makeOccupancy(this.rangeStart, this.rangeEnd, this.excluded);
    this.cursor = this.rangeStart;
  }

  /** The owner's address in this pool, or a new one, next-fit from the cursor. */
  allocate(owner: string): bigint {
    const held = this.byOwner.get(owner);
    if (held) return held[0];
    const found = this.nextFree();
    this.hold(found, owner);
    this.cursor = found === this.rangeEnd ? this.rangeStart : found + 1n;
    return found;
  }

  /** What allocate(owner) would return, without taking it or moving the cursor. */
  preview(owner: string): bigint {
    return this.byOwner.get(owner)?.[0] ?? this.nextFree();
  }

  private nextFree(): bigint {
    const found = this.usedInRange < this.size ? this.occupancy.findFree(this.cursor) : undefined;
    if (found !== undefined) return found;
    // CNI has no "pool exhausted" code; 11 ("try again later") is the closest honest answer:
    // the request is valid and may succeed once other sandboxes release their addresses.
    throw new KnitError(
      'RESOURCE_EXHAUSTED',
      `network "${this.network}": no free IPv${this.family} address in ${formatCidr(this.subnet)} ` +
        `(${this.usedInRange} of ${this.size} in use)`,
      { field: 'network', cniCode: CniCode.tryAgainLater },
    );
  }

  /** Hold a given address for owner: a static IP, or one read back from a record. Anywhere in
   * the subnet except the gateway and (v4) the network and broadcast addresses; reserved and
   * out-of-range addresses are allowed, as they are set aside for exactly this. */
  reserve(addr: bigint, owner: string): void {
    const problem = this.reserveProblem(addr, owner);
    if (problem === 'held') return;
    if (problem) throw problem;
    this.hold(addr, owner);
  }

  /** Why reserve(addr, owner) would fail; 'held' when owner holds it already. Takes nothing. */
  reserveProblem(addr: bigint, owner: string): KnitError | 'held' | undefined {
    const text = this.text(addr);
    const holder = this.holders.get(addr);
    if (holder === owner) return 'held';
    if (holder !== undefined) {
      return new KnitError('ALREADY_EXISTS', `network "${this.network}": ${text} is already held by ${JSON.stringify(holder)}`, {
        field: 'address',
      });
    }
    if (!cidrContains(this.subnet, { family: this.family, value: addr })) {
      return KnitError.invalid('address', `${text} is outside network "${this.network}" (${formatCidr(this.subnet)})`);
    }
    const [usableLo, usableHi] = usableBounds(this.subnet);
    if (addr < usableLo || addr > usableHi) {
      return KnitError.invalid('address', `${text} is the ${addr < usableLo ? 'network' : 'broadcast'} address of network "${this.network}"`);
    }
    if (addr === this.gateway) {
      return KnitError.invalid('address', `${text} is the gateway of network "${this.network}"`);
    }
    return undefined;
  }

  /** Give back one address; returns its former owner. */
  releaseAddress(addr: bigint): string | undefined {
    const owner = this.holders.get(addr);
    if (owner === undefined) return undefined;
    this.holders.delete(addr);
    const rest = this.byOwner.get(owner)!.filter((a) => a !== addr);
    if (rest.length) this.byOwner.set(owner, rest);
    else this.byOwner.delete(owner);
    if (this.inDynamicRange(addr)) {
      this.occupancy.free(addr);
      this.usedInRange--;
    }
    return owner;
  }

  /** Give back everything owner holds here; returns the addresses. */
  release(owner: string): bigint[] {
    const held = [...(this.byOwner.get(owner) ?? [])];
    for (const addr of held) this.releaseAddress(addr);
    return held;
  }

  ownerOf(addr: bigint): string | undefined {
    return this.holders.get(addr);
  }

  heldBy(owner: string): readonly bigint[] {
    return this.byOwner.get(owner) ?? [];
  }

  entries(): IterableIterator<[bigint, string]> {
    return this.holders.entries();
  }

  /** Where the next search starts (kept across a reconfiguration). */
  get nextCandidate(): bigint {
    return this.cursor;
  }

  set nextCandidate(addr: bigint) {
    if (addr >= this.rangeStart && addr <= this.rangeEnd) this.cursor = addr;
  }

  usage(): PoolUsage {
    const size = Number(this.size);
    const used = Number(this.usedInRange);
    return { family: this.family, subnet: formatCidr(this.subnet), size, used, free: Number(this.size - this.usedInRange) };
  }

  text(addr: bigint): string {
    return formatIp({ family: this.family, value: addr });
  }

  private inDynamicRange(addr: bigint): boolean {
    return addr >= this.rangeStart && addr <= this.rangeEnd && !this.excluded.has(addr);
  }

  private hold(addr: bigint, owner: string): void {
    this.holders.set(addr, owner);
    const held = this.byOwner.get(owner);
    if (held) held.push(addr);
    else this.byOwner.set(owner, [addr]);
    if (this.inDynamicRange(addr)) {
      this.occupancy.take(addr);
      this.usedInRange++;
    }
  }
}

/** The addresses a host may have: v4 drops the network and broadcast addresses (except /31
 * and /32, RFC 3021); v6 drops the subnet-router anycast address (RFC 4291 §2.6.1). */
function usableBounds(subnet: Cidr): [bigint, bigint] {
  const last = cidrLast(subnet);
  if (subnet.family === 4) {
    return subnet.prefixLen >= 31 ? [subnet.network, last] : [subnet.network + 1n, last - 1n];
  }
  return subnet.prefixLen === 128 ? [subnet.network, last] : [subnet.network + 1n, last];
}
