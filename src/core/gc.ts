// Garbage collection: everything knit holds that no live sandbox needs goes. `knit gc` and
// CNI GC name the valid attachments; every other sandbox is detached through its inverses, a
// kept sandbox's unnamed interfaces are removed, each CNI network gets a CNI GC, and knit's
// tagged devices and host-port tables that no record owns are retired (also at start-up, by
// recovery.ts). Objects without knit's tag are never touched. The retired devices are deleted
// later, in bulk, by reaper.ts.
import type { ActionRunner } from './executor.js';
import { parseAliasTag, reapGroup } from '../base/names.js';
import { tolerant } from '../base/plan.js';
import { retireLink } from '../net/retire.js';
import { gcNetwork } from '../cni-exec/network.js';
import { hostPortTablesOf } from './host-ports.js';
import { chainAttachments } from './cni-steps.js';
import { defaultRouteIndex } from './interface-plans.js';
import { ownedHostDevices, type SandboxRecord } from './record.js';
import type { ManagerDeps } from './ports.js';

/** An attachment the caller says is still in use: a whole sandbox, or one of its interfaces. */
export interface ValidAttachment { sandboxId: string; interface?: string }

export interface GcContext extends Pick<ManagerDeps, 'records' | 'networks' | 'runner' | 'reaper'> {
  detach(sandboxId: string): Promise<void>;
  removeInterface(sandboxId: string, name: string): Promise<void>;
}

export async function garbageCollect(ctx: GcContext, valid: ValidAttachment[]): Promise<{ removed: string[]; errors: string[] }> {
  const keep = new Set(valid.map((v) => v.sandboxId));
  const removed: string[] = [];
  const errors: string[] = [];
  for (const rec of [...ctx.records.values()]) {
    if (keep.has(rec.sandboxId)) {
      await collectInterfaces(ctx, rec, valid, removed, errors);
      continue;
    }
    try {
      await ctx.detach(rec.sandboxId);
      removed.push(`sandbox ${rec.sandboxId}`);
    } catch (err) {
      errors.push(`sandbox ${rec.sandboxId}: ${(err as Error).message}`);
    }
  }
  for (const net of ctx.networks().values()) {
    if (net.mode !== 'cni') continue;
    try {
      const gc = await gcNetwork(net, chainAttachments(ctx.records.values(), net.name));
      removed.push(...gc.deleted.map((a) => `CNI attachment ${a} of network ${net.name} (cached, held by no record)`));
      errors.push(...gc.errors.map((e) => `CNI GC of network ${net.name}: ${e}`));
    } catch (err) {
      errors.push(`CNI GC of network ${net.name}: ${(err as Error).message}`);
    }
  }
  try {
    const leaked = await sweepLeakedDevices(ctx.runner, ctx.records.values());
    removed.push(...leaked.map((name) => `device ${name} (tagged by knit, owned by no record)`));
    ctx.reaper.kick();
  } catch (err) {
    errors.push(`device sweep: ${(err as Error).message}`);
  }
  try {
    const tables = await sweepLeakedHostPortTables(ctx.runner, ctx.records.values());
    removed.push(...tables.map((t) => `nft table inet ${t} (host ports, owned by no record)`));
  } catch (err) {
    errors.push(`host-port table sweep: ${(err as Error).message}`);
  }
  return { removed, errors };
}

/** CNI GC names valid attachments by (sandbox, interface): a kept sandbox's interfaces that
 * no entry names go, unless an entry keeps the whole sandbox. The default-route interface
 * goes only with the sandbox. */
async function collectInterfaces(ctx: GcContext, rec: SandboxRecord, valid: ValidAttachment[], removed: string[], errors: string[]) {
  const mine = valid.filter((v) => v.sandboxId === rec.sandboxId);
  if (mine.some((v) => !v.interface) || rec.state !== 'attached' || !rec.parts) return;
  const named = new Set(mine.map((v) => v.interface));
  const dflt = rec.request.interfaces[defaultRouteIndex(rec.request.interfaces)].name;
  for (const ifc of rec.request.interfaces) {
    if (named.has(ifc.name)) continue;
    if (ifc.name === dflt) {
      errors.push(`sandbox ${rec.sandboxId} interface ${ifc.name}: kept, it carries the default route of a sandbox with valid interfaces`);
      continue;
    }
    try {
      await ctx.removeInterface(rec.sandboxId, ifc.name);
      removed.push(`sandbox ${rec.sandboxId} interface ${ifc.name}`);
    } catch (err) {
      errors.push(`sandbox ${rec.sandboxId} interface ${ifc.name}: ${(err as Error).message}`);
    }
  }
}

export async function sweepLeakedDevices(runner: ActionRunner, records: Iterable<SandboxRecord>): Promise<string[]> {
  const [{ links = [] }] = await runner.runOps(undefined, [{ op: 'link.list' }]);
  // Owners are read after the dump: an attach journals its devices before creating them, so a
  // device in the dump whose attach started meanwhile is already in the records.
  const owned = new Set<string>();
  for (const r of records) for (const name of ownedHostDevices(r)) owned.add(name);
  const leaked = links.filter((l) => {
    const tag = parseAliasTag(l.alias);
    return tag?.sandboxId !== undefined && !owned.has(l.name) && l.group !== reapGroup(); // retired ones wait for the reaper
  });
  // Tolerant: the reaper or a detach may remove one of them between the dump and this batch.
  if (leaked.length) await runner.runOps(undefined, leaked.flatMap((l) => retireLink(l.name).map(tolerant)));
  return leaked.map((l) => l.name);
}

/** Deletes this knit's host-port tables that no record owns (src/core/host-ports.ts). */
export async function sweepLeakedHostPortTables(runner: ActionRunner, records: Iterable<SandboxRecord>): Promise<string[]> {
  const tables = (await runner.hostPortTables?.()) ?? [];
  if (!tables.length) return [];
  // Owners are read after the listing, as for devices: an attach journals its table first.
  const owned = new Set([...records].flatMap(hostPortTablesOf));
  const leaked = tables.filter((t) => !owned.has(t));
  for (const table of leaked) await runner.runHostAction(undefined, tolerant({ op: 'nft.delete', family: 'inet', table }));
  return leaked;
}
