// Node-wide commands: status, gc, version, watch.
import { type Command, strs, str } from '../command.js';
import { CliError, Exit, usageError } from '../exit.js';
import { json, plain, table } from '../format.js';
import { packageVersion } from '../../api/version.js';

export const status: Command = {
  name: 'status',
  summary: 'node readiness, networks and address pools',
  usage: '',
  options: {},
  remote: true,
  async run(ctx) {
    const s = await ctx.client().call('NodeStatus', {});
    if (ctx.json) {
      ctx.io.out(json(s));
      return 0;
    }
    ctx.io.out(`node: ${s.ready ? 'ready' : `NOT READY${s.reason ? ` (${s.reason})` : ''}`}${s.message ? `: ${s.message}` : ''}`);
    ctx.io.out(`schedulable: ${s.schedulable ? 'yes' : 'no (an address pool is exhausted)'}; sandboxes: ${s.sandboxes}`);
    const rows: string[][] = [];
    for (const n of s.networks ?? []) {
      const pools = n.pools?.length ? n.pools : [{ subnet: '-', used: '-', size: '-', free: '-' }];
      for (const p of pools) rows.push([n.name, n.mode, n.ready ? 'yes' : 'no', p.subnet, `${p.used}/${p.size}`, String(p.free)]);
    }
    if (rows.length) ctx.io.out(table(['NETWORK', 'MODE', 'READY', 'POOL', 'USED', 'FREE'], rows));
    for (const n of s.networks ?? []) if (n.cni_status) ctx.io.out(`${n.name}: CNI STATUS: ${n.cni_status}`);
    if (s.network_policy) ctx.io.out(`network policy: view from ${s.network_policy.source} (${s.network_policy.state}${s.network_policy.detail ? `: ${s.network_policy.detail}` : ''})`);
    if (s.cluster) ctx.io.out(`cluster: node ${s.cluster.node}, nodes from ${s.cluster.source} (${s.cluster.state}${s.cluster.detail ? `: ${s.cluster.detail}` : ''})`);
    const peers: string[][] = [];
    for (const n of s.networks ?? []) {
      if (!n.cross_node) continue;
      ctx.io.out(`${n.name}: crossNode ${n.cross_node}, this node's subnets ${(n.node_subnets ?? []).join(', ') || '(none yet)'}`);
      for (const p of n.peers ?? []) peers.push([n.name, p.node, (p.subnets ?? []).join(', ') || '-', p.via || '-', p.in_place ? 'yes' : 'no', p.problem || '']);
    }
    if (peers.length) ctx.io.out(table(['NETWORK', 'PEER', 'SUBNETS', 'VIA', 'ROUTED', 'PROBLEM'], peers));
    return 0;
  },
};

export const gc: Command = {
  name: 'gc',
  summary: 'remove what no sandbox owns (default: keep every recorded sandbox)',
  usage: '[--valid SANDBOX_ID[:IFNAME]]...   (with --valid: CNI GC, every other sandbox is removed)',
  options: { valid: { type: 'string', multiple: true } },
  remote: true,
  async run(ctx) {
    const valid = strs(ctx, 'valid').map((v) => {
      const [sandbox_id, interface_name = ''] = v.split(':');
      if (!sandbox_id) throw usageError(`--valid ${v}: expected SANDBOX_ID[:IFNAME]`);
      return { sandbox_id, interface_name };
    });
    const res = await ctx.client().call('GarbageCollect', { valid_attachments: valid, keep_recorded: valid.length === 0 });
    if (ctx.json) ctx.io.out(json(res));
    else {
      ctx.io.out(res.removed.length ? `removed ${res.removed.length}: ${res.removed.join(', ')}` : 'nothing to remove');
      for (const e of res.errors) ctx.io.out(`error: ${e}`);
    }
    if (res.errors.length) throw new CliError(`gc finished with ${res.errors.length} error(s)`, Exit.failure);
    return 0;
  },
};

export const version: Command = {
  name: 'version',
  summary: 'client and daemon versions',
  usage: '',
  options: {},
  remote: true,
  async run(ctx) {
    const client = packageVersion();
    if (!ctx.json) ctx.io.out(`knit client ${client}`);
    const v = await ctx.client().call('Version', {});
    if (ctx.json) ctx.io.out(json({ client, daemon: v }));
    else {
      ctx.io.out(`knit daemon ${v.version} (${v.api_version}, KNI ${v.kni_version}, CNI ${v.supported_cni_versions.join('/')})`);
      ctx.io.out(`runtimes: ${v.runtimes.join(', ')}`);
    }
    return 0;
  },
};

export const watch: Command = {
  name: 'watch',
  summary: 'print sandbox and link events until interrupted',
  usage: '[--id SANDBOX_ID]',
  options: { id: { type: 'string' } },
  remote: true,
  async run(ctx) {
    const stop = new AbortController();
    const onSignal = () => stop.abort();
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    try {
      await ctx.client().stream(
        'Watch',
        { sandbox_id: str(ctx, 'id') ?? '' },
        (e) => {
          if (ctx.json) return ctx.io.out(JSON.stringify(plain(e)));
          if (e.sandbox) {
            const addrs = (e.sandbox.result?.ips ?? []).map((ip: { address: string }) => ip.address).join(', ');
            ctx.io.out(`${e.sandbox.type} ${e.sandbox.sandbox_id}${addrs ? ` ${addrs}` : ''}${e.sandbox.reason ? ` (${e.sandbox.reason})` : ''}`);
          } else if (e.link) {
            ctx.io.out(`link ${e.link.removed ? 'removed' : e.link.up ? 'up' : 'down'} ${e.link.name} (index ${e.link.index})${e.link.netns ? ` in ${e.link.netns}` : ''}`);
          } else if (e.address) {
            ctx.io.out(`address ${e.address.removed ? 'removed' : 'added'} ${e.address.address} (index ${e.address.index})${e.address.netns ? ` in ${e.address.netns}` : ''}`);
          }
        },
        stop.signal,
      );
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
    return 0;
  },
};
