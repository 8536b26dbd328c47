// Per-sandbox commands: detach, detach-if, query, check, list.
import { type Command, type Context, str } from '../command.js';
import { CliError, Exit, usageError } from '../exit.js';
import { json, table } from '../format.js';
import { lower, podOf, renderResult, sandboxAddresses } from '../render.js';

function sandboxIdArg(ctx: Context): string {
  const id = str(ctx, 'id') ?? ctx.positionals[0];
  if (!id) throw usageError('a sandbox id is required (knit <command> SANDBOX_ID, or --id)');
  if (ctx.positionals.length > (str(ctx, 'id') ? 0 : 1)) throw usageError(`unexpected argument "${ctx.positionals.at(-1)}"`);
  return id;
}

export const detach: Command = {
  name: 'detach',
  summary: 'detach a sandbox (idempotent)',
  usage: 'SANDBOX_ID [--netns PATH]',
  options: { id: { type: 'string' }, netns: { type: 'string' } },
  remote: true,
  async run(ctx) {
    const id = sandboxIdArg(ctx);
    await ctx.client().call('Detach', { sandbox_id: id, netns_path: str(ctx, 'netns') ?? '' });
    ctx.io.out(ctx.json ? json({ sandbox_id: id, detached: true }) : `detached ${id}`);
    return 0;
  },
};

export const detachIf: Command = {
  name: 'detach-if',
  summary: 'remove one interface from an attached sandbox (idempotent)',
  usage: 'SANDBOX_ID IFNAME (or --id SANDBOX_ID --name IFNAME)',
  options: { id: { type: 'string' }, name: { type: 'string' } },
  remote: true,
  async run(ctx) {
    const [id, name] = [str(ctx, 'id') ?? ctx.positionals[0], str(ctx, 'name') ?? ctx.positionals[str(ctx, 'id') ? 0 : 1]];
    if (!id || !name) throw usageError('a sandbox id and an interface name are required (knit detach-if SANDBOX_ID IFNAME)');
    await ctx.client().call('RemoveInterface', { sandbox_id: id, name });
    ctx.io.out(ctx.json ? json({ sandbox_id: id, name, removed: true }) : `removed ${name} from ${id}`);
    return 0;
  },
};

export const query: Command = {
  name: 'query',
  summary: "show a sandbox's record, result and live state",
  usage: 'SANDBOX_ID',
  options: { id: { type: 'string' } },
  remote: true,
  async run(ctx) {
    const res = await ctx.client().call('Query', { sandbox_id: sandboxIdArg(ctx) });
    if (ctx.json) {
      ctx.io.out(json(res));
      return 0;
    }
    const { request: req, result, state, created_at } = res.sandbox;
    ctx.io.out(
      `sandbox ${req.sandbox_id}: ${lower(state)} (${lower(req.runtime)}), pod ${podOf(req)}, netns ${req.netns_path}, since ${created_at}`,
    );
    if (result) ctx.io.out(renderResult(result));
    if (res.pod_ips?.length) ctx.io.out(`pod ips: ${res.pod_ips.join(', ')}`);
    ctx.io.out(res.live.ok ? 'live: matches the record' : `live: ${res.live.differences.length} difference(s)`);
    for (const d of res.live.differences ?? []) ctx.io.out(`  - ${d}`);
    return 0;
  },
};

export const check: Command = {
  name: 'check',
  summary: 'compare a sandbox (or, with --node, the cross-node routes) with the kernel; exit 5 if they differ',
  usage: 'SANDBOX_ID | --node',
  options: { id: { type: 'string' }, node: { type: 'boolean' } },
  remote: true,
  async run(ctx) {
    if (ctx.values.node) {
      const s = await ctx.client().call('NodeStatus', { check_node: true });
      const diffs: string[] = s.cluster_differences ?? [];
      if (ctx.json) ctx.io.out(json({ ok: diffs.length === 0, differences: diffs }));
      else if (!diffs.length) ctx.io.out('node: the kernel matches the node list');
      else for (const d of diffs) ctx.io.out(`- ${d}`);
      if (diffs.length) throw new CliError(`the node's cluster routes differ from the node list (${diffs.length} difference(s))`, Exit.failure);
      return 0;
    }
    const id = sandboxIdArg(ctx);
    const res = await ctx.client().call('Check', { sandbox_id: id });
    if (ctx.json) ctx.io.out(json(res));
    else if (res.ok) ctx.io.out(`${id}: ok`);
    else for (const d of res.differences) ctx.io.out(`- ${d}`);
    if (!res.ok) throw new CliError(`sandbox ${id} differs from its record (${res.differences.length} difference(s))`, Exit.failure);
    return 0;
  },
};

export const list: Command = {
  name: 'list',
  summary: 'list recorded sandboxes',
  usage: '',
  options: {},
  remote: true,
  async run(ctx) {
    if (ctx.positionals.length) throw usageError(`unexpected argument "${ctx.positionals[0]}"`);
    const res = await ctx.client().call('List', {});
    if (ctx.json) {
      ctx.io.out(json(res.sandboxes));
      return 0;
    }
    const rows = (res.sandboxes ?? []).map((s: any) => [
      s.request.sandbox_id,
      podOf(s.request),
      lower(s.request.runtime),
      lower(s.state),
      s.request.netns_path,
      sandboxAddresses(s.result).join(', ') || '-',
    ]);
    ctx.io.out(rows.length ? table(['SANDBOX', 'POD', 'RUNTIME', 'STATE', 'NETNS', 'ADDRESSES'], rows) : 'no sandboxes');
    return 0;
  },
};
