// knit's design with none of knit's logic: a grpc-js server (bench/grpc/addon-server.ts) whose
// handler sends the C floor's requests through knit's addon, the host batch and the pod batch
// each on a pool thread as the daemon sends them, and parks a detached host end for a reaper.
// Attach and detach are timed client-observed with a grpc-js client, as for 'knit': what knit
// takes beyond this row is its own logic (validation, plan, IPAM, the journal and records, its
// tags and checks); what this row takes beyond floor-c plus the empty call is the addon's hops.
// The server runs under bin/knit's node flags, as knit's daemon does; `grpc-addon-v8default`
// runs it on node's defaults, beside `knit-v8default`.
import type { BenchNetwork, Contender, Flavor, Sandbox, SetupContext } from '../lib/contender.js';
import { createBridge } from '../lib/world.js';
import { ipBatch, untilReaped } from '../lib/exec.js';
import { FloorServer } from './floor-service.js';
import { launcherNodeFlags } from '../lib/knit-process.js';

export class GrpcAddonContender implements Contender {
  readonly name: string;
  readonly label: string;
  readonly kind = 'network';
  readonly flavors: readonly Flavor[] = ['runc'];
  readonly maxConcurrency = 16;
  private net?: BenchNetwork;
  private readonly server = new FloorServer();
  private bridgeMade = false;
  /** The server's reap group: unique to this run's prefix, clear of knit's (names.ts). */
  private group = 0;
  /** Host ends get a fresh name per attach: a parked end keeps its name until the reaper's
   * delete, and this server has no reclaim of a parked name as knit's create has. */
  private hostPrefix = '';
  private made = 0;
  private readonly hostLinks = new Map<string, string>();

  constructor(private readonly knitFlags = true) {
    this.name = knitFlags ? 'grpc-addon' : 'grpc-addon-v8default';
    this.label = `gRPC + the floor's requests through knit's addon (no knit logic; ${knitFlags ? "bin/knit's node flags" : "node's defaults"})`;
  }

  async setup(ctx: SetupContext): Promise<void> {
    this.net = ctx.network;
    // Its own tag in both: grpc-addon and grpc-addon-v8default hold links at the same time.
    this.hostPrefix = `${ctx.prefix}${ctx.tag}-`;
    this.group = 0x0b000000 + (parseInt(`${ctx.prefix}${ctx.tag}`.replace(/[^0-9a-z]/g, ''), 36) % 0xffffff);
    await createBridge(this.net);
    this.bridgeMade = true;
    await this.server.start(ctx, 'addon-server.js', [this.net.bridge, String(this.group)], 'addon floor server', this.knitFlags ? launcherNodeFlags() : []);
  }

  attach(sb: Sandbox): Promise<void> {
    const net = this.net!;
    const hostLink = `${this.hostPrefix}${(this.made++).toString(36)}`;
    this.hostLinks.set(sb.id, hostLink);
    return this.server.call('Attach', {
      sandbox_id: sb.id, netns_path: sb.netnsPath, host_link: hostLink, ifname: sb.ifname, address: net.addressFor(sb.slot), gateway: net.gateway,
    });
  }

  detach(sb: Sandbox): Promise<void> {
    const hostLink = this.hostLinks.get(sb.id);
    this.hostLinks.delete(sb.id);
    if (!hostLink) return Promise.resolve(); // never attached
    return this.server.call('Detach', { sandbox_id: sb.id, host_link: hostLink });
  }

  /** Detach only parks the host end; wait until the server's reaper deleted it, as for knit. */
  settle(): Promise<void> {
    return untilReaped(this.group, () => true);
  }

  daemonPid(): number | undefined {
    return this.server.pid;
  }

  async teardown(): Promise<void> {
    await this.server.stop();
    if (this.group) await ipBatch([`link del group ${this.group}`], undefined, true);
    if (this.bridgeMade) await ipBatch([`link del ${this.net!.bridge}`], undefined, true);
  }
}
