// The DHCP responders (guest-dhcp.ts, src/dhcp) load only once a sandbox needs one: a KubeVirt
// tap whose guest takes its addresses by DHCP, found in the records at start-up or in an attach
// or hot-plug answer. A node with no such VM never loads them (their code is ~2 MiB of a daemon
// that must stay small: bench/README.md, "Memory").
import { hasDhcpServedTap } from '../base/handoff.js';
import type { WatchEvent } from '../base/types.js';
import type { SandboxRecord } from '../core/record.js';
import type { GuestDhcpDeps } from './guest-dhcp.js';

type Responders = { close(): void; size(): number };

const needsResponder = (rec: SandboxRecord | undefined) => rec?.state === 'attached' && hasDhcpServedTap(rec.result.interfaces);

export function startGuestDhcpWhenNeeded(deps: GuestDhcpDeps): Responders {
  let started: Responders | undefined;
  let starting: Promise<void> | undefined;
  let closed = false;
  const start = () => {
    starting ??= import('./guest-dhcp.js').then(({ startGuestDhcp }) => {
      // It arms every record's responders itself, the one that prompted it included.
      if (!closed) started = startGuestDhcp(deps);
    }, (err: Error) => deps.log.warn({ err: err.message }, 'DHCP responders could not be loaded: guests get no address from knit'));
  };
  const wanted = (e: WatchEvent) => {
    if (e.type === 'attach' || e.type === 'interface-added') {
      return e.result ? hasDhcpServedTap(e.result.interfaces) : needsResponder(deps.records.get(e.sandboxId));
    }
    return false;
  };
  let unwatch: (() => void) | undefined;
  if ([...deps.records.values()].some(needsResponder)) start();
  else {
    unwatch = deps.watch((e) => {
      if (starting || !wanted(e)) return;
      unwatch?.();
      start();
    });
  }
  return {
    size: () => started?.size() ?? 0,
    close() {
      closed = true;
      unwatch?.();
      started?.close();
    },
  };
}
