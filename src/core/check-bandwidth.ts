// Check's share for bandwidth limits: every tbf, ifb and redirect the plan made on the host
// (runtimes/common/bandwidth.ts) is still there, at the recorded rate, one sentence each.
import type { Step } from '../base/plan.js';
import { findLinkIn, type RunOps } from '../net/find-link.js';

const mbit = (bytesPerSecond: number) => `${+((bytesPerSecond * 8) / 1e6).toFixed(3)} Mbit/s`;

export async function bandwidthDifferences(steps: Step[], runOps: RunOps): Promise<string[]> {
  const out: string[] = [];
  for (const { netns, do: a } of steps) {
    if (netns !== undefined) continue;
    if (a.op === 'link.add' && a.kind === 'ifb') {
      const link = await findLinkIn(runOps, undefined, a.name);
      if (!link) out.push(`ifb ${a.name} is missing on the host`);
      else if (!link.up) out.push(`ifb ${a.name} on the host is down`);
    } else if (a.op === 'qdisc.add' && a.kind === 'tbf') {
      if (!(await findLinkIn(runOps, undefined, a.link))) continue; // the device's own absence is said once
      const [{ qdiscs }] = await runOps(undefined, [{ op: 'qdisc.list', link: a.link }]);
      const tbf = qdiscs.find((q) => q.kind === 'tbf' && q.parent === 'root');
      if (!tbf) out.push(`${a.link} on the host has no tbf root qdisc (a limit of ${mbit(a.rate)})`);
      else if (tbf.rate !== a.rate) out.push(`tbf on ${a.link} shapes to ${mbit(tbf.rate ?? 0)}, expected ${mbit(a.rate)}`);
    } else if (a.op === 'filter.add') {
      const [dev, to] = await Promise.all([findLinkIn(runOps, undefined, a.link), findLinkIn(runOps, undefined, a.redirectTo)]);
      if (!dev || !to) continue;
      // Without its ingress qdisc the hook cannot even be listed: that is the same difference.
      const filters = await runOps(undefined, [{ op: 'filter.list', link: a.link, parent: a.parent }]).then(([r]) => r.filters, () => []);
      if (!filters.some((f) => f.redirectTo === to.index)) out.push(`${a.link} on the host no longer redirects its ${a.parent} to ${to.name}`);
    }
  }
  return out;
}
