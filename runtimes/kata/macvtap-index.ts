// The ifindex a Kata macvtap is made with. Its character device is /dev/tap<ifindex>, named
// host-wide after an index that is unique only inside one netns: two pods' macvtaps with the
// same index share the node name, the kernel makes the node for the first only, and opening it
// reaches that first pod's device (seen on Linux 6.18). Kata's Go runtime picks at random from
// 8192 up (hostLinkOffset in virtcontainers/network_linux.go); knit starts at a place of its own
// from the same range, derived from (sandbox, interface), and takes the first index whose node
// does not exist and that no attach in flight is taking.
import { createHash } from 'node:crypto';
import type { InterfaceInput, PrepareContext } from '../../src/base/strategy.js';
import { KnitError } from '../../src/base/errors.js';

/** Above any host's own ifindexes, as Kata's hostLinkOffset. */
export const MACVTAP_INDEX_BASE = 8192;
const RANGE = 0x10000;
const TRIES = 1024;

export interface PreparedMacvtap {
  macvtapIndex: number;
}

export const isPreparedMacvtap = (p: unknown): p is PreparedMacvtap => typeof (p as PreparedMacvtap)?.macvtapIndex === 'number';

export function pickMacvtapIndex(input: InterfaceInput, ctx: PrepareContext): PreparedMacvtap | undefined {
  if (!ctx.pathExists) return undefined; // nothing to ask: the kernel's pick, as before
  const start = createHash('sha256').update(`${input.sandboxId}\0${input.iface.name}`).digest().readUInt32BE(0) % RANGE;
  for (let k = 0; k < TRIES; k++) {
    const index = MACVTAP_INDEX_BASE + ((start + k) % RANGE);
    if (ctx.pathExists(`/dev/tap${index}`)) continue;
    // Held by anyone, this attach included (another of its interfaces took it), is taken.
    if (ctx.lock(`macvtap-ifindex:${index}`) === undefined) return { macvtapIndex: index };
  }
  throw new KnitError('UNAVAILABLE', `no free macvtap ifindex: /dev/tap${MACVTAP_INDEX_BASE}.. are taken ${TRIES} times in a row`);
}
