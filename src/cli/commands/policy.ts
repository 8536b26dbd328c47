// `knit policy explain`: NetworkPolicy's verdict on one flow, and the policies and rules that
// decide it, as the daemon's view of the cluster says (docs/network-policy.md).
import { type Command, str } from '../command.js';
import { usageError } from '../exit.js';
import { json } from '../format.js';

export const policy: Command = {
  name: 'policy',
  summary: 'NetworkPolicy: explain the verdict on a flow',
  usage: 'explain --from NS/POD|IP --to NS/POD|IP [--port 80/TCP | --port 53/UDP | --port ICMP]',
  options: { from: { type: 'string' }, to: { type: 'string' }, port: { type: 'string' } },
  remote: true,
  async run(ctx) {
    if (ctx.positionals[0] !== 'explain') throw usageError(`knit policy ${ctx.positionals[0] ?? ''}: the one subcommand is explain`);
    const from = str(ctx, 'from');
    const to = str(ctx, 'to');
    if (!from || !to) throw usageError('knit policy explain needs --from and --to');
    const spec = (str(ctx, 'port') ?? '').toUpperCase();
    const m = /^(?:(\d{1,5})(?:\/(TCP|UDP|SCTP))?|ICMP|(\d{1,3}))$/.exec(spec);
    if (!m) throw usageError(`--port ${JSON.stringify(spec)}: expected PORT[/TCP|UDP|SCTP], ICMP, or an IP protocol number`);
    const req = m[1] ? { from, to, port: Number(m[1]), protocol: m[2] ?? 'TCP' } : { from, to, protocol: spec === 'ICMP' ? '1' : m[3]! };
    const r = await ctx.client().call('ExplainPolicy', req);
    if (ctx.json) {
      ctx.io.out(json(r));
      return 0;
    }
    const what = m[1] ? `${m[1]}/${m[2] ?? 'TCP'}` : spec;
    ctx.io.out(`${from} (${r.from_ip}) -> ${to} (${r.to_ip}) ${what}: ${r.allowed ? 'ALLOWED' : 'DENIED'}`);
    for (const [name, s] of [['egress', r.egress], ['ingress', r.ingress]] as const) {
      ctx.io.out(`  ${name.padEnd(7)} ${s.allowed ? 'allowed' : 'denied '} ${s.pod || '-'}: ${s.why}`);
      if (s.selecting?.length) ctx.io.out(`          selected by ${s.selecting.join(', ')}`);
    }
    return 0;
  },
};
