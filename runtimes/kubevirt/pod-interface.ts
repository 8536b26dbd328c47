// knit as the CNI of a KubeVirt binding plugin, called after the network's own CNI (Multus
// appends the binding's NetworkAttachmentDefinition with cni-arg logicNetworkName): the pod
// interface is already there, made by someone else. prepare() finds it the way virt-launcher
// does (pkg/network/namescheme: "pod" + the first 11 hex of sha256(network name) for a
// secondary network, else the primary eth0) and reads its MAC, MTU, addresses and routes; the
// plan adds only the tap, named after that interface (eth0 -> tap0, pod<h> -> tap<h>), and the
// tcfilter redirect between the two. The interface and its addresses stay the other CNI's:
// nothing of them is changed, and detach removes only the tap and the ingress qdisc.
import { createHash } from 'node:crypto';
import { KnitError } from '../../src/base/errors.js';
import type { GuestConfig, GuestRoute } from '../../src/base/handoff.js';
import type { InterfaceInput, InterfacePlan, PrepareContext } from '../../src/base/strategy.js';
import { aliasTag } from '../../src/base/names.js';
import { planTap } from '../common/tap.js';
import { planRedirect } from '../common/tc-redirect.js';
import { tapHandoff } from '../common/tap-handoff.js';
import { libvirtInterfaceXml } from './libvirt.js';
import { checkDerivedNames, kubevirtTapName } from './names.js';
import type { KubevirtOptions } from './options.js';

/** KubeVirt's pod interface name for a secondary (Multus) network. */
export const hashedPodInterface = (network: string) => `pod${createHash('sha256').update(network).digest('hex').slice(0, 11)}`;
const PRIMARY = 'eth0';

export interface PreparedPodInterface {
  podInterface: string;
  mac: string;
  mtu: number;
  ips: { address: string; family: 4 | 6 }[];
  routes: GuestRoute[];
}

export const isPreparedPodInterface = (p: unknown): p is PreparedPodInterface => !!p && typeof p === 'object' && 'podInterface' in p;

export async function preparePodInterface(input: InterfaceInput, ctx: PrepareContext, logicNetwork: string): Promise<PreparedPodInterface> {
  const ns = input.netnsPath;
  const [{ links = [] }, { routes: r4 = [] }, { routes: r6 = [] }] = await ctx.runOps(ns, [
    { op: 'link.list' }, { op: 'route.list', family: 4 }, { op: 'route.list', family: 6 },
  ]);
  const hashed = hashedPodInterface(logicNetwork);
  const link = links.find((l) => l.name === hashed) ?? links.find((l) => l.name === PRIMARY);
  const i = input.request.interfaces.indexOf(input.iface);
  if (!link?.mac) {
    throw KnitError.invalid(`interfaces[${i}].binding.logicNetwork`, `network ${JSON.stringify(logicNetwork.slice(0, 40))} has no pod interface in ${ns}: neither ${hashed} nor ${PRIMARY} is there (the network's own CNI makes it, before the binding's)`);
  }
  const [{ addrs = [] }] = await ctx.runOps(ns, [{ op: 'addr.list', link: link.name }]);
  const routes: GuestRoute[] = [...r4, ...r6]
    .filter((r) => r.index === link.index && r.table === 254 && r.protocol !== 'kernel' && !(r.family === 6 && r.dst.startsWith('fe80')))
    .map((r) => ({
      dst: r.dst === 'default' ? (r.family === 4 ? '0.0.0.0/0' : '::/0') : r.dst,
      ...(r.gateway ? { gateway: r.gateway } : {}),
      ...(r.onlink ? { onlink: true } : {}),
      ...(r.scope === 'link' ? { scope: 'link' as const } : {}),
    }));
  return {
    podInterface: link.name,
    mac: link.mac,
    mtu: link.mtu,
    ips: addrs.filter((a) => a.scope === 'global').map((a) => ({ address: `${a.address}/${a.prefixLen}`, family: a.family })),
    routes,
  };
}

export function planOnPodInterface(input: InterfaceInput, opts: KubevirtOptions): InterfacePlan {
  const p = input.prepared;
  if (!isPreparedPodInterface(p)) throw new KnitError('INTERNAL', `interface ${input.iface.name}: a plan on an existing pod interface needs prepare() to have read it`);
  const ns = input.netnsPath;
  const tap = kubevirtTapName(p.podInterface, opts.index);
  checkDerivedNames(opts.index, [tap]);
  const gateway = (family: 4 | 6) => p.routes.find((r) => r.dst === (family === 4 ? '0.0.0.0/0' : '::/0'))?.gateway;
  const guest: GuestConfig = {
    name: input.iface.name, mac: p.mac, mtu: p.mtu,
    ips: p.ips.map((ip) => ({ ...ip, ...(gateway(ip.family) ? { gateway: gateway(ip.family) } : {}) })),
    routes: p.routes, neighbors: [], ...(input.request.dns ? { dns: input.request.dns } : {}), delivery: 'dhcp',
  };
  const handoff = tapHandoff({
    runtime: 'kubevirt', model: 'tap', name: tap, netns: ns, queues: opts.queues, owner: opts.owner, group: opts.group,
    mac: p.mac, mtu: p.mtu, podIpsOn: 'pod+guest', guest, libvirt: libvirtInterfaceXml(tap, p.mac, p.mtu, opts.queues), podInterface: p.podInterface,
  });
  return {
    steps: [
      ...planTap({ netns: ns, name: tap, queues: opts.queues, owner: opts.owner, group: opts.group, mtu: p.mtu, alias: aliasTag(input.sandboxId, input.iface.name) }),
      ...planRedirect(ns, p.podInterface, tap),
    ],
    interfaces: [{ name: tap, kind: 'tap', mtu: p.mtu, sandbox: ns, handoff }],
    ips: [],
    routes: [],
  };
}
