// Kata's tcfilter cross-connect: an ingress qdisc on both devices and a u32 match-all filter
// with a mirred egress redirect each way, so every frame arriving on one leaves by the other
// and the pod's IP stack never sees them. The filters die with their qdisc; the qdisc on the
// tap dies with the tap; the one on the pod device is deleted explicitly, as Kata does, for
// netns that outlive the attachment.
import type { Step } from '../../src/base/plan.js';

export function planRedirect(netns: string, podDev: string, tap: string): Step[] {
  return [
    {
      description: `ingress qdisc on ${podDev}`,
      netns,
      do: { op: 'qdisc.add', link: podDev, kind: 'ingress' },
      undo: { op: 'qdisc.del', link: podDev, kind: 'ingress' },
    },
    { description: `ingress qdisc on ${tap}`, netns, do: { op: 'qdisc.add', link: tap, kind: 'ingress' } },
    {
      description: `redirect everything arriving on ${podDev} to ${tap}`,
      netns,
      do: { op: 'filter.add', link: podDev, parent: 'ingress', redirectTo: tap },
    },
    {
      description: `redirect everything arriving on ${tap} to ${podDev}`,
      netns,
      do: { op: 'filter.add', link: tap, parent: 'ingress', redirectTo: podDev },
    },
  ];
}
