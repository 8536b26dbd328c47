// Detach honesty: a detach may answer before the kernel has deleted the devices (knit parks
// them for its reaper). This clocks, from the start of the detach call, the moment the
// sandbox netns holds nothing but lo again: every contender's pod-side devices live there, and
// a veth's host end dies with its pod end, so that is when the devices are gone from the kernel.
// The observer is a plain RTM_GETLINK dump in the netns (the addon's handle, on this thread).
import { NetHandle } from '../../src/net/handle.js';
import { nowMs } from './stats.js';

/** Gives up after this long: the sample is left out and the detach counted as not gone. */
const LIMIT_MS = 5000;

export async function goneAfter(netnsPath: string, detachStartedMs: number): Promise<number | undefined> {
  const h = NetHandle.open(netnsPath);
  try {
    for (;;) {
      const [{ links }] = h.runSync([{ op: 'link.list' }] as const);
      const now = nowMs();
      if (links.every((l) => l.name === 'lo')) return now - detachStartedMs;
      if (now - detachStartedMs > LIMIT_MS) return undefined;
      await new Promise((r) => setTimeout(r, 1));
    }
  } finally {
    h.close();
  }
}
