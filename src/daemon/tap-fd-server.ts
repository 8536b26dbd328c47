// VM hand-off by fd: a launcher (QEMU wrapper, virt-launcher, Kata's shim) connects to the
// hand-off socket, names (sandbox id, interface, one-time token from the Attach answer), and
// receives the tap's queue fds over SCM_RIGHTS, opened inside the sandbox netns with exactly
// the flags the device was made with. A wrong or expired token, a token used twice, or a peer
// uid that is not allowed gets an error line and no fd.
import net from 'node:net';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { chmod, mkdir, unlink } from 'node:fs/promises';
import path from 'node:path';
import type { AttachResult, ResultInterface } from '../base/types.js';
import { isTapHandoff, type Handoff, type TapHandoff } from '../base/handoff.js';
import type { SandboxRecord } from '../core/record.js';
import type { Op, ResultsOf } from '../base/ops.js';
import { replyWithFds, closeFd } from '../net/fdpass.js';
import { clearStaleSocket, trackConnections } from '../api/tracked-server.js';
import { peerCred } from '../net/peercred.js';

/** How long an Attach answer's token stays good: long enough for a VM to start. */
export const TOKEN_TTL_MS = 5 * 60_000;
const MAX_REQUEST_BYTES = 4096;

interface Minted { token: Buffer; expires: number }

export class HandoffTokens {
  private readonly tokens = new Map<string, Minted>();

  constructor(private readonly socketPath: string, private readonly now = () => Date.now()) {}

  /** Adds fdSocket/token/tokenExpiresAt to every tap the launcher may ask fds for. The record
   * keeps no token: each Attach or Query answer mints fresh ones. */
  decorate(result: AttachResult): AttachResult {
    this.sweep();
    // A veth-only answer (runc's, every pod's) has nothing to add: answered as it is, uncopied.
    if (!result.interfaces.some((ifc) => handsOffByFd(ifc.handoff))) return result;
    const interfaces = result.interfaces.map((ifc) => {
      if (!handsOffByFd(ifc.handoff)) return ifc;
      const token = randomBytes(24);
      const expires = this.now() + TOKEN_TTL_MS;
      this.tokens.set(key(result.sandboxId, ifc.name), { token, expires });
      return { ...ifc, handoff: { ...ifc.handoff, fdSocket: this.socketPath, token: token.toString('hex'), tokenExpiresAt: new Date(expires).toISOString() } };
    });
    return { ...result, interfaces };
  }

  /** True once for a valid token, which is then spent. A wrong guess spends nothing, so a
   * prober cannot lock the rightful launcher out. */
  redeem(sandboxId: string, ifname: string, token: string): boolean {
    const k = key(sandboxId, ifname);
    const minted = this.tokens.get(k);
    if (!minted) return false;
    const given = Buffer.from(/^[0-9a-f]*$/.test(token) ? token : '', 'hex');
    const ok = given.length === minted.token.length && timingSafeEqual(given, minted.token) && this.now() <= minted.expires;
    if (ok) this.tokens.delete(k);
    return ok;
  }

  forget(sandboxId: string): void {
    for (const k of this.tokens.keys()) if (k.startsWith(`${sandboxId}\0`)) this.tokens.delete(k);
  }

  private sweep(): void {
    const t = this.now();
    for (const [k, m] of this.tokens) if (m.expires < t) this.tokens.delete(k);
  }
}

const key = (sandboxId: string, ifname: string) => `${sandboxId}\0${ifname}`;

/** Taps can be taken by fd; a macvtap is opened through its /dev/tapN character device. */
function handsOffByFd(h: Handoff | undefined): h is TapHandoff {
  return isTapHandoff(h) && h.device === 'tap';
}

export interface HandoffServerOptions {
  socketPath: string;
  tokens: HandoffTokens;
  records: { get(id: string): SandboxRecord | undefined };
  runOps<const T extends readonly Op[]>(netns: string | undefined, ops: T): Promise<ResultsOf<T>>;
  allowedUids: number[];
  log: { info(o: object, m: string): void; warn(o: object, m: string): void };
}

interface FdRequest { sandbox_id?: unknown; interface?: unknown; token?: unknown }

/** The interface a launcher names: the tap itself, or the pod interface it serves. */
function findTap(rec: SandboxRecord, name: string): ResultInterface | undefined {
  return rec.result.interfaces.find((i) => handsOffByFd(i.handoff) && (i.name === name || i.handoff.guest.name === name));
}

export async function startHandoffServer(o: HandoffServerOptions): Promise<{ close(): Promise<void> }> {
  await mkdir(path.dirname(o.socketPath), { recursive: true, mode: 0o700 });
  await clearStaleSocket(o.socketPath);

  const answer = async (sock: net.Socket, text: string): Promise<void> => {
    let req: FdRequest;
    try {
      req = JSON.parse(text) as FdRequest;
    } catch {
      throw new Error('request is not JSON: send {"sandbox_id","interface","token"}');
    }
    const { sandbox_id: id, interface: ifname, token } = req;
    if (typeof id !== 'string' || typeof ifname !== 'string' || typeof token !== 'string') {
      throw new Error('sandbox_id, interface and token must be strings');
    }
    const rec = o.records.get(id);
    const tap = rec?.state === 'attached' ? findTap(rec, ifname) : undefined;
    // The token is checked before anything else is said, so probing names learns nothing.
    if (!o.tokens.redeem(id, tap?.name ?? ifname, token) || !rec || !tap) {
      throw new Error(`no valid token for sandbox ${id} interface ${ifname} (tokens are one-time and expire ${TOKEN_TTL_MS / 1000} s after Attach)`);
    }
    const h = tap.handoff as TapHandoff; // findTap answers only interfaces whose hand-off is a tap
    const [opened] = await o.runOps(h.netns ?? undefined, [
      { op: 'tun.open', name: h.name, mode: 'tap', queues: h.queues, vnetHdr: h.flags.includes('IFF_VNET_HDR') },
    ]);
    const fds = opened.fds ?? [];
    try {
      await replyWithFds(sock, Buffer.from(JSON.stringify({ ok: true, name: h.name, queues: fds.length, flags: h.flags }) + '\n'), fds);
    } finally {
      fds.forEach(closeFd); // the launcher has its own copies now
    }
    o.log.info({ sandboxId: id, interface: tap.name, queues: fds.length }, 'tap fds handed off');
  };

  const server = net.createServer((sock) => {
    let buf = '';
    const fail = (err: Error) => {
      o.log.warn({ err: err.message }, 'tap fd hand-off refused');
      sock.end(JSON.stringify({ ok: false, error: err.message }) + '\n');
    };
    try {
      const { uid } = peerCred(sock);
      if (!o.allowedUids.includes(uid)) return fail(new Error(`uid ${uid} may not take tap fds`));
    } catch (err) {
      return fail(err as Error);
    }
    sock.setEncoding('utf8');
    sock.on('data', (chunk: string) => {
      buf += chunk;
      if (buf.length > MAX_REQUEST_BYTES) return fail(new Error('request too long'));
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      sock.removeAllListeners('data');
      answer(sock, buf.slice(0, nl)).catch(fail);
    });
    sock.on('error', () => undefined);
  });
  const connections = trackConnections(server);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.socketPath, resolve);
  });
  await chmod(o.socketPath, 0o600);
  return {
    close: () => connections.close(2000),
  };
}
