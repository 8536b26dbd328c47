// Names and tags of the objects knit creates. Host-side names are derived from
// (sandbox id, interface) so a retry, a recovery and GC all agree on them without a lookup;
// every object also carries an alias tag so GC can recognise knit's objects with no record.
import { createHash } from 'node:crypto';

function digest(...parts: string[]): string {
  return createHash('sha256').update(parts.join('\0')).digest('hex');
}

/** Whose objects these are. One daemon per node keeps the default "knit"; daemons that share a
 * host (tests, a canary beside the real one) get their own instance name, so each one's GC and
 * reaper only ever see its own objects. Set once at start-up from the config. */
let instance = 'knit';

export function setInstance(name: string): void {
  instance = name;
}

const aliasPrefix = () => `${instance}:`;

/** reapGroup() of the last instance asked about: every attach and detach asks. */
let reapGroupOf: { instance: string; group: number } | undefined;

/** Devices made inert by Detach wait in this link group; the reaper deletes the group in one
 * request, paying the kernel's per-veth RCU wait once for all of them. "knt\x01" for the
 * default instance, a hash of the name for others. */
export function reapGroup(): number {
  if (instance === 'knit') return 0x6b6e7401;
  if (reapGroupOf?.instance !== instance) reapGroupOf = { instance, group: (parseInt(digest('reap', instance).slice(0, 7), 16) | 0x10000000) >>> 0 };
  return reapGroupOf.group;
}

/** Host-side device name for one sandbox interface: "kn" + 10 hex = 12 bytes (≤ 15). */
export function hostIfName(sandboxId: string, ifname: string, role = ''): string {
  return `kn${role}${digest(sandboxId, ifname, role).slice(0, 12 - 2 - role.length)}`;
}

/** What every sandbox device's alias of this knit starts with ("<instance>:sandbox="). */
export function sandboxTagPrefix(): string {
  return `${aliasPrefix()}sandbox=`;
}

/** IFLA_IFALIAS value: who owns the device, readable by a human running `ip -d link`. */
export function aliasTag(sandboxId: string, ifname: string): string {
  return `${sandboxTagPrefix()}${sandboxId.slice(0, 200)};if=${ifname}`;
}

export function networkAliasTag(network: string): string {
  return `${aliasPrefix()}network=${network}`;
}

/** Parses an alias tag; undefined for objects that are not knit's. */
export function parseAliasTag(alias: string | undefined): { sandboxId?: string; ifname?: string; network?: string } | undefined {
  if (!alias?.startsWith(aliasPrefix())) return undefined;
  const fields = Object.fromEntries(
    alias.slice(aliasPrefix().length).split(';').map((kv) => {
      const at = kv.indexOf('=');
      return [kv.slice(0, at), kv.slice(at + 1)];
    }),
  );
  return { sandboxId: fields.sandbox, ifname: fields.if, network: fields.network };
}

/** A locally administered unicast MAC. From the IPv4 address when there is one (unique in its
 * network by construction, the scheme OVN-Kubernetes uses), else from a hash of the owner. */
export function podMac(ipv4: string | undefined, sandboxId: string, ifname: string): string {
  const bytes = ipv4
    ? [0x0a, 0x58, ...ipv4.split('.').map(Number)]
    : [0x0e, ...Buffer.from(digest(sandboxId, ifname).slice(0, 10), 'hex')];
  return bytes.map((b) => b.toString(16).padStart(2, '0')).join(':');
}

/** The bridge's own MAC, set explicitly: otherwise the kernel gives a bridge the lowest MAC of
 * its ports and changes it when that port leaves, and every pod's cached gateway MAC goes
 * stale (README "A gateway MAC that never moves"). Derived like podMac from the gateway
 * address, so it survives restarts and a re-made bridge. */
export function gatewayMac(network: string, gatewayV4: string | undefined): string {
  return podMac(gatewayV4, `${instance}\0network`, network);
}

/** The nftables table (family inet, host netns) that holds one sandbox's host ports:
 * "hostports-<instance>-" + 12 hex of the sandbox id. GC reads the instance back from the name,
 * so a daemon only ever sweeps its own tables. */
export function hostPortTable(sandboxId: string): string {
  return `hostports-${instance}-${digest('hostports', sandboxId).slice(0, 12)}`;
}

/** True for a host-port table of this daemon's instance. */
export function isOwnHostPortTable(name: string): boolean {
  const m = /^hostports-(.+)-[0-9a-f]{12}$/.exec(name);
  return m?.[1] === instance;
}

/** rtm_protocol of every route knit programs for the cluster (its node's block, its peers'
 * blocks, its routed pods' /32 and /128): 201, unnamed in iproute2's rt_protos and used by no
 * routing daemon or CNI we know of (kernel 2, boot 3, static 4, zebra 11, bird 12, kube-router
 * 17, Calico's Felix 80, bgp 186). A BGP speaker exports exactly these (docs/cluster.md), and knit
 * changes and removes no route without it. Stable: changing it would orphan routes on upgrade. */
export const ROUTE_PROTOCOL = 201;

/** The node's own block route (blackhole) sits behind any route that reaches a pod (the
 * bridge's connected route, a routed pod's /32): it only catches what no pod holds. */
export const BLOCK_ROUTE_METRIC = 4_242;

/** Alias of a network's VXLAN device (crossNode vxlan). */
export function vtepAliasTag(network: string): string {
  return `${networkAliasTag(network)};if=vtep`;
}

/** A VTEP's MAC: from the node and network names, so it survives restarts and a re-made
 * device, and the peers' FDB entries for it stay right. Locally administered, unicast. */
export function vtepMac(nodeName: string, network: string): string {
  return ['0e', ...digest('vtep', nodeName, network).slice(0, 10).match(/../g)!].join(':');
}

/** This knit's nftables table (family inet) for pod traffic leaving the cluster. */
export function clusterNatTable(): string {
  return `${instance}-cluster`;
}

/** This knit's nftables table (family inet) that enforces NetworkPolicy (docs/network-policy.md). */
export function policyTable(): string {
  return `${instance}-policy`;
}
