// The kernel floor as iproute2 would do it by hand: two `ip -batch` execs per attach (a batch
// line cannot carry -n, so one batch in the host netns and one `ip -n NS -batch`), one
// `ip link del` per detach. Same netlink messages as the C floor, plus two process start-ups.
import { exec, ipBatch } from '../lib/exec.js';
import type { BenchNetwork, Contender, Flavor, Sandbox, SetupContext } from '../lib/contender.js';

export class FloorIpContender implements Contender {
  readonly name = 'floor-ip';
  readonly label = 'floor: ip -batch';
  readonly kind = 'network';
  readonly flavors: readonly Flavor[] = ['runc'];
  readonly maxConcurrency = 16;
  private net?: BenchNetwork;
  private bridgeMade = false;

  async setup(ctx: SetupContext): Promise<void> {
    this.net = ctx.network;
    await ipBatch([
      `link add ${this.net.bridge} type bridge`,
      `addr add ${this.net.gateway}/${this.net.prefixLength} dev ${this.net.bridge}`,
      `link set ${this.net.bridge} up`,
    ]);
    this.bridgeMade = true;
  }

  async attach(sb: Sandbox): Promise<void> {
    const net = this.net!;
    const host = net.hostLinkFor(sb.slot);
    await ipBatch([`link add ${host} master ${net.bridge} up type veth peer name ${sb.ifname} netns ${sb.netnsName}`]);
    await ipBatch(
      [`link set ${sb.ifname} up`, `addr add ${net.addressFor(sb.slot)} dev ${sb.ifname}`, `route add default via ${net.gateway} dev ${sb.ifname}`],
      sb.netnsName,
    );
  }

  async detach(sb: Sandbox): Promise<void> {
    await exec('ip', ['link', 'del', this.net!.hostLinkFor(sb.slot)]);
  }

  async teardown(): Promise<void> {
    if (this.bridgeMade) await ipBatch([`link del ${this.net!.bridge}`], undefined, true);
  }
}
