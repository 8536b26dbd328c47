// KubeVirt masquerade binding (netpod.go masqueradeBindingSpec): the pod veth as for runc, so
// the pod keeps its address on eth0; behind it a bridge k6t-eth0 (MAC 02:00:00:00:00:00,
// 10.0.2.1/24 and fd10:0:2::1/120) with tap0 as its port; the guest is 10.0.2.2 (fd10:0:2::2)
// and reaches the world through NAT out of eth0, and the world reaches it through DNAT of
// everything arriving on eth0, or of the declared ports only. Forwarding is switched on for
// the pod netns as a whole, as KubeVirt does; it is a setting of the pod's own namespace and
// is not reset on detach (knit cannot know it was off before).
import { retireLink } from '../../src/net/retire.js';
import type { Step } from '../../src/base/plan.js';
import type { InterfaceInput, InterfacePlan } from '../../src/base/strategy.js';
import { aliasTag } from '../../src/base/names.js';
import { KnitError } from '../../src/base/errors.js';
import { chainFamilies, podSide } from '../with-cni-chains/pod-side.js';
import { planTap } from '../common/tap.js';
import type { GuestConfig } from '../../src/base/handoff.js';
import { tapHandoff } from '../common/tap-handoff.js';
import { guestDns } from '../common/guest-config.js';
import { libvirtInterfaceXml } from './libvirt.js';
import { checkDerivedNames, kubevirtBridgeName, kubevirtTapName } from './names.js';
import { natRuleset } from './nft.js';
import type { KubevirtOptions } from './options.js';

/** pkg/network/link/mac.go: the gateway MAC the guest sees. */
export const MASQUERADE_GW_MAC = '02:00:00:00:00:00';
/** pkg/virt-launcher/virtwrap/api/defaults.go: the VM networks, gateway first host, guest next. */
export const MASQUERADE_V4 = { gateway: '10.0.2.1', guest: '10.0.2.2', prefix: 24 };
export const MASQUERADE_V6 = { gateway: 'fd10:0:2::1', guest: 'fd10:0:2::2', prefix: 120 };

export function planMasquerade(input: InterfaceInput, opts: KubevirtOptions): InterfacePlan {
  const ns = input.netnsPath;
  const others = input.request.interfaces.filter((x, i) => i < opts.index && (x.binding?.binding ?? 'masquerade') === 'masquerade');
  if (others.length) {
    throw opts.reader.invalid('binding', `only one masquerade interface per sandbox (interface ${others[0].name} already is): the guest network 10.0.2.0/24 and the nat table are per netns`);
  }
  // On a CNI network the chain's IPAM decides the families; knit's pools decide them otherwise.
  const families = input.network.mode === 'cni' ? chainFamilies(input) : [...new Set(input.addresses.map((a) => a.family))].sort();
  if (families.length === 0) {
    throw KnitError.invalid(`interfaces[${opts.index}].network`, 'masquerade needs the pod interface to have an address to masquerade behind');
  }
  const { veth, ...pod } = podSide(input);
  const bridge = kubevirtBridgeName(veth.podName);
  const tap = kubevirtTapName(veth.podName, opts.index);
  checkDerivedNames(opts.index, [bridge, tap]);
  const alias = aliasTag(input.sandboxId, input.iface.name);

  const steps: Step[] = [
    ...pod.steps,
    {
      description: `create bridge ${bridge} (masquerade gateway)`,
      netns: ns,
      do: { op: 'link.add', kind: 'bridge', name: bridge, mac: MASQUERADE_GW_MAC, mtu: veth.mtu, alias, up: true, stpOff: true },
      undo: { op: 'link.del', link: bridge },
      // Parked, not deleted, on detach: the reaper deletes it inside the netns (src/core/reaper.ts).
      retire: retireLink(bridge),
      reapInNetns: true,
    },
  ];
  const dns = guestDns(input);
  const guest: GuestConfig = { name: input.iface.name, mac: veth.mac, mtu: veth.mtu, ips: [], routes: [], neighbors: [], ...(dns ? { dns } : {}), delivery: 'dhcp' };
  const nat: Record<string, unknown> = { ports: opts.ports.length ? opts.ports : 'all' };
  for (const family of families) {
    const net = family === 4 ? MASQUERADE_V4 : MASQUERADE_V6;
    steps.push({
      description: `gateway address ${net.gateway}/${net.prefix} on ${bridge}`,
      netns: ns,
      do: { op: 'addr.add', link: bridge, address: `${net.gateway}/${net.prefix}`, noDad: family === 6 },
    });
    guest.ips.push({ address: `${net.guest}/${net.prefix}`, family, gateway: net.gateway });
    guest.routes.push({ dst: family === 4 ? '0.0.0.0/0' : '::/0', gateway: net.gateway });
    nat[`guest${family}`] = net.guest;
    nat[`gateway${family}`] = net.gateway;
  }
  if (families.includes(4)) {
    // The output-chain DNAT sends 127.0.0.1-sourced traffic out of the bridge.
    steps.push({ description: `route_localnet on ${bridge}`, netns: ns, do: { op: 'sysctl.set', key: `net.ipv4.conf.${bridge}.route_localnet`, value: '1' } });
  }
  steps.push(...planTap({ netns: ns, name: tap, queues: opts.queues, owner: opts.owner, group: opts.group, mtu: veth.mtu, alias, master: bridge }));
  for (const family of families) {
    const key = family === 4 ? 'net.ipv4.ip_forward' : 'net.ipv6.conf.all.forwarding';
    steps.push({ description: `IPv${family} forwarding in the sandbox`, netns: ns, do: { op: 'sysctl.set', key, value: '1' } });
  }
  for (const family of families) {
    const net = family === 4 ? MASQUERADE_V4 : MASQUERADE_V6;
    const rules = natRuleset({ family, podIface: veth.podName, bridge, guest: net.guest, gateway: net.gateway, ports: opts.ports });
    steps.push({
      description: `nft table ${rules.family} ${rules.table}: masquerade ${net.guest}, DNAT ${opts.ports.length ? opts.ports.map((p) => `${p.protocol}/${p.port}`).join(' ') : 'everything'} from ${veth.podName}`,
      netns: ns,
      do: { op: 'nft.apply', family: rules.family, table: rules.table, ruleset: rules.ruleset },
      undo: { op: 'nft.delete', family: rules.family, table: rules.table },
    });
  }

  const handoff = tapHandoff({
    runtime: 'kubevirt', model: 'masquerade', name: tap, netns: ns, queues: opts.queues, owner: opts.owner, group: opts.group,
    mac: veth.mac, mtu: veth.mtu, podIpsOn: 'pod', guest, bridge, nat,
    libvirt: libvirtInterfaceXml(tap, veth.mac, veth.mtu, opts.queues),
  });
  return {
    steps,
    interfaces: [
      ...pod.interfaces,
      { name: bridge, kind: 'bridge', mac: MASQUERADE_GW_MAC, mtu: veth.mtu, sandbox: ns },
      { name: tap, kind: 'tap', mtu: veth.mtu, sandbox: ns, handoff },
    ],
    ips: pod.ips,
    routes: pod.routes,
  };
}
