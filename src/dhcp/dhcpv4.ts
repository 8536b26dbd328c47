// DHCPv4 messages (RFC 2131 section 2, options RFC 2132), the parts a single-client server
// needs: a request taken apart strictly, a reply built with the options it is given.
import { Malformed } from './frame.js';
import { ipv4Text, macText } from './addr.js';

export const SERVER_PORT = 67;
export const CLIENT_PORT = 68;
const FIXED = 236; // op .. file
const SNAME = [44, 108] as const;
const FILE = [108, 236] as const;
const COOKIE = 0x63825363;
const BOOTREQUEST = 1;
const BOOTREPLY = 2;
const HTYPE_ETHERNET = 1;
/** The broadcast bit of `flags` (RFC 2131 figure 2). */
export const FLAG_BROADCAST = 0x8000;

export const MessageType = { discover: 1, offer: 2, request: 3, decline: 4, ack: 5, nak: 6, release: 7, inform: 8 } as const;

/** RFC 2132 (and 3397, 3442) option codes knit reads or writes. */
export const Opt = {
  pad: 0, subnetMask: 1, router: 3, dns: 6, hostName: 12, domainName: 15, mtu: 26,
  requestedIp: 50, leaseTime: 51, overload: 52, messageType: 53, serverId: 54, parameterRequest: 55, maxMessageSize: 57, renewal: 58, rebinding: 59,
  domainSearch: 119, classlessRoutes: 121, end: 255,
} as const;

export interface DhcpRequest {
  xid: number;
  flags: number;
  ciaddr: string;
  giaddr: string;
  chaddr: string;
  messageType: number;
  requestedIp?: string;
  serverId?: string;
  /** Option 55: the options the client asks for, in its order of preference (RFC 2132 9.8). */
  parameterRequest: number[];
  /** The largest reply (IP datagram) the client takes: option 57, at least 576 (RFC 2132 9.10). */
  maxMessageSize: number;
  /** The request's bytes, for the reply to echo what it must (xid, flags, giaddr, chaddr). */
  raw: Buffer;
}

/** A client's message (op BOOTREQUEST, Ethernet hardware address); throws Malformed. */
export function parseRequest(msg: Buffer): DhcpRequest {
  if (msg.length < FIXED + 4) throw new Malformed('truncated');
  if (msg[0] !== BOOTREQUEST || msg[1] !== HTYPE_ETHERNET || msg[2] !== 6) throw new Malformed('bad-message');
  if (msg.readUInt32BE(FIXED) !== COOKIE) throw new Malformed('bad-message');
  const options = withOverload(msg, parseOptions(msg.subarray(FIXED + 4)));
  const type = options.get(Opt.messageType);
  if (!type || type.length !== 1 || type[0]! < 1 || type[0]! > 8) throw new Malformed('bad-message');
  const addr = (code: number) => {
    const v = options.get(code);
    if (v === undefined) return undefined;
    if (v.length !== 4) throw new Malformed('bad-message');
    return ipv4Text(v);
  };
  const maxSize = options.get(Opt.maxMessageSize);
  const requestedIp = addr(Opt.requestedIp);
  const serverId = addr(Opt.serverId);
  return {
    xid: msg.readUInt32BE(4),
    flags: msg.readUInt16BE(10),
    ciaddr: ipv4Text(msg.subarray(12, 16)),
    giaddr: ipv4Text(msg.subarray(24, 28)),
    chaddr: macText(msg.subarray(28, 34)),
    messageType: type[0]!,
    ...(requestedIp ? { requestedIp } : {}),
    ...(serverId ? { serverId } : {}),
    parameterRequest: [...(options.get(Opt.parameterRequest) ?? [])],
    maxMessageSize: Math.max(MIN_MESSAGE_SIZE, maxSize?.length === 2 ? maxSize.readUInt16BE(0) : 0),
    raw: msg,
  };
}

/** Option overload (RFC 2131 4.1, RFC 2132 9.3): option 52 in the options field says the
 * options go on in `file` (1), `sname` (2) or both (3). Each such field holds options from its
 * first byte to an end option, none overrunning it, and no second option 52; the aggregate is
 * options, then file, then sname, a code seen again appended to its value (RFC 3396 section 6). */
function withOverload(msg: Buffer, options: Map<number, Buffer>): Map<number, Buffer> {
  const overload = options.get(Opt.overload);
  if (overload === undefined) return options;
  if (overload.length !== 1 || overload[0]! < 1 || overload[0]! > 3) throw new Malformed('bad-message');
  const fields = [...(overload[0]! & 1 ? [FILE] : []), ...(overload[0]! & 2 ? [SNAME] : [])];
  const out = new Map(options);
  for (const [start, end] of fields) {
    for (const [code, value] of parseOptions(msg.subarray(start, end))) {
      if (code === Opt.overload) throw new Malformed('bad-message');
      const prev = out.get(code);
      out.set(code, prev ? Buffer.concat([prev, value]) : value);
    }
  }
  return out;
}

