// DHCPv6 messages (RFC 8415 sections 8 and 21), the parts a single-client stateful server
// needs: a client message taken apart strictly, a server message built from options.
import { Malformed } from './frame.js';

export const SERVER_PORT = 547;
export const CLIENT_PORT = 546;

export const Msg6 = {
  solicit: 1, advertise: 2, request: 3, confirm: 4, renew: 5, rebind: 6, reply: 7, release: 8, decline: 9, informationRequest: 11,
} as const;

/** RFC 8415 section 24 and RFC 3646 option codes. */
export const Opt6 = { clientId: 1, serverId: 2, iaNa: 3, iaAddr: 5, oro: 6, statusCode: 13, rapidCommit: 14, dnsServers: 23, domainList: 24 } as const;

export interface Dhcp6Request {
  type: number;
  /** 3 bytes */
  transactionId: Buffer;
  options: Map<number, Buffer[]>;
}

/** A client message; relay messages and server messages are refused (Malformed). */
export function parseMessage6(msg: Buffer): Dhcp6Request {
  if (msg.length < 4) throw new Malformed('truncated');
  const type = msg[0]!;
  if (![1, 3, 4, 5, 6, 8, 9, 11].includes(type)) throw new Malformed('bad-message');
  return { type, transactionId: msg.subarray(1, 4), options: parseOptions6(msg.subarray(4)) };
}

export function parseOptions6(buf: Buffer): Map<number, Buffer[]> {
  const out = new Map<number, Buffer[]>();
  let i = 0;
  while (i < buf.length) {
    if (i + 4 > buf.length) throw new Malformed('bad-message');
    const code = buf.readUInt16BE(i);
    const len = buf.readUInt16BE(i + 2);
    if (i + 4 + len > buf.length) throw new Malformed('bad-message');
    const list = out.get(code) ?? [];
    list.push(buf.subarray(i + 4, i + 4 + len));
    out.set(code, list);
    i += 4 + len;
  }
  return out;
}

export const option6 = (code: number, value: Buffer): Buffer => {
  const h = Buffer.alloc(4);
  h.writeUInt16BE(code, 0);
  h.writeUInt16BE(value.length, 2);
  return Buffer.concat([h, value]);
};

export function buildMessage6(type: number, transactionId: Buffer, options: Buffer[]): Buffer {
  return Buffer.concat([Buffer.from([type]), transactionId, ...options]);
}

/** DUID-LL (RFC 8415 11.4): type 3, hardware type 1 (Ethernet), the MAC. */
export function duidLl(mac: Buffer): Buffer {
  return Buffer.concat([Buffer.from([0, 3, 0, 1]), mac]);
}

/** IA_NA (21.4) with T1/T2 and one IAADDR (21.6) per address, each with its lifetimes. */
export function iaNa(iaid: Buffer, t1: number, t2: number, addresses: { address: Buffer; preferred: number; valid: number }[]): Buffer {
  const head = Buffer.alloc(12);
  iaid.copy(head, 0, 0, 4);
  head.writeUInt32BE(t1, 4);
  head.writeUInt32BE(t2, 8);
  const addrs = addresses.map((a) => {
    const addr = Buffer.alloc(24);
    a.address.copy(addr, 0);
    addr.writeUInt32BE(a.preferred, 16);
    addr.writeUInt32BE(a.valid, 20);
    return option6(Opt6.iaAddr, addr);
  });
  return option6(Opt6.iaNa, Buffer.concat([head, ...addrs]));
}

/** The IAADDRs' addresses in a client's IA_NA (its first 12 bytes are IAID, T1, T2). */
export function iaAddresses(ia: Buffer): Buffer[] {
  return (parseOptions6(ia.subarray(12)).get(Opt6.iaAddr) ?? []).filter((a) => a.length >= 24).map((a) => a.subarray(0, 16));
}

/** Status Code (21.13): the code, then a message for a human. */
export const statusCode = (code: number, message: string): Buffer => {
  const v = Buffer.alloc(2);
  v.writeUInt16BE(code);
  return option6(Opt6.statusCode, Buffer.concat([v, Buffer.from(message, 'utf8')]));
};

export const Status6 = { success: 0, notOnLink: 4 } as const;
