// A plan is the ordered list of kernel changes one attach makes, each with its inverse. It is
// plain data: the journal stores it before the first step runs, `knit plan` prints it, and
// recovery after a crash replays the inverses without the strategy that made it.
import { DEVICE_ACTION_OPS, type HostAction, type Op } from './ops.js';

export type { HostAction };

export type StepAction = Op | HostAction;

export interface Step {
  /** What this step does, for `knit plan` and for logs ("create veth kn0a1b… (host) - eth0
   * (sandbox)"). Plain ASCII, so the record is one-byte text without an escaping pass
   * (src/store/record-store.ts, oneByte). */
  description: string;
  /** Netns path the action runs in; absent = the host (the daemon's own netns). */
  netns?: string;
  do: StepAction;
  /** The inverse. Absent when the object dies with an earlier step's (an address on a veth). */
  undo?: StepAction;
  /** Detach's fast path: actions that make the object harmless now (down, into the reap
   * group) so Detach can answer before the kernel's slow delete; the reaper deletes it. */
  retire?: StepAction[];
  /** The retired device lives only in this step's netns (a VM's tap or bridge: no host peer
   * whose delete takes it along), so the reaper deletes the reap group there too. */
  reapInNetns?: true;
  /** The sandbox interface (request name) this step belongs to: what RemoveInterface takes
   * back. Absent in records written before interfaces could be hot-plugged. */
  iface?: string;
}

export const isHostAction = (a: StepAction): a is HostAction =>
  a.op === 'nft.apply' || a.op === 'nft.delete' || a.op === 'file.write' || a.op === 'file.remove' || a.op === 'cni.add' || a.op === 'cni.del' ||
  a.op === 'conntrack.flush' || a.op === 'localnet.restore' || a.op === 'policy.admit' || a.op === 'policy.release' || DEVICE_ACTION_OPS.has(a.op);

/** Marks an inverse as tolerant: inverses run after crashes and after a netns died, when the
 * object may already be gone; every action that can find nothing accepts ignoreMissing. */
export function tolerant<A extends StepAction>(a: A): A {
  const canTolerate = a.op.endsWith('.del') || a.op === 'link.set' || a.op === 'nft.delete' || a.op === 'file.remove' || a.op === 'cni.del' || a.op === 'localnet.restore' || a.op === 'policy.release';
  return canTolerate ? { ...a, ignoreMissing: true } : a;
}
