// One guest's DHCPv4, DHCPv6 and router-solicitation answers: a frame from the tap in, the
// frames to send back (or none) out, and what happened, for the metrics. Pure: the socket is
// the caller's (src/net/packet-socket.ts); nothing here keeps state between frames.
import { ipv4Bytes, ipv4Mask, ipv6Bytes, linkLocalOf, macBytes } from './addr.js';
import { Malformed, PROTO_ICMPV6, PROTO_UDP, buildIcmpv6Frame, buildUdpFrame, parseFrame, ETH_HEADER, type ParsedFrame } from './frame.js';
import {
  CLIENT_PORT, FLAG_BROADCAST, MessageType, Opt, SERVER_PORT, arrangeOptions, buildReply, encodeClasslessRoutes, encodeDomainList, parseRequest,
} from './dhcpv4.js';
import {
  CLIENT_PORT as CLIENT_PORT6, Msg6, Opt6, SERVER_PORT as SERVER_PORT6, Status6, buildMessage6, duidLl, iaAddresses, iaNa, option6, parseMessage6, statusCode,
} from './dhcpv6.js';
import { ICMP6_RS, buildRouterAdvertisement, checkRouterSolicitation } from './ndp.js';
import { needsClasslessRoutes, type GuestLease } from './lease.js';

/** What became of one frame. `answered` carries the reply's kind for the metric; `received`, a
 * message that takes no answer (RFC 2131 4.3.3, 4.3.4): the address stays the guest's, as the
 * pod's, whatever it releases or declines. */
export type Outcome =
  | { result: 'answered'; kind: 'offer' | 'ack' | 'nak' | 'advertise' | 'reply' | 'ra'; frames: Buffer[] }
  | { result: 'received'; kind: 'release' | 'decline' }
  | { result: 'ignored'; reason: 'not-for-us' | 'no-address' | 'unanswered-type' }
  | { result: 'dropped'; reason: Malformed['reason'] | 'foreign-mac' | 'over-budget' };

/** KubeVirt's lease (999 days): long enough that a guest never renews in practice. DHCPv6
 * gives its address the same lifetimes, and T1/T2 at 0.5 and 0.8 of them (RFC 8415 21.4). */
export const LEASE_SECONDS = 999 * 24 * 3600;
export const T1_SECONDS = LEASE_SECONDS / 2;
export const T2_SECONDS = (LEASE_SECONDS * 4) / 5;
/** How long an RA's default route lasts; the caller re-advertises well within it. */
export const ROUTER_LIFETIME = 9000; // the RFC 4861 maximum
const ALL_NODES = ipv6Bytes('ff02::1');
const BROADCAST4 = Buffer.from([255, 255, 255, 255]);
/** VLAN-tagged frames and jumbo frames over the guest's MTU are not DHCP from this guest. */
const maxFrame = (lease: GuestLease) => lease.mtu + ETH_HEADER;

/** partialChecksum: the frame's checksum is the sender's NIC's to complete (src/net/packet-taps.ts). */
export function respond(lease: GuestLease, frame: Buffer, partialChecksum = false): Outcome {
  let f: ParsedFrame;
  try {
    f = parseFrame(frame, maxFrame(lease), partialChecksum);
  } catch (err) {
    if (err instanceof Malformed) return { result: 'dropped', reason: err.reason };
    throw err;
  }
  if (f.srcMac !== lease.guestMac) return { result: 'dropped', reason: 'foreign-mac' };
  try {
    if (f.family === 4 && f.protocol === PROTO_UDP && f.dstPort === SERVER_PORT && f.srcPort === CLIENT_PORT) return dhcp4(lease, f);
    if (f.family === 6 && f.protocol === PROTO_UDP && f.dstPort === SERVER_PORT6 && f.srcPort === CLIENT_PORT6) return dhcp6(lease, f);
    if (f.family === 6 && f.protocol === PROTO_ICMPV6 && f.payload[0] === ICMP6_RS) {
      checkRouterSolicitation(f.payload, f.hopLimit);
      if (!lease.v6) return { result: 'ignored', reason: 'no-address' };
      return { result: 'answered', kind: 'ra', frames: [routerAdvertisement(lease, f.srcIp === '::' ? ALL_NODES : ipv6Bytes(f.srcIp))] };
    }
  } catch (err) {
    if (err instanceof Malformed) return { result: 'dropped', reason: err.reason };
    throw err;
  }
  return { result: 'ignored', reason: 'not-for-us' };
}

