// One guest's DHCPv4, DHCPv6 and router-solicitation answers: a frame from the tap in, the
// frames to send back (or none) out, and what happened, for the metrics. Pure: the socket is
// the caller's (src/net/packet-socket.ts); nothing here keeps state between frames.
import { ipv4Bytes, ipv4Mask, ipv6Bytes, linkLocalOf, macBytes } from './addr.js';
import { Malformed, PROTO_ICMPV6, PROTO_UDP, buildIcmpv6Frame, buildUdpFrame, parseFrame, ETH_HEADER, type ParsedFrame } from './frame.js';
import {
  CLIENT_PORT, FLAG_BROADCAST, MessageType, Opt, SERVER_PORT, buildReply, encodeClasslessRoutes, encodeDomainList, parseRequest,
} from './dhcpv4.js';
import { CLIENT_PORT as CLIENT_PORT6, Msg6, Opt6, SERVER_PORT as SERVER_PORT6, buildMessage6, duidLl, iaNa, option6, parseMessage6 } from './dhcpv6.js';
import { ICMP6_RS, buildRouterAdvertisement, checkRouterSolicitation } from './ndp.js';
import { needsClasslessRoutes, type GuestLease } from './lease.js';

/** What became of one frame. `answered` carries the reply's kind for the metric. */
export type Outcome =
  | { result: 'answered'; kind: 'offer' | 'ack' | 'nak' | 'advertise' | 'reply' | 'ra'; frames: Buffer[] }
  | { result: 'ignored'; reason: 'not-for-us' | 'no-address' | 'unanswered-type' }
  | { result: 'dropped'; reason: Malformed['reason'] | 'foreign-mac' | 'over-budget' };

/** KubeVirt's lease (999 days): long enough that a guest never renews in practice. */
export const LEASE_SECONDS = 999 * 24 * 3600;
/** How long an RA's default route lasts; the caller re-advertises well within it. */
export const ROUTER_LIFETIME = 9000; // the RFC 4861 maximum
const ALL_NODES = ipv6Bytes('ff02::1');
const BROADCAST4 = Buffer.from([255, 255, 255, 255]);
/** VLAN-tagged frames and jumbo frames over the guest's MTU are not DHCP from this guest. */
const maxFrame = (lease: GuestLease) => lease.mtu + ETH_HEADER;

export function respond(lease: GuestLease, frame: Buffer): Outcome {
  let f: ParsedFrame;
  try {
    f = parseFrame(frame, maxFrame(lease));
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
    default:
      return { result: 'ignored', reason: 'unanswered-type' }; // release, decline
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
    if (lease.search.length) options.push([Opt.domainName, Buffer.from(lease.search[0]!, 'ascii')], [Opt.domainSearch, encodeDomainList(lease.search)]);
    if (lease.hostname) options.push([Opt.hostName, Buffer.from(lease.hostname, 'ascii')]);
    options.push([Opt.mtu, u16(lease.mtu)]);
  }
  const yiaddr = kind === 'nak' || inform ? Buffer.alloc(4) : v4.address;
  const payload = buildReply(req, yiaddr, options);
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
  const ia = msg.options.get(Opt6.iaNa)?.[0];
  if (ia && ia.length >= 12 && msg.type !== Msg6.release && msg.type !== Msg6.decline) {
    options.push(iaNa(ia.subarray(0, 4), v6.address, 0xffffffff, 0xffffffff));
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
