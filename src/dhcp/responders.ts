// The responders of one daemon: a packet socket per guest tap (src/net/packet-taps.ts), each
// answering with its own lease (responder.ts), and an unsolicited RA to each IPv6 guest now
// and then, well inside the RA's router lifetime. State is only this map: the leases come
// from the records, so a restarted daemon arms the same responders again.
import { PacketTaps, type PacketEvent } from '../net/packet-taps.js';
import type { GuestLease } from './lease.js';
import { ROUTER_LIFETIME, respond, routerAdvertisement, type Outcome } from './responder.js';

export interface ResponderTarget {
  netns: string;
  tap: string;
  lease: GuestLease;
}

interface Armed extends ResponderTarget {
  id: number;
}

/** Re-advertise at a third of the lifetime (RFC 4861's MaxRtrAdvInterval is at most 0.75 of it). */
const RA_INTERVAL_MS = (ROUTER_LIFETIME / 3) * 1000;

export class GuestResponders {
  private readonly byKey = new Map<string, Armed>();
  private readonly byId = new Map<number, Armed>();
  private readonly sockets: PacketTaps;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly observe: (outcome: Outcome, target: ResponderTarget, frames: number) => void,
    private readonly warn: (what: string, target: ResponderTarget, err: Error) => void,
  ) {
    this.sockets = new PacketTaps((events) => this.onEvents(events));
    this.sockets.unref();
    this.timer = setInterval(() => this.advertiseAll(), RA_INTERVAL_MS).unref();
  }

  get size(): number {
    return this.byKey.size;
  }

  keys(): string[] {
    return [...this.byKey.keys()];
  }

  targets(): ResponderTarget[] {
    return [...this.byKey.values()];
  }

  /** Opens the socket (replacing one under the same key whose target changed). Throws the addon's error. */
  arm(key: string, target: ResponderTarget): void {
    const old = this.byKey.get(key);
    if (old && old.netns === target.netns && old.tap === target.tap && JSON.stringify(old.lease) === JSON.stringify(target.lease)) return;
    if (old) this.disarm(key);
    const { id } = this.sockets.open(target.netns, target.tap);
    const armed = { ...target, id };
    this.byKey.set(key, armed);
    this.byId.set(id, armed);
    // A guest already up (the daemon restarted under it) learns its router again at once.
    if (target.lease.v6) this.send(armed, [routerAdvertisement(target.lease)]);
  }

  disarm(key: string): void {
    const a = this.byKey.get(key);
    if (!a) return;
    this.sockets.close(a.id);
    this.byKey.delete(key);
    this.byId.delete(a.id);
  }

  close(): void {
    clearInterval(this.timer);
    this.sockets.shutdown();
    this.byKey.clear();
    this.byId.clear();
  }

  private onEvents(events: PacketEvent[]): void {
    for (const e of events) {
      const a = this.byId.get(e.id);
      if (!a) continue; // closed while the frame was on its way
      if ('overBudget' in e) {
        this.observe({ result: 'dropped', reason: 'over-budget' }, a, e.overBudget);
        continue;
      }
      if (!('frame' in e)) continue; // ENETDOWN and the like: the tap is down; the socket carries on
      const outcome: Outcome = e.wireLength > e.frame.length ? { result: 'dropped', reason: 'oversized' } : respond(a.lease, e.frame, e.partialChecksum);
      if (outcome.result === 'answered') this.send(a, outcome.frames);
      this.observe(outcome, a, 1);
    }
  }

  private send(a: Armed, frames: Buffer[]): void {
    for (const f of frames) {
      try {
        this.sockets.send(a.id, f);
      } catch (err) {
        this.warn('send', a, err as Error);
      }
    }
  }

  private advertiseAll(): void {
    for (const a of this.byKey.values()) if (a.lease.v6) this.send(a, [routerAdvertisement(a.lease)]);
  }
}
