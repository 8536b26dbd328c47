// The kernel floor: bench/floor/knit-floor.c doing the attach with raw rtnetlink, no daemon
// and no per-sandbox process start-up (long-lived --serve processes fed over a pipe). The
// figure recorded is the time spent inside the C process (CLOCK_MONOTONIC around the netlink
// work), so the pipe hop to Node is not charged to the kernel.
import type { BenchNetwork, Contender, Flavor, Sandbox, SetupContext } from '../lib/contender.js';
import { ipBatch } from '../lib/exec.js';
import { LineProcess } from '../lib/line-process.js';
import { buildFloor } from '../floor/build.js';

export class FloorCContender implements Contender {
  readonly name = 'floor-c';
  readonly label = 'floor: C rtnetlink';
  readonly kind = 'network';
  readonly flavors: readonly Flavor[] = ['runc'];
  readonly maxConcurrency = 16;
  private net?: BenchNetwork;
  private binary = '';
  private bridgeMade = false;
  private ctx?: SetupContext;
  /** One serve process per concurrent call; idle ones are reused. */
  private readonly idle: LineProcess[] = [];
  private readonly all: LineProcess[] = [];

  async setup(ctx: SetupContext): Promise<void> {
    this.ctx = ctx;
    this.net = ctx.network;
    this.binary = await buildFloor();
    await ipBatch([
      `link add ${this.net.bridge} type bridge`,
      `addr add ${this.net.gateway}/${this.net.prefixLength} dev ${this.net.bridge}`,
      `link set ${this.net.bridge} up`,
    ]);
    this.bridgeMade = true;
    this.idle.push(this.spawn());
  }

  async attach(sb: Sandbox): Promise<number> {
    const net = this.net!;
    return this.call(`attach ${sb.netnsPath} ${net.hostLinkFor(sb.slot)} ${sb.ifname} ${net.addressFor(sb.slot)} ${net.gateway}`, sb);
  }

  async detach(sb: Sandbox): Promise<number> {
    return this.call(`detach ${this.net!.hostLinkFor(sb.slot)}`, sb);
  }

  async teardown(): Promise<void> {
    await Promise.all(this.all.map((p) => p.close()));
    if (this.bridgeMade) await ipBatch([`link del ${this.net!.bridge}`], undefined, true);
  }

  private spawn(): LineProcess {
    const p = new LineProcess('knit-floor', this.binary, ['--bridge', this.net!.bridge, '--serve']);
    if (p.pid) this.ctx!.trackPid(p.pid, 'knit-floor');
    this.all.push(p);
    return p;
  }

  private async call(line: string, sb: Sandbox): Promise<number> {
    const p = this.idle.pop() ?? this.spawn();
    try {
      const answer = await p.request(line);
      const ok = /^ok (\d+)$/.exec(answer);
      if (!ok) throw new Error(`knit-floor ${line.split(' ')[0]} ${sb.id} (netns ${sb.netnsName}): ${answer}`);
      return Number(ok[1]) / 1e6;
    } finally {
      this.idle.push(p);
    }
  }
}
