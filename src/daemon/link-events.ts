// Watch's link events: the host ends of attached sandboxes going up, down or away, from an
// rtnetlink monitor in the daemon's netns. Only devices a record owns are reported. One that
// vanishes also calls onOwnedLinkGone: its sandbox's netns may be gone (gone-netns-sweeps.ts).
import { Monitor, type LinkEvent } from '../net/monitor.js';
import { ownedHostDevices, type SandboxRecord } from '../core/record.js';
import type { SandboxManager } from '../core/manager.js';

export function publishLinkEvents(
  manager: SandboxManager,
  records: { values(): Iterable<SandboxRecord>; get(id: string): SandboxRecord | undefined },
  log: { warn(o: object, m: string): void },
  onOwnedLinkGone: () => void = () => undefined,
): () => void {
  // name -> sandbox id (and back), kept in step with attach/detach instead of scanning per event.
  const owners = new Map<string, string>();
  const devices = new Map<string, string[]>();
  const own = (sandboxId: string, names: string[]) => {
    devices.set(sandboxId, names);
    for (const n of names) owners.set(n, sandboxId);
  };
  for (const r of records.values()) own(r.sandboxId, ownedHostDevices(r));
  const unwatch = manager.watch((e) => {
    if (e.type === 'attach' && e.result) own(e.sandboxId, e.result.interfaces.filter((i) => !i.sandbox).map((i) => i.name));
    if (e.type === 'detach') {
      for (const n of devices.get(e.sandboxId) ?? []) owners.delete(n);
      devices.delete(e.sandboxId);
    }
  });
  let monitor: Monitor | undefined;
  try {
    monitor = new Monitor(undefined, ['link']);
    monitor.unref();
    monitor.on('link', (l: LinkEvent) => {
      const sandboxId = owners.get(l.name);
      if (!sandboxId) return;
      // A detach parks the host end under its own name and the reaper deletes it, possibly
      // before the detach is over: that is the detach, not a link that vanished under an
      // attached sandbox. (A burst of detaches would otherwise prompt a sweep per device.)
      if (l.removed && records.get(sandboxId)?.state !== 'attached') return;
      manager.publish({ type: 'link', sandboxId, name: l.name, index: l.index, up: l.up, removed: l.removed });
      if (l.removed) onOwnedLinkGone();
    });
    monitor.on('overrun', () => log.warn({}, 'link monitor overrun: some link events were lost'));
    // Without a listener an 'error' event would throw and take the daemon down with it.
    monitor.on('error', (err: Error) => log.warn({ err: err.message }, 'link monitor stopped; Watch gets no more link events'));
  } catch (err) {
    log.warn({ err: (err as Error).message }, 'no link events for Watch');
  }
  return () => {
    unwatch();
    monitor?.close();
  };
}
