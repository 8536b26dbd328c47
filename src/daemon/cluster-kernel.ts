// The cluster controller's hands (src/daemon/cluster.ts): what it reads of the node's kernel and
// the few changes it makes outside the reconciled routes and entries: the VTEPs, the forwarding
// switches, the masquerade table. Every change goes through the daemon's action runner.
import type { Logger } from 'pino';
import type { DaemonActionRunner } from './action-runner.js';
import type { AddrInfo, FdbInfo, LinkInfo, NeighInfo, Op } from '../base/ops.js';
import { networkAliasTag, vtepAliasTag } from '../base/names.js';
import type { WantVtep } from '../cluster/plan.js';
import type { KernelView } from '../cluster/reconcile.js';

export class ClusterKernel {
  /** The ruleset this process last applied; null: none yet (the first pass always applies). */
  private lastRuleset: string | undefined | null = null;

  constructor(private readonly runner: DaemonActionRunner, private readonly log: Logger) {}

  /** Links, addresses, both route tables, and the neighbour and FDB entries of these VTEPs. */
  async read(vteps: string[]): Promise<KernelView & { addrs: AddrInfo[] }> {
    const [{ links }, { addrs }, { routes: r4 }, { routes: r6 }] = await this.runner.runOps(undefined, [
      { op: 'link.list' }, { op: 'addr.list' }, { op: 'route.list', family: 4 }, { op: 'route.list', family: 6 },
    ] as const);
    const neighs = new Map<string, NeighInfo[]>();
    const fdb = new Map<string, FdbInfo[]>();
    for (const name of vteps) {
      if (!links.some((l) => l.name === name)) continue;
      const [{ neighs: n }, { fdb: f }] = await this.runner.runOps(undefined, [{ op: 'neigh.list', link: name }, { op: 'fdb.list', link: name }] as const);
      neighs.set(name, n);
      fdb.set(name, f);
    }
    return { links, addrs, routes: [...r4, ...r6], neighs, fdb };
  }

  /** The VTEP: made once, tagged, its MAC from the node name; a device of that name knit did
   * not make is left alone and reported. One whose VNI, port, local address or underlay no
   * longer matches (a config reload, the node's address moved) is made again: the kernel
   * changes none of them on a live VXLAN device. True when it was made or changed. */
  async ensureVtep(v: WantVtep, kernel: KernelView & { addrs: AddrInfo[] }): Promise<boolean> {
    const tag = vtepAliasTag(v.network);
    let have = kernel.links.find((l) => l.name === v.name);
    if (have && have.alias !== tag) throw new Error(`a link named ${v.name} exists and knit did not create it (alias "${have.alias ?? ''}"); knit will not use it as network ${v.network}'s VTEP`);
    const ops: Op[] = [];
    const drift = have ? vtepDrift(have, v, kernel.links) : [];
    if (drift.length) {
      this.log.info({ vtep: v.name, network: v.network, changed: drift }, 'the VTEP no longer matches its network; making it again');
      ops.push({ op: 'link.del', link: v.name, ignoreMissing: true });
      have = undefined;
    }
    if (!have) {
      ops.push({ op: 'link.add', kind: 'vxlan', name: v.name, vni: v.vni, port: v.port, local: v.local, dev: v.dev, learning: false, mac: v.mac, mtu: v.mtu, alias: tag, up: true });
    } else if (have.mac !== v.mac || have.mtu !== v.mtu || !have.up) {
      ops.push({ op: 'link.set', link: v.name, mac: v.mac, mtu: v.mtu, up: true });
    }
    if (v.address && !(have && kernel.addrs.some((a) => a.index === have.index && `${a.address}/${a.prefixLen}` === v.address))) {
      ops.push({ op: 'addr.add', link: v.name, address: v.address });
    }
    if (!ops.length) return false;
    await this.runner.runOps(undefined, ops);
    return true;
  }

  /** VTEPs of this knit whose network no longer spans the cluster (a config reload). */
  async removeVtepsExcept(keep: string[], kernel: KernelView): Promise<void> {
    const prefix = networkAliasTag('');
    const stale = kernel.links.filter((l) => l.alias?.startsWith(prefix) && l.alias.endsWith(';if=vtep') && !keep.includes(l.name));
    if (!stale.length) return;
    this.log.info({ vteps: stale.map((l) => l.name) }, 'removing the VTEPs of networks that no longer use vxlan');
    await this.runner.runOps(undefined, stale.map((l) => ({ op: 'link.del' as const, link: l.name, ignoreMissing: true })));
  }

  /** In one batch; should one change fail, each is tried alone so the others still land. */
  async apply(ops: Op[]): Promise<void> {
    try {
      await this.runner.runOps(undefined, ops);
    } catch {
      for (const op of ops) {
        await this.runner.runOps(undefined, [op]).catch((err: Error) => this.log.warn({ op, err: err.message }, 'cluster route change failed'));
      }
    }
  }

  /** Sets each sysctl key to 1 where it is not (forwarding switches). */
  async switchOn(keys: string[]): Promise<void> {
    if (!keys.length) return;
    const values = await this.runner.runOps(undefined, keys.map((key) => ({ op: 'sysctl.get' as const, key })));
    const off = keys.filter((_, i) => (values[i] as { value?: string }).value?.trim() !== '1');
    if (off.length) await this.runner.runOps(undefined, off.map((key) => ({ op: 'sysctl.set' as const, key, value: '1' })));
  }

  /** knit's masquerade table: rewritten whole (nft -f) when its content changes, deleted when
   * no network masquerades. */
  async masquerade(table: string, ruleset: string | undefined): Promise<void> {
    if (ruleset === this.lastRuleset) return;
    if (ruleset) await this.runner.runHostAction(undefined, { op: 'nft.apply', family: 'inet', table, ruleset });
    else await this.runner.runHostAction(undefined, { op: 'nft.delete', family: 'inet', table, ignoreMissing: true });
    this.lastRuleset = ruleset;
  }
}

/** What of a VTEP's VXLAN settings differs from the wanted ones ("vni 1 → 2", …); empty: none. */
export function vtepDrift(have: LinkInfo, want: WantVtep, links: LinkInfo[]): string[] {
  const x = have.vxlan;
  if (!x) return [];
  const dev = links.find((l) => l.index === x.dev)?.name ?? (x.dev === undefined ? 'none' : `ifindex ${x.dev}`);
  const pairs: [string, unknown, unknown][] = [['vni', x.vni, want.vni], ['port', x.port, want.port], ['local', x.local ?? 'none', want.local], ['dev', dev, want.dev]];
  return pairs.filter(([, a, b]) => a !== b).map(([k, a, b]) => `${k} ${a} → ${b}`);
}
