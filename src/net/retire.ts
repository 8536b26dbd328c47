// Making a device harmless at once, so Detach and rollback can answer before the kernel's slow
// delete: the reaper (src/core/reaper.ts) deletes everything in the reap group later, in bulk.
import { randomBytes } from 'node:crypto';
import type { Op } from '../base/ops.js';
import { reapGroup } from '../base/names.js';

/** A veth's host end made harmless under its own name: down, off its bridge, in the reap group,
 * in one request (a rename is a second one: the kernel renames before it applies flags, and
 * only a link that is down, and each waits for readers of the old state, ~0.25 ms a detach
 * here). The name stays taken until the reaper's delete; an attach that wants it back first
 * renames the parked device aside (link.add's reclaimParked), which costs nothing unless the
 * name is actually taken. Only for devices whose name a new create can reclaim: a tap is made
 * by TUNSETIFF, which has no such fallback, and keeps retireLink. */
export function parkLink(name: string): Op[] {
  return [{ op: 'link.set', link: name, up: false, master: null, group: reapGroup() }];
}

/** Actions that make a device harmless at once (down, off its bridge, renamed out of the
 * way, in the reap group); the reaper deletes it with others later. */
export function retireLink(name: string): Op[] {
  return [
    { op: 'link.set', link: name, up: false },
    { op: 'link.set', link: name, master: null, group: reapGroup(), name: `kx${randomBytes(5).toString('hex')}` },
  ];
}
