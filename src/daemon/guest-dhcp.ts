// knit's DHCP/RA responders for KubeVirt guests (src/dhcp): one per tap whose hand-off says
// the guest learns its network by DHCP (delivery "dhcp"), armed from the records at start-up
// and on every attach or hot-plug, disarmed on detach or unplug. It runs in the daemon; the
// socket sits on the tap in the pod's netns. Its cost: README.md, "KubeVirt", "Guest addresses".
import { watch, type FSWatcher } from 'node:fs';
import path from 'node:path';
import { gatewayMac, podMac } from '../base/names.js';
import { hasDhcpServedTap, isDhcpServedTap, type TapHandoff } from '../base/handoff.js';
import type { NetworkSpec } from '../base/strategy.js';
import type { WatchEvent } from '../base/types.js';
import type { SandboxRecord } from '../core/record.js';
import { leaseFrom } from '../dhcp/lease.js';
import { GuestResponders, type ResponderTarget } from '../dhcp/responders.js';
import type { Outcome } from '../dhcp/responder.js';
import { MASQUERADE_GW_MAC } from '../../runtimes/kubevirt/masquerade.js';

export interface GuestDhcpDeps {
  records: { values(): Iterable<SandboxRecord>; get(id: string): SandboxRecord | undefined };
  watch(listener: (e: WatchEvent) => void): () => void;
  networks: () => Map<string, NetworkSpec>;
  defaultNetwork: () => string;
  observe: (outcome: Outcome, frames: number) => void;
  /** A served netns's file was removed (its namespace lives on while the socket does). */
  netnsFileGone: () => void;
  log: { warn(o: object, m: string): void; info(o: object, m: string): void };
}

/** The MAC the answers come from, and whether it is the guest's IPv6 router: the device that
 * really is the guest's gateway when knit knows it, else a stable MAC of the guest's own. */
function server(rec: SandboxRecord, h: TapHandoff, net: NetworkSpec | undefined, foreign: boolean): { mac: string; isRouter6: boolean } {
  if (h.model === 'masquerade') return { mac: MASQUERADE_GW_MAC, isRouter6: true };
  // On a pod interface another CNI made, knit does not know the network's router.
  if (foreign) return { mac: podMac(undefined, rec.sandboxId, `${h.guest.name}/dhcp`), isRouter6: false };
  const pinned = h.guest.neighbors.find((n) => h.guest.ips.some((ip) => ip.gateway === n.address));
  if (pinned) return { mac: pinned.mac, isRouter6: true };
  if (net?.mode === 'bridge') return { mac: gatewayMac(net.name, net.ipv4?.gateway), isRouter6: true };
  return { mac: podMac(undefined, rec.sandboxId, `${h.guest.name}/dhcp`), isRouter6: false };
}

function targets(rec: SandboxRecord, networks: Map<string, NetworkSpec>, defaultNetwork: string): Map<string, ResponderTarget> {
  const out = new Map<string, ResponderTarget>();
  if (rec.state !== 'attached') return out;
  for (const i of rec.result.interfaces) {
    const h = i.handoff;
    if (!isDhcpServedTap(h)) continue;
    const req = rec.request.interfaces.find((x) => x.name === h.guest.name);
    // A binding on a pod interface this sandbox's own (knit's eth0): that interface's network.
    const own = h.podInterface !== undefined ? rec.request.interfaces.find((x) => x.name === h.podInterface) : undefined;
    const net = networks.get((own ?? req)?.network || defaultNetwork);
    const foreign = req?.binding?.logicNetwork !== undefined && !own;
    const lease = leaseFrom(h.guest, { ...server(rec, h, net, foreign), ...(rec.request.podName ? { hostname: rec.request.podName } : {}) });
    out.set(`${rec.sandboxId}\0${h.name}`, { netns: h.netns!, tap: h.name, lease });
  }
  return out;
}

export function startGuestDhcp(deps: GuestDhcpDeps): { close(): void; size(): number } {
  const responders = new GuestResponders(
    (outcome, _target, frames) => deps.observe(outcome, frames),
    (what, t, err) => deps.log.warn({ netns: t.netns, tap: t.tap, err: err.message }, `DHCP responder: ${what} failed`),
  );
  /** Sandboxes with a responder wanted: any other's attach or detach has nothing to do here. */
  const serving = new Set<string>();
  const sync = (sandboxId: string) => {
    const rec = deps.records.get(sandboxId);
    const want = rec ? targets(rec, deps.networks(), deps.defaultNetwork()) : new Map<string, ResponderTarget>();
    const prefix = `${sandboxId}\0`;
    for (const key of responders.keys()) if (key.startsWith(prefix) && !want.has(key)) responders.disarm(key);
    if (want.size) serving.add(sandboxId);
    else serving.delete(sandboxId);
    for (const [key, t] of want) {
      try {
        responders.arm(key, t);
      } catch (err) {
        deps.log.warn({ sandboxId, netns: t.netns, tap: t.tap, err: (err as Error).message }, 'DHCP responder not armed: the guest gets no address from knit');
      }
    }
  };
  const watched = watchNetnsFiles(() => responders.targets().map((t) => t.netns), deps.netnsFileGone);
  const syncAndWatch = (sandboxId: string) => {
    sync(sandboxId);
    watched.update();
  };
  for (const rec of deps.records.values()) sync(rec.sandboxId);
  watched.update();
  if (responders.size) deps.log.info({ responders: responders.size }, 'DHCP responders armed from the records');
  const unwatch = deps.watch((e) => {
    // An attach whose answer hands off no served tap, or the detach of a sandbox served none,
    // changes nothing here: skipped without reading (parsing) its record, as most are.
    if (e.type === 'attach' && e.result && !serving.has(e.sandboxId) && !hasDhcpServedTap(e.result.interfaces)) return;
    if (e.type === 'detach' && !serving.has(e.sandboxId)) return;
    if (e.type === 'attach' || e.type === 'detach' || e.type === 'interface-added' || e.type === 'interface-removed') syncAndWatch(e.sandboxId);
  });
  return {
    size: () => responders.size,
    close() {
      unwatch();
      watched.close();
      responders.close();
    },
  };
}

/** A responder's socket keeps its pod's namespace alive, so a netns deleted behind knit's back
 * kills no link the link monitor could see. The directories of the served netns files are
 * watched instead (inotify, one watch per directory): a served file removed prompts a sweep,
 * which detaches the sandbox and so closes the socket. */
function watchNetnsFiles(served: () => string[], gone: () => void): { update(): void; close(): void } {
  const watchers = new Map<string, FSWatcher>();
  let files = new Set<string>();
  return {
    update() {
      files = new Set(served());
      const dirs = new Set([...files].map((f) => path.dirname(f)));
      for (const [dir, w] of watchers) {
        if (!dirs.has(dir)) {
          w.close();
          watchers.delete(dir);
        }
      }
      for (const dir of dirs) {
        if (watchers.has(dir)) continue;
        try {
          const w = watch(dir, { persistent: false }, (_event, name) => {
            if (name && files.has(path.join(dir, name.toString()))) gone();
          });
          w.on('error', () => watchers.delete(dir)); // the directory went: the timer sweep still runs
          watchers.set(dir, w);
        } catch {
          /* no such directory: the timer sweep still runs */
        }
      }
    },
    close() {
      for (const w of watchers.values()) w.close();
      watchers.clear();
    },
  };
}
