// Link and address changes in one network namespace, as typed events.
//
//   const m = new Monitor('/run/netns/pod1', ['link', 'ipv4-addr']);
//   m.on('link', (e) => { if (e.name === 'eth0' && e.operstate === 'UP') ... });
//   ...
//   m.close();
//
// The addon reads the namespace's rtnetlink groups on its own thread and hands batches to
// the JS thread. An open monitor keeps the process alive (like a socket) unless unref()'d;
// close() stops the thread and closes the socket, and no event is emitted after it.
import { EventEmitter } from 'node:events';
import { native } from './native.js';

export type MonitorGroup = 'link' | 'ipv4-addr' | 'ipv6-addr';

/** RFC 2863 operational state, as `ip -j link` prints it. */
export type Operstate = 'UNKNOWN' | 'NOTPRESENT' | 'DOWN' | 'LOWERLAYERDOWN' | 'TESTING' | 'DORMANT' | 'UP';

export interface LinkEvent {
  type: 'link';
  index: number;
  name: string;
  /** Administratively up (IFF_UP). */
  up: boolean;
  /** Carrier (IFF_LOWER_UP). */
  lowerUp: boolean;
  operstate: Operstate;
  /** RTM_DELLINK: the link is gone from this netns (deleted or moved away). */
  removed: boolean;
  /** IFLA_INFO_KIND ("veth", "bridge", "tun", ...); absent for kind-less devices (lo, physical). */
  kind?: string;
}

export interface AddressEvent {
  type: 'address';
  index: number;
  family: 4 | 6;
  address: string;
  prefixLen: number;
  removed: boolean;
}

/** The kernel dropped events (the socket buffer overflowed): resynchronise by listing. */
export interface OverrunEvent {
  type: 'overrun';
}

export type NetEvent = LinkEvent | AddressEvent | OverrunEvent;

export interface MonitorOptions {
  /** Kernel receive buffer (default 4 MiB). Small values make overruns likely. */
  receiveBufferBytes?: number;
}

interface MonitorEvents {
  event: [NetEvent];
  link: [LinkEvent];
  address: [AddressEvent];
  overrun: [OverrunEvent];
  /** The socket failed for good (not an overrun); the monitor has stopped reading. */
  error: [Error];
}

type RawEvent = NetEvent | { type: 'error'; code: string; errno: number };

interface NativeMonitor {
  close(): void;
  ref(): void;
  unref(): void;
  pause(): void;
  resume(): void;
}

export class Monitor extends EventEmitter<MonitorEvents> {
  readonly #native: NativeMonitor;
  #closed = false;

  /**
   * Subscribes to groups in the netns at netnsPath (undefined: the daemon's own netns).
   * Events that happen after the constructor returns are delivered. Throws if the path is
   * not a network namespace or a group name is unknown.
   */
  constructor(readonly netnsPath: string | undefined, readonly groups: readonly MonitorGroup[], opts: MonitorOptions = {}) {
    super();
    this.#native = new native.Monitor(netnsPath, [...groups], (batch: RawEvent[]) => this.#deliver(batch), opts);
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Stops reading and releases the thread and socket. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#native.close();
  }

  /** Keep the process alive while open (the default). */
  ref(): this {
    this.#native.ref();
    return this;
  }

  /** Let the process exit even though this monitor is open. */
  unref(): this {
    this.#native.unref();
    return this;
  }

  /** Stop reading; the kernel queues events until its buffer fills, then an overrun follows. */
  pause(): this {
    this.#native.pause();
    return this;
  }

  resume(): this {
    this.#native.resume();
    return this;
  }

  /**
   * Resolves with the first event (from now on) that matches, rejects after timeoutMs.
   * For waiting on a state ("eth0 has carrier"), check the current state first: an event
   * that happened before this call is not seen.
   */
  waitFor<E extends NetEvent>(match: (e: NetEvent) => e is E, timeoutMs: number): Promise<E>;
  waitFor(match: (e: NetEvent) => boolean, timeoutMs: number): Promise<NetEvent>;
  waitFor(match: (e: NetEvent) => boolean, timeoutMs: number): Promise<NetEvent> {
    return new Promise((resolve, reject) => {
      const onEvent = (e: NetEvent): void => {
        if (!match(e)) return;
        clearTimeout(timer);
        this.off('event', onEvent);
        resolve(e);
      };
      const timer = setTimeout(() => {
        this.off('event', onEvent);
        reject(new Error(`monitor${this.netnsPath ? ' of ' + this.netnsPath : ''}: no matching event within ${timeoutMs} ms`));
      }, timeoutMs);
      this.on('event', onEvent);
    });
  }

  #deliver(batch: RawEvent[]): void {
    for (const e of batch) {
      if (this.#closed) return; // batches already queued when close() ran
      if (e.type === 'error') {
        const err = Object.assign(new Error(`monitor${this.netnsPath ? ' of ' + this.netnsPath : ''}: socket failed: ${e.code}`), {
          code: e.code,
          errno: e.errno,
        });
        this.emit('error', err);
        continue;
      }
      this.emit('event', e);
      if (e.type === 'link') this.emit('link', e);
      else if (e.type === 'address') this.emit('address', e);
      else this.emit('overrun', e);
    }
  }
}
