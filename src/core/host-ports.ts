// Host ports on knit's own networks (bridge, routed): an Attach's port_mappings with a host_port
// become one nftables table per sandbox in the host netns (README "Host ports"). The table DNATs
// the host port, on every host address or the host_ip given, to the pod's address; from other
// machines (prerouting), from the node itself and 127.0.0.1 (output), and from the pod itself
// (hairpin). It masquerades only what would otherwise fail: localhost-originated flows (127/8
// cannot leave the host) and hairpin flows (the pod would answer itself directly).
// A CNI network's chain publishes them with its own portmap plugin instead (runtimes/with-cni-chains).
import type { Step } from '../base/plan.js';
import type { SandboxRecord } from './record.js';
import type { ActionRunner } from './executor.js';
import type { PortMapping } from '../base/types.js';
import { KnitError } from '../base/errors.js';
import { hostPortTable } from '../base/names.js';
import { tryParseIp } from '../ipam/ip.js';

export interface HostPortsInput {
  sandboxId: string;
  mappings: PortMapping[];
  pod4?: string;
  pod6?: string;
  /** The host device 127.0.0.1 DNAT leaves by (the bridge, or the routed pod's host veth):
   * it needs route_localnet. `original` is the value to give back on detach; absent: the
   * device is the sandbox's own and goes with it. */
  localnet: { device: string; original?: string };
  /** The pod's bridge port when it is not in hairpin mode already: with br_netfilter loaded
   * (as on Kubernetes nodes) a hairpin flow is DNAT'd at the bridge and must go back out the
   * port it came in by. The port dies with the sandbox, so there is nothing to undo. */
  hairpinPort?: string;
}

export const localnetGuardChain = (device: string) => `localnet_${device}`;

/** The mappings that publish a host port, with their index in the request. */
export function publishedPorts(mappings: PortMapping[]): { mapping: PortMapping; index: number }[] {
  return mappings.flatMap((mapping, index) => (mapping.hostPort ? [{ mapping, index }] : []));
}

/** The host addresses a mapping listens on, per family: 'any' or one address. */
function scope(m: PortMapping): { 4?: string; 6?: string } {
  if (!m.hostIp) return { 4: 'any', 6: 'any' };
  const ip = tryParseIp(m.hostIp)!;
  const wildcard = ip.value === 0n;
  return ip.family === 4 ? { 4: wildcard ? 'any' : String(ip.value) } : { 6: wildcard ? 'any' : String(ip.value) };
}

function overlap(a: PortMapping, b: PortMapping): boolean {
  if (a.protocol !== b.protocol || a.hostPort !== b.hostPort) return false;
  const sa = scope(a);
  const sb = scope(b);
  return ([4, 6] as const).some((f) => sa[f] !== undefined && sb[f] !== undefined && (sa[f] === 'any' || sb[f] === 'any' || sa[f] === sb[f]));
}

const describe = (m: PortMapping) => `${m.protocol}/${m.hostPort} on ${m.hostIp ?? 'every host address'}`;

/** Refuses a host port another sandbox holds (the same protocol and port on an overlapping
 * address: equal, or either one every address of the family), naming the holder, and two
 * mappings of one request that overlap. */
export function refuseHostPortConflicts(sandboxId: string, mappings: PortMapping[], holders: Iterable<{ sandboxId: string; mappings: PortMapping[] }>): void {
  const mine = publishedPorts(mappings);
  for (const [k, { mapping, index }] of mine.entries()) {
    const twin = mine.slice(0, k).find((o) => overlap(o.mapping, mapping));
    if (twin) {
      throw KnitError.invalid(`port_mappings[${index}]`, `host port ${describe(mapping)} overlaps port_mappings[${twin.index}]`);
    }
  }
  for (const holder of holders) {
    if (holder.sandboxId === sandboxId) continue;
    for (const theirs of publishedPorts(holder.mappings)) {
      const clash = mine.find((m) => overlap(m.mapping, theirs.mapping));
      if (!clash) continue;
      const field = `port_mappings[${clash.index}]`;
      throw new KnitError(
        'ALREADY_EXISTS',
        `${field}: host port ${describe(clash.mapping)} is held by sandbox ${holder.sandboxId} (its port_mappings[${theirs.index}]: ${describe(theirs.mapping)})`,
        { field },
      );
    }
  }
}

