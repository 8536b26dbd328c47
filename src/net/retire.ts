// Making a device harmless at once, so Detach and rollback can answer before the kernel's slow
// delete: the reaper (src/core/reaper.ts) deletes everything in the reap group later, in bulk.
import { randomBytes } from 'node:crypto';
import type { Op } from '../base/ops.js';
import { reapGroup } from '../base/names.js';

/** A veth's host end made harmless under its own name: down and in the reap group, in one
 * request. Down is enough: a bridge port that is down is disabled (it forwards nothing and the
 * bridge forgets its FDB entries), and the pod end loses carrier. It stays a port until the
 * reaper's delete takes it off the bridge: leaving the bridge now costs the kernel an RCU grace
 * period of its own (the bridge unhooks its receive handler), three times the whole request's
 * cost without it (docs/peer-retire.md). A rename would be a second request with a wait of its
 * own; the name stays taken until the reaper's delete, and an attach that wants it back first
 * renames the parked device aside (link.add's reclaimParked), which costs nothing unless the
 * name is actually taken. Only for devices whose name a new create can reclaim: a tap is made
 * by TUNSETIFF, which has no such fallback, and keeps retireLink. */
export function parkLink(name: string): Op[] {
  return [{ op: 'link.set', link: name, up: false, group: reapGroup() }];
}

/** A device made harmless at once and its name freed: down, then into the reap group and
 * renamed out of the way (the kernel renames only a device that is down, and applies a rename
 * before the flags of the same request, hence two requests). For taps and the other devices
 * whose create cannot reclaim a parked name (parkLink). Like parkLink it leaves a bridge port on
 * its bridge: down, the port is disabled, and the reaper's delete takes it off. */
export function retireLink(name: string): Op[] {
  return [
    { op: 'link.set', link: name, up: false },
    { op: 'link.set', link: name, group: reapGroup(), name: `kx${randomBytes(5).toString('hex')}` },
  ];
}
