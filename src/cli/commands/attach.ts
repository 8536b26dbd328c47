// `knit attach` and `knit plan`: the same flags build one knit.v1 AttachRequest. `knit attach-if`
// (and `knit plan --add-if`): one more interface for an attached sandbox.
import { type Command, type Context, str, strs } from '../command.js';
import { usageError } from '../exit.js';
import { parseInterface, parseKeyValues, parsePod, parsePort, parseRuntime } from '../flags.js';
import { json, plain, table } from '../format.js';
import { lower, renderResult } from '../render.js';
import { RUNTIME_KINDS } from '../../base/runtime-kinds.js';

const attachOptions = {
  id: { type: 'string' },
  netns: { type: 'string' },
  runtime: { type: 'string' },
  if: { type: 'string', multiple: true },
  pod: { type: 'string' },
  uid: { type: 'string' },
  port: { type: 'string', multiple: true },
  label: { type: 'string', multiple: true },
  annotation: { type: 'string', multiple: true },
  nameserver: { type: 'string', multiple: true },
  search: { type: 'string', multiple: true },
} as const;

const attachUsage =
  `--id SANDBOX_ID --netns PATH [--runtime ${RUNTIME_KINDS.join('|')}] [--if NAME[,network=N,mac=M,mtu=N,ip=CIDR,binding.K=V,bdf=B,ingress-rate=BITS,egress-rate=BITS,...,default]]... ` +
  '[--pod NAMESPACE/NAME] [--uid POD_UID] [--port [HOSTIP:]HOSTPORT:PORT[/PROTO]]... [--label K=V]... [--annotation K=V]... ' +
  '[--nameserver IP]... [--search DOMAIN]...';

export function attachRequestFrom(ctx: Context): object {
  const id = str(ctx, 'id');
  const netns = str(ctx, 'netns');
  if (!id) throw usageError('--id is required (the sandbox id)');
  if (!netns) throw usageError('--netns is required (the sandbox network namespace path)');
  const pod = str(ctx, 'pod');
  const nameservers = strs(ctx, 'nameserver');
  const search = strs(ctx, 'search');
  return {
    sandbox_id: id,
    netns_path: netns,
    runtime: parseRuntime(str(ctx, 'runtime')),
    interfaces: strs(ctx, 'if').map(parseInterface),
    ...(pod ? parsePod(pod) : {}),
    pod_uid: str(ctx, 'uid') ?? '',
    port_mappings: strs(ctx, 'port').map(parsePort),
    labels: parseKeyValues('label', strs(ctx, 'label')),
    annotations: parseKeyValues('annotation', strs(ctx, 'annotation')),
    dns: nameservers.length || search.length ? { nameservers, search, options: [], domain: '' } : null,
  };
}

export const attach: Command = {
  name: 'attach',
  summary: 'attach a sandbox to its networks',
  usage: attachUsage,
  options: attachOptions,
  remote: true,
  async run(ctx) {
    const res = await ctx.client().call('Attach', attachRequestFrom(ctx));
    if (ctx.json) ctx.io.out(json(res.result));
    else {
      const r = res.result;
      ctx.io.out(`attached ${r.sandbox_id} (${lower(r.runtime)}) in ${r.netns_path}`);
      const body = renderResult(r);
      if (body) ctx.io.out(body);
    }
    return 0;
  },
};

/** `--if` of attach-if and plan --add-if: exactly one interface. */
function oneInterface(ctx: Context, flag: string): object {
  const specs = strs(ctx, flag);
  if (specs.length !== 1) throw usageError(`--${flag} is required, once (NAME[,network=N,...])`);
  return parseInterface(specs[0]);
}

export const attachIf: Command = {
  name: 'attach-if',
  summary: 'add one interface to an attached sandbox (hot-plug; idempotent)',
  usage: '--id SANDBOX_ID --if NAME[,network=N,mac=M,mtu=N,ip=CIDR,binding.K=V,bdf=B,...]',
  options: { id: { type: 'string' }, if: { type: 'string', multiple: true } },
  remote: true,
  async run(ctx) {
    const id = str(ctx, 'id');
    if (!id) throw usageError('--id is required (the sandbox id)');
    const res = await ctx.client().call('AddInterface', { sandbox_id: id, interface: oneInterface(ctx, 'if') });
    if (ctx.json) ctx.io.out(json(res.result));
    else {
      ctx.io.out(`sandbox ${id} now has:`);
      ctx.io.out(renderResult(res.result));
    }
    return 0;
  },
};

export const plan: Command = {
  name: 'plan',
  summary: 'print what attach (or, with --add-if, attach-if) would do, step by step, without doing it',
  usage: `${attachUsage}\n       knit plan --id SANDBOX_ID --add-if NAME[,network=N,...]`,
  options: { ...attachOptions, 'add-if': { type: 'string', multiple: true } },
  remote: true,
  async run(ctx) {
    const adding = strs(ctx, 'add-if').length > 0;
    if (adding && !str(ctx, 'id')) throw usageError('--id is required (the sandbox id)');
    const req = adding ? { add_interface: { sandbox_id: str(ctx, 'id'), interface: oneInterface(ctx, 'add-if') } } : { attach: attachRequestFrom(ctx) };
    const res = await ctx.client().call('Plan', req);
    if (ctx.json) {
      ctx.io.out(json(res));
      return 0;
    }
    const steps = (res.steps ?? []) as { description: string; op: unknown; undo: unknown }[];
    if (!steps.length) ctx.io.out('nothing to do');
    const rows = steps.map((s, i) => [String(i + 1), s.description, s.undo ? JSON.stringify(plain(s.undo)) : '-']);
    if (rows.length) ctx.io.out(table(['STEP', 'DOES', 'UNDONE BY'], rows));
    return 0;
  },
};