/** The sandbox's table: DNAT of each published port, the masquerades, and a guard that keeps
 * route_localnet from opening 127/8 to the pods (a packet from the device to 127/8 is dropped
 * unless it answers one of these DNATs). */
export function hostPortRuleset(o: HostPortsInput): string {
  const table = hostPortTable(o.sandboxId);
  const dnat: string[] = [];
  for (const { mapping: m } of publishedPorts(o.mappings)) {
    const s = scope(m);
    const to = m.containerPort || m.hostPort;
    const match = `meta l4proto ${m.protocol} th dport ${m.hostPort}`;
    if (o.pod4 && s[4]) dnat.push(`${s[4] === 'any' ? '' : `ip daddr ${m.hostIp} `}${match} counter dnat ip to ${o.pod4}:${to}`);
    if (o.pod6 && s[6]) dnat.push(`${s[6] === 'any' ? '' : `ip6 daddr ${m.hostIp} `}${match} counter dnat ip6 to [${o.pod6}]:${to}`);
  }
  const masquerade: string[] = [];
  if (o.pod4) {
    masquerade.push(`ct status dnat ip saddr 127.0.0.0/8 ip daddr ${o.pod4} counter masquerade`);
    masquerade.push(`ct status dnat ip saddr ${o.pod4} ip daddr ${o.pod4} counter masquerade`);
  }
  if (o.pod6) masquerade.push(`ct status dnat ip6 saddr ${o.pod6} ip6 daddr ${o.pod6} counter masquerade`);
  const dev = o.localnet.device;
  const chain = (name: string, base: string | undefined, rules: string[]) => [`\tchain ${name} {`, ...(base ? [`\t\t${base}`] : []), ...rules.map((r) => `\t\t${r}`), '\t}'];
  return [
    `table inet ${table} {`,
    // A packet to 127/8 from outside never matches (it is the host's own); IPv6 never routes ::1 off the host.
    ...chain('prerouting', 'type nat hook prerouting priority -100; policy accept;', ['ip daddr 127.0.0.0/8 return', 'fib daddr type local jump hostports']),
    ...chain('output', 'type nat hook output priority -100; policy accept;', ['ip6 daddr ::1 return', 'fib daddr type local jump hostports']),
    ...chain('hostports', undefined, dnat),
    ...chain('postrouting', 'type nat hook postrouting priority 100; policy accept;', masquerade),
    ...chain(localnetGuardChain(dev), 'type filter hook input priority 0; policy accept;', [
      `iifname "${dev}" ip daddr 127.0.0.0/8 ct status dnat accept`,
      `iifname "${dev}" ip daddr 127.0.0.0/8 counter drop`,
    ]),
    '}',
    '',
  ].join('\n');
}

/** The steps, in the host netns. Order matters for the inverses, which run in reverse: the
 * table goes first, then the flows it DNAT'd are flushed, then route_localnet is given back. */
