// Check: compare what the record says knit built with what the kernel has now, and say each
// difference in one sentence (CNI CHECK semantics, but with the reason spelled out).
import type { ActionRunner } from './executor.js';
import type { SandboxRecord } from './record.js';
import type { CheckReport } from '../base/types.js';
import type { NetworkSpec } from '../base/strategy.js';
import type { AddrInfo, RouteInfo } from '../base/ops.js';
import { findLinkIn } from '../net/find-link.js';
import { podIpsOn } from '../base/handoff.js';
import { bandwidthDifferences } from './check-bandwidth.js';
import { bridgeNetfilterProblems } from './networks.js';

/** The bridge network each host end of a bridge-mode network belongs on: host device name -> network. */
function expectedMasters(rec: SandboxRecord, networkOf: (network: string) => NetworkSpec | undefined): Map<string, NetworkSpec & { bridge: string }> {
  const out = new Map<string, NetworkSpec & { bridge: string }>();
  for (const a of rec.allocations) {
    const net = networkOf(a.network);
    const podSide = rec.result.interfaces.find((i) => i.sandbox && i.name === a.ifname);
    if (net?.mode === 'bridge' && net.bridge && podSide?.hostName) out.set(podSide.hostName, { ...net, bridge: net.bridge });
  }
  return out;
}

export async function checkRecord(rec: SandboxRecord, runner: ActionRunner, networkOf: (network: string) => NetworkSpec | undefined = () => undefined): Promise<CheckReport> {
  const differences: string[] = [];
  const masters = expectedMasters(rec, networkOf);
  const runOps = runner.runOps.bind(runner);
  if (rec.state !== 'attached') differences.push(`sandbox is ${rec.state}, not attached`);
  const nsAlive = runner.netnsUsable(rec.netns.path, rec.netns);
  if (!nsAlive) differences.push(`netns ${rec.netns.path} is gone or is no longer the namespace knit attached`);

  for (const [i, ifc] of rec.result.interfaces.entries()) {
    // A PCI function bound to vfio-pci has no netdev to look at: the VM owns it.
    if (ifc.kind === 'vfio') continue;
    const where = ifc.sandbox ? `in netns ${ifc.sandbox}` : 'on the host';
    if (ifc.sandbox && !nsAlive) continue;
    const link = await findLinkIn(runOps, ifc.sandbox, ifc.name);
    if (!link) {
      differences.push(`${ifc.kind} ${ifc.name} is missing ${where}`);
      continue;
    }
    if (!link.up) differences.push(`${ifc.name} ${where} is down`);
    if (ifc.mtu && link.mtu !== ifc.mtu) differences.push(`${ifc.name} ${where} has MTU ${link.mtu}, expected ${ifc.mtu}`);
    if (ifc.mac && link.mac?.toLowerCase() !== ifc.mac.toLowerCase()) differences.push(`${ifc.name} ${where} has MAC ${link.mac}, expected ${ifc.mac}`);
    const net = masters.get(ifc.name);
    if (net) {
      const br = await findLinkIn(runOps, undefined, net.bridge);
      if (!br || link.master !== br.index) differences.push(`${ifc.name} ${where} is not a port of bridge ${net.bridge}`);
      if (br) differences.push(...(await bridgeNetfilterProblems(runOps, net, br)));
    }
    if (!ifc.sandbox) continue;
    // A VM guest, not the pod netns, holds these addresses (Kata macvtap, KubeVirt bridge).
    if (podIpsOn(ifc.handoff) === 'guest') continue;
    // No address of its own (the KubeVirt bridge binding's pod NIC, a tap): no L3 in the pod.
    if (!rec.result.ips.some((x) => x.interface === i)) continue;

    const [{ addrs = [] }, { routes: r4 = [] }, { routes: r6 = [] }] = await runner.runOps(ifc.sandbox, [
      { op: 'addr.list', link: ifc.name },
      { op: 'route.list', family: 4 },
      { op: 'route.list', family: 6 },
    ]);
    const routes: RouteInfo[] = [...r4, ...r6];
    for (const ip of rec.result.ips.filter((x) => x.interface === i)) {
      const [address, len] = ip.address.split('/');
      if (!addrs.some((a: AddrInfo) => a.address === address && a.prefixLen === Number(len))) {
        differences.push(`address ${ip.address} is missing on ${ifc.name} ${where}`);
      }
    }
    for (const route of rec.result.routes) {
      const family = route.dst.includes(':') ? 6 : 4;
      const dst = route.dst === '0.0.0.0/0' || route.dst === '::/0' ? 'default' : route.dst;
      const found = routes.some((r) => r.family === family && (r.dst === dst || r.dst === route.dst) && (!route.gw || r.gateway === route.gw));
      if (!found) differences.push(`route ${route.dst}${route.gw ? ` via ${route.gw}` : ''} is missing ${where}`);
    }
  }
  differences.push(...(await bandwidthDifferences(rec.steps, runOps)));
  // Routes are the sandbox's, looked at from each interface that holds addresses: say each once.
  const unique = [...new Set(differences)];
  return { ok: unique.length === 0, differences: unique };
}
