// The durable record of one sandbox: the request, the addresses it holds, the plan, and how
// far it got. Written (fsync'd) before the first kernel change and at each state change, it
// is the journal recovery works from, and the source IPAM is rebuilt from at start-up.
import type { Step } from '../base/plan.js';
import type { AttachRequest, AttachResult, AttachmentState } from '../base/types.js';
import type { Allocation } from '../base/strategy.js';
import type { InterfacePart } from '../base/strategy.js';

export interface NetnsIdentity { path: string; dev: number; ino: number }

export interface InterfaceAllocation {
  ifname: string;
  network: string;
  addresses: Allocation[];
  /** True for addresses the request asked for (not from the pool's cursor). */
  static: boolean;
}

/** The sandbox record format this knit writes and the newest it reads. Bump it when a change
 * would make an older knit misread a record; the store then refuses the older knit's start
 * over newer records (see OpenOptions.formatVersion) instead of half-reading them. */
export const SANDBOX_RECORD_VERSION = 1;

export interface SandboxRecord {
  version: typeof SANDBOX_RECORD_VERSION;
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
  return rec.result.interfaces.filter((i) => !i.sandbox).map((i) => i.name);
}
