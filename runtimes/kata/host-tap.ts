// Kata's DAN host-tap: no veth and nothing in the pod netns. A tap on the host, connected the
// way runc's host veth end is (a port of the network's bridge, or routed: the pod addresses
// routed to it, its MAC the gateway MAC the guest holds a permanent neighbour entry for), and
// the DAN file that tells runtime-rs to open that tap and what to configure in the guest.
//
// One DAN file describes the whole sandbox and Kata then ignores the netns, so a sandbox with
// a host-tap interface can have no other interface: planInterface sees one interface's
// addresses at a time and cannot write the others' entries into the shared file.
import { createHash } from 'node:crypto';
import type { Step } from '../../src/base/plan.js';
import type { InterfaceInput, InterfacePlan } from '../../src/base/strategy.js';
import { aliasTag, hostIfName } from '../../src/base/names.js';
import { KnitError } from '../../src/base/errors.js';
import { planPodVeth, ROUTED_HOST_MAC } from '../common/pod-veth.js';
import { guestConfigFrom, guestDns, splitPodL3 } from '../common/guest-config.js';
import { planTap } from '../common/tap.js';
import { tapHandoff } from '../common/tap-handoff.js';
import { planBandwidth } from '../common/bandwidth.js';
import { danDevice, danPath, type DanConfig } from './dan.js';
import type { KataOptions } from './options.js';

export function planHostTap(input: InterfaceInput, opts: KataOptions): InterfacePlan {
  if (input.request.interfaces.length > 1) {
    throw KnitError.invalid(
      `interfaces[${opts.index}].binding.mode`,
      `host-tap needs the sandbox's only interface (this request has ${input.request.interfaces.length}): Kata reads one DAN file per sandbox and then ignores the netns`,
    );
  }
  const { network, sandboxId } = input;
  const routed = network.mode === 'routed';
  // What runc would configure in the pod is what the guest gets.
  const { veth, ...pod } = planPodVeth(input);
  const { l3 } = splitPodL3(pod.steps, input.netnsPath, veth.podName);
  const guest = guestConfigFrom(l3, pod.ips, {
    name: input.iface.name, mac: veth.mac, mtu: veth.mtu, dns: guestDns(input), delivery: 'dan',
  });

  const tap = hostIfName(sandboxId, input.iface.name, 't');
  const steps: Step[] = planTap({
    name: tap, queues: opts.queues, mtu: veth.mtu, alias: aliasTag(sandboxId, input.iface.name),
    ...(routed ? { mac: ROUTED_HOST_MAC } : { master: network.bridge! }),
  });
  if (!routed && network.hairpin) {
    steps.push({ description: `hairpin on bridge port ${tap}`, do: { op: 'link.set', link: tap, hairpin: true } });
  }
  if (routed) {
    for (const a of input.addresses) {
      const dst = `${a.address}/${a.family === 4 ? 32 : 128}`;
      steps.push({
        description: `host route ${a.address} via ${tap}`,
        do: { op: 'route.add', dst, link: tap, scope: 'link' },
        undo: { op: 'route.del', dst, link: tap },
      });
    }
    if (input.addresses.some((a) => a.family === 4)) {
      steps.push({ description: `forward IPv4 arriving on ${tap}`, do: { op: 'sysctl.set', key: `net.ipv4.conf.${tap}.forwarding`, value: '1' } });
    }
  }

  // The tap is the guest's path to the node here: limits are shaped on it.
  steps.push(...planBandwidth(sandboxId, input.iface.name, tap, veth.mtu, input.iface.bandwidth));

  const path = danPath(opts.danDir, sandboxId);
  const dan: DanConfig = { devices: [danDevice(tap, opts.queues, guest)] };
  const content = `${JSON.stringify(dan, null, 2)}\n`;
  // Created exclusively inside the configured dir; removed only while it holds what knit wrote.
  steps.push({
    description: `write Kata DAN file ${path}`,
    do: { op: 'file.write', path, content, mode: 0o644, within: opts.danRoot, withinKey: 'kata.danDir' },
    undo: { op: 'file.remove', path, sha256: createHash('sha256').update(content).digest('hex') },
  });

  const handoff = tapHandoff({
    runtime: 'kata', model: 'host-tap', name: tap, netns: null, queues: opts.queues,
    mac: veth.mac, mtu: veth.mtu, podIpsOn: 'guest', guest, dan: { path },
  });
  return {
    steps,
    interfaces: [{ name: tap, kind: 'tap', mtu: veth.mtu, ...(routed ? { mac: ROUTED_HOST_MAC } : {}), handoff }],
    ips: pod.ips.map((ip) => ({ ...ip, interface: 0 })),
    routes: pod.routes,
  };
}
