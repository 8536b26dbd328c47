// The host side of each network, made once at start-up and on config reload: in bridge mode a
// Linux bridge carrying the gateway addresses. A bridge of that name that knit did not make
// (no alias tag) is left alone and the network reported not ready, with the reason. A CNI
// network has no host side of knit's: its plugins must exist and speak the list's version.
//
// The bridge's own br_netfilter switches follow the network's bridgeNetfilter (on by default):
// pod-to-pod traffic on one bridge is switched at L2 and meets conntrack, kube-proxy's DNAT and
// a NetworkPolicy's rules only when the bridge hands it to the inet hooks. knit sets the
// per-bridge attributes, never the netns-wide net.bridge.bridge-nf-call-* sysctls, which would
// change every other bridge of the node too (docs/bridge-netfilter.md).
import type { ActionRunner } from './executor.js';
import type { NetworkSpec } from '../base/strategy.js';
import type { LinkInfo } from '../base/ops.js';
import { gatewayMac, networkAliasTag } from '../base/names.js';
import { ensureChain } from '../cni-exec/network.js';
import type { RunOps } from '../net/find-link.js';

const prefixOf = (cidr: string) => cidr.split('/')[1];

/** The sysctl br_netfilter registers in each netns: absent, nothing bridged reaches netfilter. */
const BR_NETFILTER_SYSCTL = 'net.bridge.bridge-nf-call-iptables';

/** Sets up a network's host side; answers what works other than the network asks without
 * making it unusable (a kernel without br_netfilter), one sentence each. */
export async function ensureNetwork(runner: ActionRunner, net: NetworkSpec): Promise<string[]> {
  if (net.mode === 'cni') {
    await ensureChain(net);
    return [];
  }
  if (net.mode !== 'bridge' || !net.bridge) return [];
  const tag = networkAliasTag(net.name);
  let existing;
  try {
    [{ link: existing }] = await runner.runOps(undefined, [{ op: 'link.get', link: net.bridge }]);
  } catch (err) {
    if ((err as { code?: string }).code !== 'ENODEV') throw err;
  }
  if (existing && existing.alias !== tag) {
    throw new Error(`a link named ${net.bridge} exists and knit did not create it (alias "${existing.alias ?? ''}"); knit will not use or change it`);
  }
  // Setting the address, even to the value it has, pins it: a bridge knit found at start-up
  // (made by an older knit) stops following its ports too.
  const mac = gatewayMac(net.name, net.ipv4?.gateway);
  const netfilter = net.bridgeNetfilter ?? true;
  if (!existing) {
    await runner.runOps(undefined, [{ op: 'link.add', kind: 'bridge', name: net.bridge, alias: tag, mtu: net.mtu, mac, up: true, netfilter }]);
  } else {
    await runner.runOps(undefined, [{ op: 'link.set', link: net.bridge, mac, up: true, bridgeNetfilter: netfilter }]);
  }
  const want = [
    net.ipv4 && `${net.ipv4.gateway}/${prefixOf(net.ipv4.subnet)}`,
    net.ipv6 && `${net.ipv6.gateway}/${prefixOf(net.ipv6.subnet)}`,
  ].filter((a): a is string => !!a);
  const [{ addrs = [] }] = await runner.runOps(undefined, [{ op: 'addr.list', link: net.bridge }]);
  const missing = want.filter((cidr) => !addrs.some((a) => `${a.address}/${a.prefixLen}` === cidr));
  if (missing.length) {
    await runner.runOps(undefined, missing.map((address) => ({ op: 'addr.add' as const, link: net.bridge!, address, noDad: address.includes(':') })));
  }
  const [{ link: made }] = await runner.runOps(undefined, [{ op: 'link.get', link: net.bridge }]);
  return bridgeNetfilterProblems(runner.runOps.bind(runner), net, made);
}

/** How a bridge's netfilter switches differ from what its network asks, one sentence each:
 * switched otherwise (by hand), or asked on where this netns has no br_netfilter to honour it. */
export async function bridgeNetfilterProblems(runOps: RunOps, net: NetworkSpec, bridge: LinkInfo): Promise<string[]> {
  if (net.mode !== 'bridge') return [];
  const want = net.bridgeNetfilter ?? true;
  if (want && !(await hasBrNetfilter(runOps))) {
    return [`bridge ${bridge.name}: this kernel has no br_netfilter in knit's netns (no ${BR_NETFILTER_SYSCTL}), so pod-to-pod traffic on the bridge bypasses netfilter (Services between its pods, NetworkPolicy); load it with "modprobe br_netfilter"`];
  }
  const flags = { nf_call_iptables: bridge.bridge?.nfCallIptables ?? false, nf_call_ip6tables: bridge.bridge?.nfCallIp6tables ?? false };
  return Object.entries(flags)
    .filter(([, on]) => on !== want)
    .map(([name, on]) => `bridge ${bridge.name} has ${name} ${on ? 'on' : 'off'}; network ${net.name} has bridgeNetfilter ${want}`);
}

async function hasBrNetfilter(runOps: RunOps): Promise<boolean> {
  try {
    await runOps(undefined, [{ op: 'sysctl.get', key: BR_NETFILTER_SYSCTL }]);
    return true;
  } catch (err) {
    if ((err as { code?: string }).code === 'ENOENT') return false;
    throw err;
  }
}

/** Removes a bridge knit made for a network that is no longer configured (and unused). */
export async function removeNetwork(runner: ActionRunner, net: NetworkSpec): Promise<void> {
  if (net.mode !== 'bridge' || !net.bridge) return;
  const [{ link }] = await runner.runOps(undefined, [{ op: 'link.get', link: net.bridge }]).catch(() => [{ link: undefined }]);
  if (link?.alias === networkAliasTag(net.name)) await runner.runOps(undefined, [{ op: 'link.del', link: net.bridge, ignoreMissing: true }]);
}

/** A bridge whose subnet moved (a node's podCIDR changed while no pod held an address in it)
 * loses the gateway address of the old one; ensureNetwork has added the new one. */
export async function removeMovedGateways(runner: ActionRunner, old: NetworkSpec, next: NetworkSpec): Promise<void> {
  if (next.mode !== 'bridge' || !old.bridge) return;
  const gone = (['ipv4', 'ipv6'] as const).flatMap((k) => {
    const pool = old[k];
    return pool && pool.subnet !== next[k]?.subnet ? [`${pool.gateway}/${prefixOf(pool.subnet)}`] : [];
  });
  if (gone.length) await runner.runOps(undefined, gone.map((address) => ({ op: 'addr.del' as const, link: old.bridge!, address, ignoreMissing: true })));
}
