// Hands out sandboxes to one contender: a fresh netns each (created before the clock starts,
// several per `ip -batch` exec), a slot that is unique among its attached sandboxes, and an id
// unique in the run. Used netns are kept until retire() so the kernel's asynchronous netns
// teardown does not run in the middle of a timed call.
import type { Contender, Sandbox } from './contender.js';
import type { World } from './world.js';

export class SandboxSource {
  private serial = 0;
  private nextSlot = 0;
  private readonly freeSlots: number[] = [];
  private readonly used: string[] = [];

  constructor(
    private readonly world: World,
    readonly contender: Contender,
    /** One character naming the contender in netns names. */
    private readonly tag: string,
  ) {}

  /** n sandboxes without creating their netns yet (see materialize). */
  plan(n: number): Sandbox[] {
    const out: Sandbox[] = [];
    for (let i = 0; i < n; i++) {
      const serial = this.serial++;
      const slot = this.freeSlots.pop() ?? this.nextSlot++;
      const id = `${this.world.prefix}-${this.tag}-${serial}`;
      const netnsName = this.contender.kind === 'network' ? `${this.world.prefix}-${this.tag}${serial}` : '';
      out.push({ id, netnsName, netnsPath: netnsName ? `/run/netns/${netnsName}` : '', ifname: 'eth0', slot });
    }
    return out;
  }

  /** Give the slot back after a detach; the netns is kept until retire(). */
  done(sb: Sandbox): void {
    this.freeSlots.push(sb.slot);
    if (sb.netnsName) this.used.push(sb.netnsName);
  }

  /** Netns of finished sandboxes, handed over for deletion (and forgotten here). */
  takeUsed(): string[] {
    return this.used.splice(0);
  }
}

/** Plan sandboxes for several sources and create all their netns in one go. */
export async function freshSandboxes(world: World, wants: Array<[SandboxSource, number]>): Promise<Sandbox[][]> {
  const planned = wants.map(([source, n]) => source.plan(n));
  await world.addNetns(planned.flat().map((s) => s.netnsName).filter(Boolean));
  return planned;
}

/** Delete the netns of every finished sandbox of these sources (untimed housekeeping). */
export async function retireUsed(world: World, sources: readonly SandboxSource[]): Promise<void> {
  await world.deleteNetns(sources.flatMap((s) => s.takeUsed()));
}
