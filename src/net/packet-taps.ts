// Packet sockets on VM taps (native/src/packet_taps.h): each opened inside the tap's netns,
// bound to the tap, filtered in the kernel to DHCPv4, DHCPv6 and router solicitations. One
// reader thread in the addon serves them all and hands frames to `onFrames` on the JS thread.
//
//   const taps = new PacketTaps((frames) => ...);
//   const { id } = taps.open('/run/netns/pod1', 'tap0');
//   taps.send(id, frame);
//   taps.close(id);
import { native } from './native.js';

export type PacketEvent =
  /** wireLength > frame.length: the frame was longer than the addon's 64 KiB read buffer.
   * partialChecksum: its UDP/ICMPv6 checksum is the sender's NIC's to complete, the field holds
   * only the pseudo-header's sum (a virtio guest's kernel sockets send such frames: packet(7),
   * TP_STATUS_CSUMNOTREADY). */
  | { id: number; frame: Buffer; wireLength: number; partialChecksum: boolean }
  /** The socket reported an error (ENETDOWN when the tap went down or away). */
  | { id: number; code: string; errno: number }
  /** The addon read and discarded this many frames: the guest sent more than 20 a second
   * (bursts of 40), far beyond what DHCP and router solicitation need. */
  | { id: number; overBudget: number };

export class PacketTaps {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  private readonly handle: any;

  constructor(onFrames: (events: PacketEvent[]) => void) {
    this.handle = new native.PacketTaps(onFrames);
  }

  /** Throws the addon's error (ENODEV: no such tap in that netns; ENOENT: no such netns). */
  open(netnsPath: string, ifname: string): { id: number; ifindex: number } {
    return this.handle.open(netnsPath, ifname);
  }

  send(id: number, frame: Buffer): void {
    this.handle.send(id, frame);
  }

  close(id: number): void {
    this.handle.close(id);
  }

  /** Lets the process exit while sockets are open (the daemon stops it explicitly). */
  unref(): void {
    this.handle.unref();
  }

  shutdown(): void {
    this.handle.shutdown();
  }
}
