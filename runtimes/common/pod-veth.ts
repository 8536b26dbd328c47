// The pod-side veth every container-shaped attachment starts from: the host end on the
// network's bridge (bridge mode) or alone with host routes (routed mode), the pod end created
// straight inside the sandbox netns with its final name, MAC and MTU in the same request (or
// under a name of its own while a leftover holds the final one; see claimPodName).
//
// Detach retires only the host end (one request in one host batch, nothing opened in the pod
// netns): down and into the reap group under its own name (parkLink), it makes
// the pair inert, and the reaper's delete of it takes the pod end along. A new create of that
// name moves the parked end aside first (reclaimParked). Until then the pod end keeps its name, addresses and routes (without carrier), so an
// attach into the same netns first moves such leftovers aside (link.evict, devices knit tagged
// only). The host netns cannot rename the pod end itself: on RTM_SETLINK the kernel finds the
// device by ifindex in the socket's own netns and reads IFLA_TARGET_NETNSID as "move it
// there", so a peer index sent from the host would name, and move, an unrelated host device
// (docs/peer-retire.md). What Detach acts on is knit's own tagged host end, found by its name.
import { parkLink } from '../../src/net/retire.js';
import type { Step } from '../../src/base/plan.js';
import type { ResultRoute } from '../../src/base/types.js';
import { aliasTag, hostIfName, podMac, reapGroup, ROUTE_PROTOCOL, sandboxTagPrefix } from '../../src/base/names.js';
import type { InterfaceInput, InterfacePlan, PlannedIp } from '../../src/base/strategy.js';
import { interfaceIndex } from './binding-options.js';
import { planBandwidth } from './bandwidth.js';

/** Routed mode: the pod's gateway is a link-local address answered by a fixed MAC on the host
 * end (a permanent neighbour entry in the pod), so no proxy ARP and no address on the host. */
export const ROUTED_GW4 = '169.254.1.1';
export const ROUTED_GW6 = 'fe80::1';
export const ROUTED_HOST_MAC = 'ee:ee:ee:ee:ee:ee';

export interface PodVeth {
  hostName: string;
  podName: string;
  mac: string;
  mtu: number;
}