export function planHostPorts(o: HostPortsInput): Step[] {
  const published = publishedPorts(o.mappings);
  if (!published.length) return [];
  for (const { mapping: m, index } of published) {
    const s = scope(m);
    if (!((o.pod4 && s[4]) || (o.pod6 && s[6]))) {
      // It would publish nothing: say so rather than accept it.
      throw KnitError.invalid(`port_mappings[${index}].host_ip`, `${m.hostIp} is IPv${s[4] ? 4 : 6} and the pod has no IPv${s[4] ? 4 : 6} address to publish it to`);
    }
  }
  const table = hostPortTable(o.sandboxId);
  const { device, original } = o.localnet;
  const key = `net.ipv4.conf.${device}.route_localnet`;
  const steps: Step[] = [];
  if (o.pod4) {
    steps.push({
      description: `route_localnet on ${device} (127.0.0.1 host ports)`,
      do: { op: 'sysctl.set', key, value: '1' },
      ...(original !== undefined && { undo: { op: 'localnet.restore', device, value: original, guardChain: localnetGuardChain(device) } }),
    });
  }
  if (o.hairpinPort) steps.push({ description: `hairpin on bridge port ${o.hairpinPort} (host ports)`, do: { op: 'link.set', link: o.hairpinPort, hairpin: true } });
  const families = ([[4, o.pod4], [6, o.pod6]] as const).filter(([, pod]) => pod);
  for (const { mapping: m } of published) {
    for (const [family, pod] of families) {
      steps.push({
        description: `flush conntrack of ${m.protocol}/${m.hostPort} to ${pod} when the mapping goes (IPv${family})`,
        do: { op: 'conntrack.flush', family, protocol: m.protocol, port: m.hostPort, replySrc: pod },
        undo: { op: 'conntrack.flush', family, protocol: m.protocol, port: m.hostPort, replySrc: pod },
      });
    }
  }
  steps.push({
    description: `nft table inet ${table}: host ports ${published.map(({ mapping: m }) => `${m.protocol}/${m.hostPort}→${m.containerPort || m.hostPort}`).join(', ')}`,
    do: { op: 'nft.apply', family: 'inet', table, ruleset: hostPortRuleset(o) },
    undo: { op: 'nft.delete', family: 'inet', table },
  });
  // A UDP flow tracked before the rule existed would keep bypassing it: flush those now.
  for (const { mapping: m } of published.filter((p) => p.mapping.protocol === 'udp')) {
    for (const [family] of families) {
      steps.push({ description: `flush stale conntrack of udp/${m.hostPort} (IPv${family})`, do: { op: 'conntrack.flush', family, protocol: 'udp', port: m.hostPort } });
    }
  }
  return steps;
}

/** The host-port tables a record's plan makes. */
export function hostPortTablesOf(rec: Pick<SandboxRecord, 'steps'>): string[] {
  return rec.steps.flatMap((s) => (s.do.op === 'nft.apply' && s.netns === undefined && s.do.table.startsWith('hostports-') ? [s.do.table] : []));
}

/** What a record publishes, for the conflict check: nothing when its plan made no table (a
 * CNI network's chain publishes its ports itself). */
export function heldHostPorts(rec: SandboxRecord): { sandboxId: string; mappings: PortMapping[] } {
  return { sandboxId: rec.sandboxId, mappings: hostPortTablesOf(rec).length ? rec.request.portMappings : [] };
}

/** Differences for knit check: a host-port table the record made that the host lacks, and a
 * route_localnet it set that is off again. */
export async function checkHostPorts(rec: SandboxRecord, runner: ActionRunner): Promise<string[]> {
  const expected = hostPortTablesOf(rec);
  if (!expected.length || !runner.hostPortTables) return [];
  const present = new Set(await runner.hostPortTables());
  const differences = expected.filter((t) => !present.has(t)).map((t) => `nft table inet ${t} (host ports) is missing on the host`);
  const localnet = rec.steps.find((s) => s.do.op === 'sysctl.set' && s.netns === undefined && s.do.key.endsWith('.route_localnet'));
  if (localnet?.do.op === 'sysctl.set') {
    const key = localnet.do.key;
    const [{ value } = {}] = await runner.runOps(undefined, [{ op: 'sysctl.get', key }]).catch(() => [{ value: 'missing' }]);
    if (value?.trim() !== '1') differences.push(`${key} is ${value?.trim() ?? 'unreadable'}, expected 1: host ports on 127.0.0.1 do not answer`);
  }
  return differences;
}