function dhcp4(lease: GuestLease, f: ParsedFrame): Outcome {
  const req = parseRequest(f.payload);
  if (req.chaddr !== lease.guestMac) return { result: 'dropped', reason: 'foreign-mac' };
  const v4 = lease.v4;
  if (!v4) return { result: 'ignored', reason: 'no-address' };
  const ours = req.serverId === undefined || req.serverId === ip4(v4.serverId);
  let kind: 'offer' | 'ack' | 'nak';
  switch (req.messageType) {
    case MessageType.discover:
      kind = 'offer';
      break;
    case MessageType.request: {
      if (!ours) return { result: 'ignored', reason: 'not-for-us' }; // it chose another server
      const asked = req.requestedIp ?? req.ciaddr;
      kind = asked === ip4(v4.address) ? 'ack' : 'nak';
      break;
    }
    case MessageType.inform:
      kind = 'ack';
      break;
    case MessageType.release:
    case MessageType.decline:
      if (!ours) return { result: 'ignored', reason: 'not-for-us' };
      return { result: 'received', kind: req.messageType === MessageType.release ? 'release' : 'decline' };
    default:
      return { result: 'ignored', reason: 'unanswered-type' }; // a server's message type
  }
  const inform = req.messageType === MessageType.inform;
  const type = kind === 'offer' ? MessageType.offer : kind === 'ack' ? MessageType.ack : MessageType.nak;
  const options: [number, Buffer][] = [[Opt.messageType, Buffer.from([type])], [Opt.serverId, v4.serverId]];
  if (kind !== 'nak') {
    if (!inform) options.push([Opt.leaseTime, u32(LEASE_SECONDS)]);
    options.push([Opt.subnetMask, ipv4Mask(v4.prefix)]);
    if (v4.router) options.push([Opt.router, v4.router]);
    if (needsClasslessRoutes(v4)) options.push([Opt.classlessRoutes, encodeClasslessRoutes(v4.routes)]);
    if (v4.dns.length) options.push([Opt.dns, Buffer.concat(v4.dns)]);
    if (lease.domain) options.push([Opt.domainName, Buffer.from(lease.domain, 'ascii')]);
    if (lease.search.length) options.push([Opt.domainSearch, encodeDomainList(lease.search)]);
    if (lease.hostname) options.push([Opt.hostName, Buffer.from(lease.hostname, 'ascii')]);
    options.push([Opt.mtu, u16(lease.mtu)]);
  }
  const yiaddr = kind === 'nak' || inform ? Buffer.alloc(4) : v4.address;
  const payload = buildReply(req, yiaddr, arrangeOptions(options, req));
  // RFC 2131 4.1: to ciaddr when the client has one, else broadcast when it asks (and always
  // for a NAK), else to the offered address; the frame always goes to the guest's MAC.
  const ciaddr = ipv4Bytes(req.ciaddr);
  const dstIp = kind === 'nak' ? BROADCAST4 : !ciaddr.equals(Buffer.alloc(4)) ? ciaddr : req.flags & FLAG_BROADCAST ? BROADCAST4 : v4.address;
  const frame = buildUdpFrame({
    dstMac: macBytes(lease.guestMac), srcMac: macBytes(lease.serverMac), srcIp: v4.serverId, dstIp, srcPort: SERVER_PORT, dstPort: CLIENT_PORT, payload,
  });
  return { result: 'answered', kind, frames: [frame] };
}

