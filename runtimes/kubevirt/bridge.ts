// KubeVirt bridge binding (netpod.go bridgeBindingSpec): the guest takes the pod's MAC and
// addresses and sits on the pod's L2 segment through a bridge k6t-eth0 joining the pod NIC
// eth0-nic and tap0. KubeVirt renames the CNI's eth0 to eth0-nic and strips it; knit makes the
// pod end under that name, with its own MAC and no addresses, so detach is plain deletion.
//
// KubeVirt also keeps a dummy link named eth0 holding the pod's MAC and IPs. This kernel has no
// dummy links, so knit keeps them in its record instead (result ips, handoff.guest): the pod
// netns shows no pod IP in this binding.
//
// The bridge gets KubeVirt's placeholder 169.254.75.1<index>/32 so the launcher's DHCP server
// has a source address, and arp_ignore=1 so it answers ARP only for that. On a routed network
// the guest, served by DHCP, cannot be given the permanent neighbour entry for the link-local
// gateway that a runc pod gets, so the host end answers for it: for IPv4 it holds the gateway
// address itself (proxy ARP would answer only while the node has a route covering 169.254.1.1,
// which a node without a default route lacks: projectcalico/calico#3270), for IPv6 proxy NDP.
import { retireLink } from '../../src/net/retire.js';
import type { Step } from '../../src/base/plan.js';
import type { InterfaceInput, InterfacePlan } from '../../src/base/strategy.js';
import { aliasTag } from '../../src/base/names.js';
import { ROUTED_GW4, ROUTED_GW6 } from '../common/pod-veth.js';
import { lowerMac, planGuestVeth } from '../common/guest-veth.js';
import { planTap } from '../common/tap.js';
import { tapHandoff } from '../common/tap-handoff.js';
import { libvirtInterfaceXml } from './libvirt.js';
import { checkDerivedNames, kubevirtBridgeName, kubevirtNicName, kubevirtTapName } from './names.js';
import type { KubevirtOptions } from './options.js';

export function planBridgeBinding(input: InterfaceInput, opts: KubevirtOptions): InterfacePlan {
  const ns = input.netnsPath;
  const podIface = input.iface.name;
  const nic = kubevirtNicName(podIface);
  const bridge = kubevirtBridgeName(podIface);
  const tap = kubevirtTapName(podIface, opts.index);
  checkDerivedNames(opts.index, [nic, bridge, tap]);
  const nicMac = lowerMac(input);
  const pod = planGuestVeth(input, { name: nic, mac: nicMac }, 'dhcp');
  const { veth, guest } = pod;
  const alias = aliasTag(input.sandboxId, podIface);
  const hasV4 = input.addresses.some((a) => a.family === 4);
  const hasV6 = input.addresses.some((a) => a.family === 6);

  const steps: Step[] = [
    ...pod.steps,
    { description: `no IPv6 on ${nic}`, netns: ns, do: { op: 'sysctl.set', key: `net.ipv6.conf.${nic}.disable_ipv6`, value: '1' } },
    {
      description: `create bridge ${bridge}`,
      netns: ns,
      do: { op: 'link.add', kind: 'bridge', name: bridge, mac: nicMac, mtu: veth.mtu, alias, up: true, stpOff: true },
      undo: { op: 'link.del', link: bridge },
      // Parked, not deleted, on detach: the reaper deletes it inside the netns (src/core/reaper.ts).
      retire: retireLink(bridge),
      reapInNetns: true,
    },
    // Learning off on the pod NIC's port, as KubeVirt does (its bridge binding's LinkSetLearningOff):
    // a host bridge port in hairpin mode (knit's default) sends the guest's broadcasts back, and
    // the bridge would learn the guest's MAC on the pod NIC and stop sending it the guest's frames.
    { description: `${nic} joins ${bridge}, learning no MAC`, netns: ns, do: { op: 'link.set', link: nic, master: bridge, learning: false } },
    ...planTap({ netns: ns, name: tap, queues: opts.queues, owner: opts.owner, group: opts.group, mtu: veth.mtu, alias, master: bridge }),
  ];
  if (hasV4) {
    steps.push(
      {
        description: `DHCP source address on ${bridge}`,
        netns: ns,
        do: { op: 'addr.add', link: bridge, address: `169.254.75.1${opts.index}/32` },
      },
      { description: `${bridge} answers ARP only for its own address`, netns: ns, do: { op: 'sysctl.set', key: `net.ipv4.conf.${bridge}.arp_ignore`, value: '1' } },
    );
  }
  if (input.network.mode === 'routed') {
    if (hasV4) {
      // Scope host: an address the node never picks as the source of its own traffic.
      steps.push({
        description: `${ROUTED_GW4} on ${veth.hostName}, which answers the guest's ARP for its gateway`,
        do: { op: 'addr.add', link: veth.hostName, address: `${ROUTED_GW4}/32`, scope: 'host' },
      });
    }
    if (hasV6) {
      steps.push(
        { description: `proxy NDP on ${veth.hostName}`, do: { op: 'sysctl.set', key: `net.ipv6.conf.${veth.hostName}.proxy_ndp`, value: '1' } },
        { description: `answer NDP for ${ROUTED_GW6} on ${veth.hostName}`, do: { op: 'neigh.add', link: veth.hostName, address: ROUTED_GW6, proxy: true } },
      );
    }
  }

  const handoff = tapHandoff({
    runtime: 'kubevirt', model: 'bridge', name: tap, netns: ns, queues: opts.queues, owner: opts.owner, group: opts.group,
    mac: guest.mac, mtu: veth.mtu, podIpsOn: 'guest', guest, bridge,
    libvirt: libvirtInterfaceXml(tap, guest.mac, veth.mtu, opts.queues),
  });
  const tapIndex = pod.interfaces.length + 1;
  return {
    steps,
    interfaces: [
      ...pod.interfaces,
      { name: bridge, kind: 'bridge', mac: nicMac, mtu: veth.mtu, sandbox: ns },
      { name: tap, kind: 'tap', mtu: veth.mtu, sandbox: ns, handoff },
    ],
    ips: pod.ips.map((ip) => ({ ...ip, interface: tapIndex })),
    routes: pod.routes,
  };
}
