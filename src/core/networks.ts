// The host side of each network, made once at start-up and on config reload: in bridge mode a
// Linux bridge carrying the gateway addresses. A bridge of that name that knit did not make
// (no alias tag) is left alone and the network reported not ready, with the reason. A CNI
// network has no host side of knit's: its plugins must exist and speak the list's version.
import type { ActionRunner } from './executor.js';
import type { NetworkSpec } from '../base/strategy.js';
import { gatewayMac, networkAliasTag } from '../base/names.js';
import { ensureChain } from '../cni-exec/network.js';

const prefixOf = (cidr: string) => cidr.split('/')[1];

export async function ensureNetwork(runner: ActionRunner, net: NetworkSpec): Promise<void> {
  if (net.mode === 'cni') return ensureChain(net);
  if (net.mode !== 'bridge' || !net.bridge) return;
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
  if (!existing) {
    await runner.runOps(undefined, [{ op: 'link.add', kind: 'bridge', name: net.bridge, alias: tag, mtu: net.mtu, mac, up: true }]);
  } else {
    await runner.runOps(undefined, [{ op: 'link.set', link: net.bridge, mac, up: true }]);
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
