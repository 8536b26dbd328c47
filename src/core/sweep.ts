// Finds knit's devices that no record owns (a record lost with a crashed disk, a device left
// by a bug) by their alias tag, and retires them. Objects without knit's tag are never touched.
import type { ActionRunner } from './executor.js';
import { parseAliasTag, reapGroup } from '../base/names.js';
import { hostPortTablesOf } from './host-ports.js';
import { tolerant } from '../base/plan.js';
import { ownedHostDevices, type SandboxRecord } from './record.js';
import { retireLink } from '../net/retire.js';

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