function dhcp6(lease: GuestLease, f: ParsedFrame): Outcome {
  const msg = parseMessage6(f.payload);
  const clientId = msg.options.get(Opt6.clientId)?.[0];
  if (!clientId) throw new Malformed('bad-message'); // every client message carries one (RFC 8415 16)
  const v6 = lease.v6;
  if (!v6) return { result: 'ignored', reason: 'no-address' };
  const serverDuid = duidLl(macBytes(lease.serverMac));
  const theirServer = msg.options.get(Opt6.serverId)?.[0];
  if (theirServer && !theirServer.equals(serverDuid)) return { result: 'ignored', reason: 'not-for-us' };
  const rapid = msg.type === Msg6.solicit && msg.options.has(Opt6.rapidCommit);
  const kind = msg.type === Msg6.solicit && !rapid ? 'advertise' : 'reply';
  const options: Buffer[] = [option6(Opt6.clientId, clientId), option6(Opt6.serverId, serverDuid)];
  if (rapid) options.push(option6(Opt6.rapidCommit, Buffer.alloc(0)));
  const ias = (msg.options.get(Opt6.iaNa) ?? []).filter((ia) => ia.length >= 12);
  switch (msg.type) {
    case Msg6.solicit:
    case Msg6.request:
    case Msg6.renew:
    case Msg6.rebind: {
      // The guest's address in each IA; on a Renew or Rebind, any other address the client
      // holds goes back with lifetimes 0, so a guest whose address changed drops the old one
      // (RFC 8415 18.3.4, 18.3.5).
      const held = msg.type === Msg6.renew || msg.type === Msg6.rebind;
      for (const ia of ias) {
        const stale = held ? iaAddresses(ia).filter((a) => !a.equals(v6.address)) : [];
        options.push(iaNa(ia.subarray(0, 4), T1_SECONDS, T2_SECONDS, [
          { address: v6.address, preferred: LEASE_SECONDS, valid: LEASE_SECONDS },
          ...stale.map((address) => ({ address, preferred: 0, valid: 0 })),
        ]));
      }
      break;
    }
    case Msg6.confirm: {
      // RFC 8415 18.3.3: Success when every address the client names is on the guest's link.
      const named = ias.flatMap(iaAddresses);
      if (!named.length) return { result: 'ignored', reason: 'not-for-us' }; // no reply, as the RFC says
      const onLink = named.every((a) => samePrefix(a, v6.address, v6.prefix));
      options.push(onLink ? statusCode(Status6.success, 'on link') : statusCode(Status6.notOnLink, 'not on this link'));
      break;
    }
    case Msg6.release:
    case Msg6.decline:
      // 18.3.7, 18.3.8: a Reply with Success; the address stays the guest's, as the pod's.
      options.push(statusCode(Status6.success, msg.type === Msg6.release ? 'released' : 'declined'));
      break;
    // information-request: the configuration options alone
  }
  if (v6.dns.length) options.push(option6(Opt6.dnsServers, Buffer.concat(v6.dns)));
  if (lease.search.length) options.push(option6(Opt6.domainList, encodeDomainList(lease.search)));
  const payload = buildMessage6(kind === 'advertise' ? Msg6.advertise : Msg6.reply, msg.transactionId, options);
  const frame = buildUdpFrame({
    dstMac: macBytes(lease.guestMac), srcMac: macBytes(lease.serverMac), srcIp: linkLocalOf(lease.serverMac), dstIp: ipv6Bytes(f.srcIp),
    srcPort: SERVER_PORT6, dstPort: CLIENT_PORT6, payload,
  });
  return { result: 'answered', kind, frames: [frame] };
}

/** Whether a and b share their first `prefix` bits. */
function samePrefix(a: Buffer, b: Buffer, prefix: number): boolean {
  for (let bit = 0; bit < prefix; bit++) if ((a[bit >> 3]! ^ b[bit >> 3]!) & (0x80 >> (bit & 7))) return false;
  return true;
}

/** An RA for the guest: managed (addresses by DHCPv6), its prefix on-link, MTU, DNS. Sent in
 * answer to an RS and, unsolicited, now and then by the caller. */
export function routerAdvertisement(lease: GuestLease, dst: Buffer = ALL_NODES): Buffer {
  const v6 = lease.v6!;
  const prefix = Buffer.from(v6.address);
  for (let bit = v6.prefix; bit < 128; bit++) prefix[bit >> 3]! &= ~(0x80 >> (bit & 7));
  const ra = buildRouterAdvertisement({
    routerMac: macBytes(lease.serverMac),
    routerLifetime: lease.serverIsRouter6 ? ROUTER_LIFETIME : 0,
    mtu: lease.mtu,
    onLink: v6.prefix < 128 ? [{ prefix, length: v6.prefix }] : [],
    dns: v6.dns,
    search: lease.search,
  });
  return buildIcmpv6Frame(macBytes(lease.guestMac), macBytes(lease.serverMac), linkLocalOf(lease.serverMac), dst, ra);
}

const ip4 = (b: Buffer) => [...b].join('.');
const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};
const u16 = (n: number) => {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
};
