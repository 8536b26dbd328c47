// ARP frames a test plays the guest with on a tap (test/fixtures/tap-peer.ts), and what it looks
// for among the frames that come back (RFC 826: Ethernet header, then htype, ptype, hlen, plen,
// op, sender MAC and IP, target MAC and IP).
import type { TapPeer } from '../fixtures/tap-peer.js';

/** An ARP request from the guest's MAC for `target` (RFC 826), as a guest's kernel sends it. */
export function arpRequest(mac: string, sender: string, target: string): Buffer {
  const m = Buffer.from(mac.split(':').map((x) => parseInt(x, 16)));
  const ip4 = (a: string) => Buffer.from(a.split('.').map(Number));
  return Buffer.concat([
    Buffer.alloc(6, 0xff), m, Buffer.from([0x08, 0x06]),
    Buffer.from([0, 1, 0x08, 0x00, 6, 4, 0, 1]), m, ip4(sender), Buffer.alloc(6), ip4(target),
  ]);
}

/** The ARP reply among frames whose sender IP is ip4. */
export const arpReplyFrom = (frames: Buffer[], ip4: string) => frames.find((f) => f.readUInt16BE(12) === 0x0806 && f.readUInt16BE(20) === 2 && [...f.subarray(28, 32)].join('.') === ip4);

/** An ARP request for `target` from `sender`: the first thing a pod's ping to target sends. */
export const arpRequestFor = (frames: Buffer[], sender: string, target: string) =>
  frames.find((f) => f.readUInt16BE(12) === 0x0806 && f.readUInt16BE(20) === 1 && [...f.subarray(28, 32)].join('.') === sender && [...f.subarray(38, 42)].join('.') === target);

/** The sender MAC of an ARP frame, aa:bb:... */
export const arpSenderMac = (f: Buffer) => [...f.subarray(22, 28)].map((b) => b.toString(16).padStart(2, '0')).join(':');

/** Drains what is queued, sends `frame` (if any) and collects what reaches the guest's end until
 * `until` is satisfied or ms pass. */
export async function framesAfter(peer: TapPeer, frame: Buffer | undefined, until: (frames: Buffer[]) => unknown, ms = 5000): Promise<Buffer[]> {
  await peer.recv(100);
  if (frame) peer.send(frame);
  const got: Buffer[] = [];
  for (const end = Date.now() + ms; Date.now() < end && !until(got);) got.push(...(await peer.recv(250)));
  return got;
}
