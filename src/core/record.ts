// The durable record of one sandbox: the request, the addresses it holds, the plan, and how
// far it got. Written (fsync'd) before the first kernel change and at each state change, it
// is the journal recovery works from, and the source IPAM is rebuilt from at start-up.
import type { Step } from '../base/plan.js';
import type { AttachRequest, AttachResult, AttachmentState } from '../base/types.js';
import type { Allocation } from '../base/strategy.js';
import type { InterfacePart } from '../base/strategy.js';

/** id: the kernel's never-reused namespace id, where the kernel has one (src/net/netns.ts). */
export interface NetnsIdentity { path: string; dev: number; ino: number; id?: string }

export interface InterfaceAllocation {
  ifname: string;
  network: string;
  addresses: Allocation[];
  /** True for addresses the request asked for (not from the pool's cursor). */
  static: boolean;
}

/** The newest sandbox record format this knit reads and writes. Bump it when a change would
 * make an older knit misread a record; the store then refuses the older knit's start over
 * newer records (see OpenOptions.formatVersion) instead of half-reading them.
 * 2: a plan may hold host-port actions (conntrack.flush, localnet.restore) that a knit of
 * format 1 cannot run.
 * 3: a plan may hold bandwidth steps (a tbf qdisc, an ifb link) that a knit of format 2 cannot
 * run.
 * 4: a plan may hold NetworkPolicy steps (policy.admit, policy.release) that a knit of format 3
 * cannot run.
 * (A pod end made under a name of its own and a link.evict need no new format: they are attach
 * steps without inverses, and an older knit undoes and retires such a plan correctly.) */
export const SANDBOX_RECORD_VERSION = 4;

export type RecordVersion = 1 | 2 | 3 | 4;

function versionOf(a: Step['do'] | undefined): RecordVersion {
  if (a?.op === 'conntrack.flush' || a?.op === 'localnet.restore') return 2;
  if ((a?.op === 'qdisc.add' || a?.op === 'qdisc.del') && a.kind === 'tbf') return 3;
  if (a?.op === 'link.add' && a.kind === 'ifb') return 3;
  if (a?.op === 'policy.admit' || a?.op === 'policy.release') return 4;
  return 1;
}

/** The oldest format that can hold these steps: a record without host ports or bandwidth
 * limits stays 1, so a downgrade is refused only while sandboxes that need the newer format
 * are attached. */
export function recordVersionFor(steps: Step[]): RecordVersion {
  let v: RecordVersion = 1;
  for (const s of steps) for (const a of [s.do, s.undo, ...(s.retire ?? [])]) v = Math.max(v, versionOf(a)) as RecordVersion;
  return v;
}

export interface SandboxRecord {
  version: RecordVersion;
  sandboxId: string;
  state: Exclude<AttachmentState, 'failed'>;
  request: AttachRequest;
  netns: NetnsIdentity;
  allocations: InterfaceAllocation[];
  steps: Step[];
  /** The answer Attach gives (also for an idempotent repeat). */
  result: AttachResult;
  /** Each interface's share of the result, in request order; `result` is composed from them.
   * Absent in records written before interfaces could be hot-plugged. */
  parts?: InterfacePart[];
  /** An AddInterface or RemoveInterface under way: written before its first kernel change, so
   * the next start finishes a remove or takes back an add (src/core/hotplug.ts). */
  pending?: { op: 'add' | 'remove'; ifname: string };
  /** Interfaces AddInterface added (a repeated Attach is compared without them). */
  added?: string[];
  createdAt: string;
  updatedAt: string;
}

export const ipamOwner = (sandboxId: string, ifname: string) => `${sandboxId}/${ifname}`;

/** Host-side device names a record owns, for GC's "is this tagged device still someone's". */
export function ownedHostDevices(rec: SandboxRecord): string[] {
  // Devices the plan creates on the host but does not answer with (an ifb for a bandwidth limit).
  const made = rec.steps.flatMap((s) => (!s.netns && s.do.op === 'link.add' ? [s.do.name] : []));
  return [...new Set([...rec.result.interfaces.filter((i) => !i.sandbox).map((i) => i.name), ...made])];
}
