// Start-up repair. The records are the journal: an 'attaching' record is a crash mid-attach
// (roll it back), a 'detaching' one a crash mid-detach (finish it), an 'attached' one holds
// its addresses; an 'attached' one with an interface change pending loses that interface. Afterwards nothing knit made is left without an owner.
import type { ActionRunner } from './executor.js';
import { undoSteps } from './executor.js';
import { reserveFromRecord } from './addresses.js';
import type { IpamPort, RecordStorePort } from './ports.js';
import type { SandboxRecord } from './record.js';
import { sweepLeakedDevices, sweepLeakedHostPortTables } from './gc.js';
import { parksIn, type Reaper } from './reaper.js';
import { repairPending } from './hotplug.js';

export interface RecoveryReport {
  rolledBack: string[];
  completedDetach: string[];
  kept: string[];
  /** sandbox/interface whose unfinished add was taken back or remove finished. */
  repairedInterfaces: string[];
  leakedDevices: string[];
  /** Host-port nft tables no record owns. */
  leakedTables: string[];
  errors: string[];
}

export async function recover(records: RecordStorePort<SandboxRecord>, ipam: IpamPort, runner: ActionRunner, reaper: Reaper): Promise<RecoveryReport> {
  const report: RecoveryReport = { rolledBack: [], completedDetach: [], kept: [], repairedInterfaces: [], leakedDevices: [], leakedTables: [], errors: [] };
  for (let rec of [...records.values()]) {
    // A crash after a detach, rollback or interface removal parked devices inside the netns
    // (renamed: the inverses below cannot find them by name) leaves them to the reaper's run at the end.
    if (rec.state !== 'attached' || rec.pending) reaper.kick(parksIn(rec.steps, rec.netns));
    if (rec.state === 'attached' && rec.pending) {
      // An AddInterface or RemoveInterface was cut short: both end with the interface gone.
      const repaired = await repairPending(rec, runner);
      if (repaired.record) {
        await records.put(rec.sandboxId, repaired.record);
        report.repairedInterfaces.push(`${rec.sandboxId}/${rec.pending.ifname}`);
        rec = repaired.record;
      } else report.errors.push(...repaired.errors.map((e) => `${rec.sandboxId}: ${e}`));
    }
    if (rec.state === 'attached') {
      try {
        reserveFromRecord(ipam, rec.sandboxId, rec.allocations);
        report.kept.push(rec.sandboxId);
      } catch (err) {
        report.errors.push(`${rec.sandboxId}: cannot re-reserve its addresses: ${(err as Error).message}`);
      }
      continue;
    }
    // Inverses are idempotent: undoing a step that never ran finds nothing and moves on.
    const errors = await undoSteps(rec.steps, rec.steps.length, runner, 'undo', rec.netns);
    if (errors.length) {
      report.errors.push(...errors.map((e) => `${rec.sandboxId}: ${e}`));
      // Keep the record, and its addresses with it: its devices may still carry them.
      try {
        reserveFromRecord(ipam, rec.sandboxId, rec.allocations);
      } catch (err) {
        report.errors.push(`${rec.sandboxId}: cannot re-reserve its addresses: ${(err as Error).message}`);
      }
      continue; // the next start, or a Detach, tries again
    }
    await records.remove(rec.sandboxId);
    (rec.state === 'attaching' ? report.rolledBack : report.completedDetach).push(rec.sandboxId);
  }
  report.leakedDevices = await sweepLeakedDevices(runner, records.values());
  report.leakedTables = await sweepLeakedHostPortTables(runner, records.values());
  await reaper.reapNow();
  return report;
}
