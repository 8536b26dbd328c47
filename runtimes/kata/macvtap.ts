// Kata's macvtap model (tapNetworkPair): a macvtap tap<N>_kata in bridge mode on the pod veth,
// with the veth's MTU and the MAC the network knows; the veth itself takes another MAC and no
// addresses, so it never answers ARP for the guest's IP. Kata gets there by moving a CNI
// veth's MAC and IPs away and restoring them on detach; knit makes the veth that way from the
// start, so detach is only deletion. The macvtap's ifindex is picked by prepare
// (macvtap-index.ts), so its /dev/tap<ifindex> is its own.
import { retireLink } from '../../src/net/retire.js';
import type { InterfaceInput, InterfacePlan } from '../../src/base/strategy.js';
import { aliasTag } from '../../src/base/names.js';
import { guestMac, lowerMac, planGuestVeth } from '../common/guest-veth.js';
import { tapHandoff } from '../common/tap-handoff.js';
import { kataTapName } from './names.js';
import { isPreparedMacvtap } from './macvtap-index.js';
import type { KataOptions } from './options.js';

export function planMacvtap(input: InterfaceInput, opts: KataOptions): InterfacePlan {
  const ns = input.netnsPath;
  const mac = guestMac(input);
  const pod = planGuestVeth(input, { name: input.iface.name, mac: lowerMac(input) }, 'agent');
  const name = kataTapName(opts.slot);
  const mtu = pod.veth.mtu;
  const steps = [
    ...pod.steps,
    {
      description: `create macvtap ${name} (bridge mode) on ${pod.veth.podName}`,
      netns: ns,
      do: {
        op: 'link.add' as const, kind: 'macvtap' as const, name, parent: pod.veth.podName, mode: 'bridge' as const,
        mac, mtu, alias: aliasTag(input.sandboxId, input.iface.name), up: true,
        ...(isPreparedMacvtap(input.prepared) && { index: input.prepared.macvtapIndex }),
      },
      undo: { op: 'link.del' as const, link: name },
      // Detach only parks it: it dies with its lower veth, which the reaper deletes from the host.
      retire: retireLink(name),
    },
  ];
  const handoff = tapHandoff({
    runtime: 'kata', model: 'macvtap', device: 'macvtap', name, netns: ns, queues: opts.queues,
    mac, mtu, podIpsOn: 'guest', guest: pod.guest,
    /** The character device to open (queues times) once the ifindex is known. */
    chardev: '/dev/tap<ifindex of the macvtap>',
  });
  const macvtapIndex = pod.interfaces.length;
  return {
    steps,
    interfaces: [...pod.interfaces, { name, kind: 'macvtap', mac, mtu, sandbox: ns, handoff }],
    ips: pod.ips.map((ip) => ({ ...ip, interface: macvtapIndex })),
    routes: pod.routes,
  };
}
