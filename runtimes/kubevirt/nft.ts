// The NAT table KubeVirt's masquerade binding installs in the launcher's netns
// (pkg/network/setup/netpod/masquerade: setupNATByFamily), one per address family, as one
// `nft -f` table definition. The runner applies it as a replacement of the whole table in one
// transaction, so a replay after a crash does not add the rules twice; undo deletes the table.
import type { PortSpec } from './options.js';

export const NAT_TABLE = 'nat';

export interface NatSpec {
  family: 4 | 6;
  /** Pod interface traffic comes in by (eth0). */
  podIface: string;
  /** The k6t bridge the guest sits behind. */
  bridge: string;
  /** Guest address (10.0.2.2) and the bridge's (10.0.2.1). */
  guest: string;
  gateway: string;
  ports: PortSpec[];
}

export function natRuleset(spec: NatSpec): { family: 'ip' | 'ip6'; table: string; ruleset: string } {
  const family = spec.family === 4 ? 'ip' : 'ip6';
  const loopback = spec.family === 4 ? '127.0.0.1' : '::1';
  const { guest, gateway } = spec;
  const preInbound: string[] = [];
  const postInbound: string[] = [];
  const output: string[] = [];
  if (spec.ports.length === 0) {
    // Nothing declared: everything arriving on the pod interface belongs to the guest.
    preInbound.push(`counter dnat to ${guest}`);
    postInbound.push(`${family} saddr { ${loopback} } counter snat to ${gateway}`);
    output.push(`${family} daddr { ${loopback} } counter dnat to ${guest}`);
  } else {
    for (const { protocol, port } of spec.ports) {
      preInbound.push(`${protocol} dport { ${port} } counter dnat to ${guest}`);
      postInbound.push(`${protocol} dport ${port} ${family} saddr { ${loopback} } counter snat to ${gateway}`);
      output.push(`${family} daddr { ${loopback} } ${protocol} dport ${port} counter dnat to ${guest}`);
    }
  }
  const chain = (name: string, hook: string | undefined, rules: string[]) => [
    `\tchain ${name} {`,
    ...(hook ? [`\t\t${hook}`] : []),
    ...rules.map((r) => `\t\t${r}`),
    '\t}',
  ];
  const nat = (hook: string, priority: number) => `type nat hook ${hook} priority ${priority}; policy accept;`;
  const ruleset = [
    `table ${family} ${NAT_TABLE} {`,
    ...chain('prerouting', nat('prerouting', -100), [`iifname "${spec.podIface}" counter jump KUBEVIRT_PREINBOUND`]),
    ...chain('input', nat('input', 100), []),
    ...chain('output', nat('output', -100), output),
    ...chain('postrouting', nat('postrouting', 100), [
      `${family} saddr ${guest} counter masquerade`,
      `oifname "${spec.bridge}" counter jump KUBEVIRT_POSTINBOUND`,
    ]),
    ...chain('KUBEVIRT_PREINBOUND', undefined, preInbound),
    ...chain('KUBEVIRT_POSTINBOUND', undefined, postInbound),
    '}',
    '',
  ].join('\n');
  return { family, table: NAT_TABLE, ruleset };
}
