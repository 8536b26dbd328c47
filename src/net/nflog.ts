// The packets nftables' `log group N` rules hand to userspace (native/src/nflog.h), read on
// the addon's own thread and delivered in batches on the JS thread.
//
//   const r = new NflogReader(undefined, 100, 128, (events) => ...);
//   ...
//   r.close();
//
// One reader per group and netns: the kernel gives a group to one socket (a second bind is
// refused). An open reader keeps the process alive unless unref()'d.
import { native } from './native.js';

export interface NflogPacket {
  type: 'packet';
  /** The packet's IP family. */
  family: 4 | 6;
  /** The netfilter hook the logging rule ran in (NF_INET_FORWARD = 2, ...). */
  hook: number;
  /** The rule's `log prefix`. */
  prefix: string;
  /** ifindexes, 0 when the packet had none; phys*: the bridge ports of a bridged packet. */
  indev: number;
  outdev: number;
  physindev: number;
  physoutdev: number;
  /** Epoch milliseconds: the packet's timestamp, else when the addon received it. */
  timeMs: number;
  /** The packet from its IP header on, cut at the copy range. */
  payload: Buffer;
}

/** The kernel dropped log messages (the socket's buffer was full). */
export interface NflogOverrun {
  type: 'overrun';
}

/** The socket failed for good; the reader has stopped. */
export interface NflogError {
  type: 'error';
  code: string;
  errno: number;
}

export type NflogEvent = NflogPacket | NflogOverrun | NflogError;

export class NflogReader {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly #native: any;

  /** Binds `group` in the netns at netnsPath (undefined: the daemon's own), asking for the
   * first `copyRange` bytes of each packet. Throws the addon's error: EPERM when another
   * socket of that netns holds the group. */
  constructor(netnsPath: string | undefined, group: number, copyRange: number, onEvents: (events: NflogEvent[]) => void) {
    this.#native = new native.NflogReader(netnsPath, group, copyRange, onEvents);
  }

  unref(): void {
    this.#native.unref();
  }

  /** Stops the thread and closes the socket (the group is free again); no event after it. */
  close(): void {
    this.#native.close();
  }
}
