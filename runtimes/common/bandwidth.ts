// Bandwidth limits on the host side of a sandbox interface (README "Bandwidth"), shaped where
// the pod cannot undo them, the way CNI's bandwidth plugin does it:
// - ingress (towards the pod): a tbf root qdisc on the host device, whose egress is the pod's
//   ingress;
// - egress (from the pod): what the pod sends arrives on the host device's ingress, where no
//   qdisc can delay it; an ingress qdisc and a match-all mirred filter redirect it to an ifb
//   device of this interface, and a tbf root qdisc on the ifb shapes it as it leaves the ifb.
// Each object is a step with its inverse, so rollback, crash repair and Detach take it back.
import type { Bandwidth } from '../../src/base/types.js';
import type { Step } from '../../src/base/plan.js';
import { retireLink } from '../../src/net/retire.js';
import { aliasTag, hostIfName } from '../../src/base/names.js';

/** How long a full queue may make a packet wait for tokens at the rate; the queue limit is the
 * bytes that many milliseconds carry plus the burst (CNI's bandwidth plugin uses 25 ms). */
const LATENCY_MS = 25;
const U32_MAX = 0xffffffff;

/** tbf's parameters in bytes from a limit in bits (rate in bit/s, burst in bits). */
export function tbfParams(limit: { rate: number; burst: number }): { rate: number; burst: number; limit: number } {
  const rate = Math.max(1, Math.floor(limit.rate / 8));
  const burst = Math.min(U32_MAX, Math.max(1, Math.ceil(limit.burst / 8)));
  return { rate, burst, limit: Math.min(U32_MAX, Math.floor((rate * LATENCY_MS) / 1000) + burst) };
}

/** The ifb an interface's egress limit is shaped on: "knb" + 9 hex, from (sandbox, interface). */
export const ifbName = (sandboxId: string, ifname: string) => hostIfName(sandboxId, ifname, 'b');

const mbit = (bits: number) => `${+(bits / 1e6).toFixed(3)} Mbit/s`;

/**
 * The host-netns steps that enforce `bandwidth` on host device `dev` of interface `ifname`
 * (nothing when there is no limit). `mtu` is the device's: the ifb carries the same packets.
 */
export function planBandwidth(sandboxId: string, ifname: string, dev: string, mtu: number, bandwidth: Bandwidth | undefined): Step[] {
  const steps: Step[] = [];
  if (bandwidth?.ingress) {
    steps.push({
      description: `shape traffic to the sandbox to ${mbit(bandwidth.ingress.rate)}: tbf root qdisc on ${dev}`,
      do: { op: 'qdisc.add', link: dev, kind: 'tbf', ...tbfParams(bandwidth.ingress) },
      undo: { op: 'qdisc.del', link: dev, kind: 'tbf' },
    });
  }
  if (bandwidth?.egress) {
    const ifb = ifbName(sandboxId, ifname);
    steps.push(
      {
        description: `create ifb ${ifb} for traffic from the sandbox on ${dev}`,
        do: { op: 'link.add', kind: 'ifb', name: ifb, alias: aliasTag(sandboxId, ifname), mtu, up: true },
        undo: { op: 'link.del', link: ifb },
        retire: retireLink(ifb),
      },
      {
        description: `shape traffic from the sandbox to ${mbit(bandwidth.egress.rate)}: tbf root qdisc on ${ifb}`,
        do: { op: 'qdisc.add', link: ifb, kind: 'tbf', ...tbfParams(bandwidth.egress) },
        undo: { op: 'qdisc.del', link: ifb, kind: 'tbf' },
      },
      {
        description: `ingress qdisc on ${dev}`,
        do: { op: 'qdisc.add', link: dev, kind: 'ingress' },
        undo: { op: 'qdisc.del', link: dev, kind: 'ingress' },
      },
      {
        description: `redirect what ${dev} receives from the sandbox to ${ifb}`,
        do: { op: 'filter.add', link: dev, parent: 'ingress', redirectTo: ifb },
        undo: { op: 'filter.del', link: dev, parent: 'ingress' },
      },
    );
  }
  return steps;
}