export function planPodVeth(input: InterfaceInput): InterfacePlan & { veth: PodVeth } {
  const { sandboxId, netnsPath: ns, iface, network, addresses } = input;
  const routed = network.mode === 'routed';
  const v4 = addresses.find((a) => a.family === 4);
  const veth: PodVeth = {
    hostName: hostIfName(sandboxId, iface.name),
    podName: iface.name,
    mac: iface.mac ?? podMac(v4?.address, sandboxId, iface.name),
    mtu: iface.mtu ?? network.mtu,
  };
  const tag = aliasTag(sandboxId, iface.name);
  // The pod end's name while a pod end a detached sandbox left here still holds its own (a
  // rename costs the kernel an RCU grace period, so only then); unique to the interface.
  const otherName = hostIfName(sandboxId, iface.name, 'p');
  const steps: Step[] = [
    {
      description: `create veth ${veth.hostName} (host) - ${veth.podName} (sandbox)`,
      do: {
        op: 'link.add', kind: 'veth', name: veth.hostName, alias: tag, mtu: veth.mtu, up: true,
        // A bridge port needs no address of its own (the bridge holds the L3). Without its
        // link-local address and route, each host end leaves the host's IPv6 table smaller,
        // and the kernel walks that whole table on every device state change in the host netns
        // (bench/README.md, "Which requests grow at scale"). A routed host end keeps IPv6.
        ...(routed ? { mac: ROUTED_HOST_MAC } : { master: network.bridge!, addrGenMode: 'none' as const }),
        // A Detach of this same sandbox interface may have parked its host end under this name
        // moments ago (parkLink): taken back only if the create meets it.
        reclaimParked: { group: reapGroup(), tagPrefix: sandboxTagPrefix() },
        // The pod end's alias is set with its "up" below, in the pod netns batch: here it would
        // cost a second netlink socket opened inside the netns.
        peer: { name: veth.podName, mac: veth.mac, mtu: veth.mtu, netns: ns, nameIfTaken: otherName },
      },
      undo: { op: 'link.del', link: veth.hostName },
      retire: parkLink(veth.hostName),
    },
  ];
  // Host-side steps first, then the sandbox's: consecutive steps in one netns go to the kernel
  // as one batch, so the plan costs one host batch and one pod netns batch.
  if (!routed && network.hairpin) {
    steps.push({ description: `hairpin on bridge port ${veth.hostName}`, do: { op: 'link.set', link: veth.hostName, hairpin: true } });
  }
  if (routed) {
    for (const a of addresses) {
      const host = `${a.address}/${a.family === 4 ? 32 : 128}`;
      steps.push({
        description: `host route ${a.address} via ${veth.hostName}`,
        // knit's route protocol: a BGP speaker on the node exports the node's block, never
        // these (docs/cluster.md), and knit's cluster reconciler leaves them to this plan.
        do: { op: 'route.add', dst: host, link: veth.hostName, scope: 'link', protocol: ROUTE_PROTOCOL },
        undo: { op: 'route.del', dst: host, link: veth.hostName },
      });
    }
    if (v4) {
      // Packets from the pod to other pods are forwarded by the host; per-device forwarding
      // keeps the host's global ip_forward untouched (IPv4 checks the ingress device's setting).
      steps.push({
        description: `forward IPv4 arriving on ${veth.hostName}`,
        do: { op: 'sysctl.set', key: `net.ipv4.conf.${veth.hostName}.forwarding`, value: '1' },
      });
    }
    if (addresses.some((a) => a.family === 6) && network.ipv6PerDeviceForwarding) {
      steps.push({
        description: `forward IPv6 arriving on ${veth.hostName}`,
        do: { op: 'sysctl.set', key: `net.ipv6.conf.${veth.hostName}.force_forwarding`, value: '1' },
      });
    }
  }

  // Limits are shaped on the host end, where the sandbox cannot reach them.
  steps.push(...planBandwidth(sandboxId, iface.name, veth.hostName, veth.mtu, iface.bandwidth));

  // The sandbox's steps, in one batch: the name first, so every later step finds the link by it.
  steps.push(...claimPodName(ns, sandboxId, otherName, veth.podName));
  const ips: PlannedIp[] = [];
  const routes: ResultRoute[] = [];
  for (const a of addresses) {
    const prefix = routed ? (a.family === 4 ? 32 : 128) : a.prefixLen;
    const gateway = routed ? (a.family === 4 ? ROUTED_GW4 : ROUTED_GW6) : a.gateway;
    steps.push({
      description: `address ${a.address}/${prefix} on ${veth.podName}`,
      netns: ns,
      do: { op: 'addr.add', link: veth.podName, address: `${a.address}/${prefix}`, noDad: a.family === 6 },
    });
    ips.push({ address: `${a.address}/${prefix}`, gateway, family: a.family, interface: 1 });
  }
  steps.push({ description: 'bring up lo', netns: ns, do: { op: 'link.set', link: 'lo', up: true } });

  const carriesDefault = input.defaultRoute !== false;
  // A pod may sit on one network twice: its subnet and routes then reach the pod on two
  // interfaces. Each non-default interface's routes take a metric of their own (the slot is
  // unique in the sandbox), so neither add collides and either interface can go alone.
  const metric = carriesDefault ? undefined : (input.slot ?? interfaceIndex(input)) + 1;
  const withMetric = <T extends object>(o: T) => (metric === undefined ? o : { ...o, metric });
  for (const a of addresses) {
    const gw = routed ? (a.family === 4 ? ROUTED_GW4 : ROUTED_GW6) : a.gateway;
    if (!gw) continue;
    if (routed) {
      steps.push({
        description: `gateway ${gw} is ${ROUTED_HOST_MAC} on ${veth.podName}`,
        netns: ns,
        do: { op: 'neigh.add', link: veth.podName, address: gw, lladdr: ROUTED_HOST_MAC },
      });
    }
    if (carriesDefault) {
      steps.push({
        description: `default route via ${gw} in sandbox`,
        netns: ns,
        do: { op: 'route.add', dst: 'default', family: a.family, gateway: gw, link: veth.podName, onlink: routed },
      });
      routes.push({ dst: a.family === 4 ? '0.0.0.0/0' : '::/0', gw });
    } else if (routed) {
      // A bridge network's subnet is on-link from the address's prefix; a routed pod holds a
      // /32 (/128), so its other networks' subnets need a route through their own gateway.
      const subnet = (a.family === 4 ? network.ipv4 : network.ipv6)?.subnet;
      if (subnet) {
        steps.push({
          description: `route ${subnet} via ${gw} on ${veth.podName}`,
          netns: ns,
          do: withMetric({ op: 'route.add' as const, dst: subnet, gateway: gw, link: veth.podName, onlink: true }),
        });
        routes.push({ dst: subnet, gw, ...(metric ? { priority: metric } : {}) });
      }
    }
    for (const r of input.network.routes.filter((r) => r.dst.includes(':') === (a.family === 6))) {
      steps.push({
        description: `route ${r.dst} in sandbox`,
        netns: ns,
        do: withMetric({ op: 'route.add' as const, dst: r.dst, gateway: r.gw ?? gw, link: veth.podName, onlink: routed }),
      });
      routes.push({ dst: r.dst, gw: r.gw ?? gw, ...(metric ? { priority: metric } : {}) });
    }
  }
  return {
    veth,
    steps,
    interfaces: [
      { name: veth.hostName, kind: 'veth', mac: routed ? ROUTED_HOST_MAC : undefined, mtu: veth.mtu },
      { name: veth.podName, kind: 'veth', mac: veth.mac, mtu: veth.mtu, sandbox: ns, hostName: veth.hostName },
    ],
    ips,
    routes,
  };
}

/** The pod netns steps that give the new pod end its interface name. First, what detached
 * sandboxes left here for the reaper is moved aside, as their Detach would once have done: any
 * device this knit tagged, except the attaching sandbox's own live interfaces (an earlier one
 * of this very name is a leftover too). Then a pod end made under its other name (the name was
 * taken) is renamed, and it is tagged and brought up. A device that is not knit's keeps the
 * name, and the rename fails with EEXIST, naming it. */
export function claimPodName(ns: string, sandboxId: string, otherName: string, podName: string): Step[] {
  const tag = aliasTag(sandboxId, podName);
  return [
    {
      description: `move aside what detached sandboxes left in the sandbox netns`,
      netns: ns,
      do: {
        op: 'link.evict',
        tagPrefix: sandboxTagPrefix(),
        sparePrefix: aliasTag(sandboxId, '').slice(0, -'if='.length), // "<instance>:sandbox=<id>;"
        claim: tag,
        group: reapGroup(),
      },
    },
    {
      description: `name ${otherName} ${podName} if it was made under that name`,
      netns: ns,
      do: { op: 'link.set', link: otherName, name: podName, ignoreMissing: true },
    },
    { description: `bring up ${podName}`, netns: ns, do: { op: 'link.set', link: podName, up: true, alias: tag } },
  ];
}