/** Code -> value; a repeated code is concatenated (RFC 3396). Needs the end option. */
export function parseOptions(buf: Buffer): Map<number, Buffer> {
  const out = new Map<number, Buffer>();
  let i = 0;
  for (;;) {
    if (i >= buf.length) throw new Malformed('bad-message'); // no end option
    const code = buf[i]!;
    if (code === Opt.end) return out;
    if (code === Opt.pad) {
      i++;
      continue;
    }
    if (i + 1 >= buf.length || i + 2 + buf[i + 1]! > buf.length) throw new Malformed('bad-message');
    const value = buf.subarray(i + 2, i + 2 + buf[i + 1]!);
    const prev = out.get(code);
    out.set(code, prev ? Buffer.concat([prev, value]) : value);
    i += 2 + buf[i + 1]!;
  }
}

/** What every client takes (RFC 2131 section 2: an options field of 312 bytes; RFC 2132 9.10). */
const MIN_MESSAGE_SIZE = 576;
const IP_UDP_HEADERS = 28;
/** What a reply always carries, whatever its size: the message type, the server, the lease, the
 * address's mask and router. */
const ESSENTIAL: ReadonlySet<number> = new Set([Opt.messageType, Opt.serverId, Opt.leaseTime, Opt.subnetMask, Opt.router]);

/** A reply's options in the client's order of preference (RFC 2132 9.8: the server MUST try
 * to), the ones it did not ask for after them; what does not fit the client's largest message
 * is left out, the ones it did not ask for first, then its least preferred. The essential ones
 * always go. */
export function arrangeOptions(options: [number, Buffer][], req: Pick<DhcpRequest, 'parameterRequest' | 'maxMessageSize'>): [number, Buffer][] {
  const rank = (code: number) => (ESSENTIAL.has(code) ? -1 : req.parameterRequest.includes(code) ? req.parameterRequest.indexOf(code) : 256);
  const ordered = options.map((o, i) => ({ o, i })).sort((a, b) => rank(a.o[0]) - rank(b.o[0]) || a.i - b.i).map((x) => x.o);
  let room = req.maxMessageSize - IP_UDP_HEADERS - FIXED - 4 - 1; // the end option
  return ordered.filter(([code, value]) => {
    const size = value.length + 2 * Math.max(1, Math.ceil(value.length / 255));
    if (!ESSENTIAL.has(code) && size > room) return false;
    room -= size;
    return true;
  });
}

/** Options in the order given; a value over 255 bytes is split into several (RFC 3396). */
export function encodeOptions(options: [number, Buffer][]): Buffer {
  const parts: Buffer[] = [];
  for (const [code, value] of options) {
    for (let off = 0; off === 0 || off < value.length; off += 255) {
      const chunk = value.subarray(off, off + 255);
      parts.push(Buffer.from([code, chunk.length]), chunk);
    }
  }
  parts.push(Buffer.from([Opt.end]));
  return Buffer.concat(parts);
}

/** A BOOTREPLY to req: yiaddr, the server's siaddr... (RFC 2131 table 3), then the options. */
export function buildReply(req: DhcpRequest, yiaddr: Buffer, options: [number, Buffer][]): Buffer {
  const fixed = Buffer.alloc(FIXED + 4);
  fixed[0] = BOOTREPLY;
  fixed[1] = HTYPE_ETHERNET;
  fixed[2] = 6;
  req.raw.copy(fixed, 4, 4, 8); // xid
  req.raw.copy(fixed, 10, 10, 12); // flags
  req.raw.copy(fixed, 12, 12, 16); // ciaddr (INFORM's ACK echoes it; otherwise the client's own)
  yiaddr.copy(fixed, 16);
  req.raw.copy(fixed, 24, 24, 44); // giaddr, chaddr
  fixed.writeUInt32BE(COOKIE, FIXED);
  const msg = Buffer.concat([fixed, encodeOptions(options)]);
  // BOOTP's minimum message (RFC 1542 2.1): some clients drop shorter replies.
  return msg.length >= 300 ? msg : Buffer.concat([msg, Buffer.alloc(300 - msg.length)]);
}

/** RFC 1035 3.1 names, uncompressed, one after another (the option 119 payload, RFC 3397). */
export function encodeDomainList(domains: string[]): Buffer {
  const parts: Buffer[] = [];
  for (const d of domains) {
    for (const label of d.replace(/\.$/, '').split('.')) {
      if (!label || label.length > 63) throw new Error(`search domain ${JSON.stringify(d)} has an empty or over-long label`);
      parts.push(Buffer.from([label.length]), Buffer.from(label, 'ascii'));
    }
    parts.push(Buffer.from([0]));
  }
  return Buffer.concat(parts);
}

/** Option 121 (RFC 3442): per route, the prefix length, the significant octets of the
 * destination, then the router (0.0.0.0 = on-link). */
export function encodeClasslessRoutes(routes: { dst: Buffer; prefix: number; gateway: Buffer }[]): Buffer {
  return Buffer.concat(routes.map((r) => Buffer.concat([Buffer.from([r.prefix]), r.dst.subarray(0, Math.ceil(r.prefix / 8)), r.gateway])));
}
