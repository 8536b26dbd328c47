// The kernel floor: bench/floor/knit-floor.c doing the attach with raw rtnetlink, no daemon
// and no per-sandbox process start-up (long-lived --serve processes fed over a pipe). The
// figure recorded is the time spent inside the C process (CLOCK_MONOTONIC around the netlink
// work), so the pipe hop to Node is not charged to the kernel. Its VM flavors (Kata tcfilter and
// KubeVirt tap are the same kernel work in knit: veth + tap + a redirect each way) add that
// tap and the two redirects inside the netns, so VM attaches have a floor too.
import type { BenchNetwork, Contender, Flavor, Sandbox, SetupContext } from '../lib/contender.js';
import { createBridge } from '../lib/world.js';
import { ipBatch } from '../lib/exec.js';
import { LineProcess } from '../lib/line-process.js';
import { buildFloor } from '../floor/build.js';

/** Each sandbox has its own netns, so one tap name serves all (Kata's own). */
const TAP = 'tap0_kata';

export class FloorCContender implements Contender {
  readonly name = 'floor-c';
  readonly label = 'floor: C rtnetlink';
  readonly kind = 'network';
  readonly flavors: readonly Flavor[] = ['runc', 'kata-tcfilter', 'kubevirt-tap'];
  readonly maxConcurrency = 16;
  private net?: BenchNetwork;
  private binary = '';
  private bridgeMade = false;
  private ctx?: SetupContext;
  /** One serve process per concurrent call; idle ones are reused. */
  private readonly idle: LineProcess[] = [];
  private readonly all: LineProcess[] = [];
  /** Sandboxes attached with a tap, whose detach must delete it too. */
  private readonly withTap = new Set<string>();

  async setup(ctx: SetupContext): Promise<void> {
    this.ctx = ctx;
    this.net = ctx.network;
    this.binary = await buildFloor();
    await createBridge(this.net);
    this.bridgeMade = true;
    this.idle.push(this.spawn());
  }

  async attach(sb: Sandbox, flavor: Flavor = 'runc'): Promise<number> {
    const net = this.net!;
    const pod = `${sb.netnsPath} ${net.hostLinkFor(sb.slot)} ${sb.ifname} ${net.addressFor(sb.slot)} ${net.gateway}`;
    if (flavor === 'runc') return this.call(`attach ${pod}`, sb);
    this.withTap.add(sb.id);
    return this.call(`attach-vm ${pod} ${TAP}`, sb);
  }

  async detach(sb: Sandbox): Promise<number> {
    const host = this.net!.hostLinkFor(sb.slot);
    if (!this.withTap.delete(sb.id)) return this.call(`detach ${host}`, sb);
    return this.call(`detach-vm ${sb.netnsPath} ${host} ${TAP}`, sb);
  }

  /** One serve process per call in flight, started and answering before the clock runs:
   * an unknown command is answered with an error line, so it serves as a ping. */
  async prepare(inFlight: number): Promise<void> {
    const fresh: LineProcess[] = [];
    while (this.all.length < inFlight) fresh.push(this.spawn());
    await Promise.all(fresh.map((p) => p.request('ping').catch(() => '')));
    this.idle.push(...fresh);
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
