// Making a device harmless at once, so Detach and rollback can answer before the kernel's slow
// delete: the reaper (src/core/reaper.ts) deletes everything in the reap group later, in bulk.
import { randomBytes } from 'node:crypto';
import type { Op } from '../base/ops.js';
import { reapGroup } from '../base/names.js';

/** Actions that make a device harmless at once (down, off its bridge, renamed out of the
 * way, in the reap group); the reaper deletes it with others later. */
export function retireLink(name: string): Op[] {
  return [
    { op: 'link.set', link: name, up: false },
    { op: 'link.set', link: name, master: null, group: reapGroup(), name: `kx${randomBytes(5).toString('hex')}` },
  ];
}
