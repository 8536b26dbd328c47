// A tiny VM launcher for e2e tests: given the `handoff` of one interface in knit's Attach
// answer, it does what a Kata shim or virt-launcher does with it — boot QEMU inside the
// device's netns, on the tap knit made, by name or with the queue fds from knit's hand-off
// socket (or on its macvtap, through the macvtap's character device, as Kata's Go runtime
// does), with the guest NIC's MAC and the guest config knit computed. knit answers; this only
// reads the answer. (Real launchers deliver the guest config by Kata's agent or DHCP; here it
// rides on the test guest's kernel command line.)
import { closeFd, MAX_FDS_PER_MESSAGE, requestFds } from '../../src/net/fdpass.js';
import { fromStruct, type StructMsg } from '../../src/api/struct.js';
import { execFileSync } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import net from 'node:net';
import { bootGuest, type Guest, type GuestNetConfig } from '../fixtures/qemu.js';
import { GUEST_AGENT_PORT } from '../fixtures/guest-init.js';

/** The fields of ResultInterface.handoff this launcher reads (runtimes/common/tap-handoff.ts). */
export interface Handoff {
  runtime: 'kata' | 'kubevirt';
  model: string;
  device: 'tap' | 'macvtap';
  name: string;
  netns: string | null;
  queues: number;
  flags: string;
  mac: string;
  mtu: number;
  guest: {
    name: string;
    mac: string;
    mtu: number;
    ips: { address: string; family: 4 | 6; gateway?: string }[];
    routes: { dst: string; gateway?: string }[];
  };
  /** Present when knit hands this tap's fds out (src/daemon/tap-fd-server.ts). */
  fdSocket?: string;
  token?: string;
  [extra: string]: unknown;
}

/** A result as the gRPC client decodes it (handoff is a protobuf Struct) or as `knit attach
 * --json` prints it (plain JSON): the sandbox id and the one VM interface's hand-off. */
export function vmHandoff(result: { sandbox_id: string; interfaces: { name: string; handoff?: unknown }[] }): { sandboxId: string; ifname: string; handoff: Handoff } {
  const vm = result.interfaces.filter((i) => i.handoff);
  if (vm.length !== 1) throw new Error(`expected one interface with a handoff in the Attach result, found ${vm.length}: ${JSON.stringify(result.interfaces.map((i) => i.name))}`);
  const raw = vm[0].handoff as Record<string, unknown>;
  const handoff = ('fields' in raw && Object.keys(raw).length === 1 ? fromStruct(raw as unknown as StructMsg) : raw) as Handoff;
  return { sandboxId: result.sandbox_id, ifname: vm[0].name, handoff };
}

/** The guest's network as the test guest's /init takes it: first IPv4 address, the default
 * route's gateway, other routes as dst@via. */
export function guestNetFrom(h: Handoff, ping: string[] = []): GuestNetConfig {
  const v4 = h.guest.ips.find((i) => i.family === 4);
  if (!v4) throw new Error(`handoff.guest.ips has no IPv4 address: ${JSON.stringify(h.guest.ips)}`);
  const v4Routes = h.guest.routes.filter((r) => !r.dst.includes(':'));
  const def = v4Routes.find((r) => r.dst === '0.0.0.0/0');
  return {
    ip: v4.address,
    gw: def?.gateway ?? v4.gateway,
    mtu: h.guest.mtu,
    matchMac: h.mac,
    routes: v4Routes.filter((r) => r !== def).map((r) => (r.gateway ? `${r.dst}@${r.gateway}` : r.dst)),
    ping,
  };
}

export interface FdReply {
  ok: boolean;
  error?: string;
  name?: string;
  queues?: number;
  flags?: string;
}

/** One request to knit's hand-off socket: the JSON line in, the JSON line and fds out. The
 * caller owns the fds. */
export async function requestTapFds(socket: string, req: { sandbox_id: string; interface: string; token: string }): Promise<{ reply: FdReply; fds: number[] }> {
  const msg = await requestFds(socket, Buffer.from(JSON.stringify(req) + '\n'), 5000, { maxFds: MAX_FDS_PER_MESSAGE });
  const text = msg.data.toString('utf8').trim();
  try {
    return { reply: JSON.parse(text) as FdReply, fds: msg.fds };
  } catch {
    msg.fds.forEach(closeFd);
    throw new Error(`hand-off socket ${socket} answered something that is not JSON: ${JSON.stringify(text)}`);
  }
}

export interface LaunchOptions {
  sandboxId: string;
  /** The interface to name in an fd request: the tap or the pod interface it serves. */
  ifname: string;
  handoff: Handoff;
  /** A tap: QEMU opens it by name, or takes the queue fds knit's hand-off socket sends. A
   * macvtap: this process opens its character device (openMacvtapQueues). */
  by: 'name' | 'fd' | 'chardev';
  /** Names the serial log dir, for debugging. */
  name: string;
  /** Addresses the guest pings once configured (KNIT-PING-OK/FAIL on its serial). */
  ping?: string[];
  /** Serve QMP (Guest.qmpSocket), for NIC hot-plug. */
  qmp?: boolean;
  /** The guest asks DHCP (knit answers KubeVirt guests) instead of taking the hand-off's config;
   * 'clients': real DHCP clients one after another (test/fixtures/guest-dhcp-clients.ts). */
  dhcp?: boolean | 'clients';
}

export interface LaunchedVm {
  guest: Guest;
  /** For `by: 'fd'`: the hand-off socket's answer. */
  fdReply?: FdReply;
}

/** Boots the guest on knit's device. The tap is opened inside handoff.netns (QEMU runs there,
 * as Kata's QEMU and virt-launcher's do); by fd, knit opened the queues and QEMU inherits
 * them as fd 3, 4, ...; by chardev, this process opened the macvtap's queues and QEMU
 * inherits those. */
export async function launchVm(o: LaunchOptions): Promise<LaunchedVm> {
  const h = o.handoff;
  if ((h.device === 'macvtap') !== (o.by === 'chardev')) throw new Error(`launchVm: handoff.device ${h.device} is not opened by ${o.by}`);
  const net = o.dhcp ? { dhcp: o.dhcp, ...(o.ping ? { ping: o.ping } : {}) } : guestNetFrom(h, o.ping);
  const base = { name: o.name, netnsPath: h.netns ?? '/proc/1/ns/net', mac: h.mac, net, qmp: o.qmp };
  if (o.by === 'chardev') {
    const { fds } = openMacvtapQueues(base.netnsPath, h.name, h.queues);
    try {
      return { guest: await bootGuest({ ...base, tap: { fds } }) };
    } finally {
      fds.forEach((fd) => closeSync(fd)); // QEMU has its own copies once it runs
    }
  }
  if (o.by === 'name') {
    // The fixture's by-name netdev has no queues= option: QEMU would open one queue.
    if (h.queues !== 1) throw new Error(`launchVm: by name supports one queue, handoff.queues is ${h.queues}`);
    return { guest: await bootGuest({ ...base, tap: { ifname: h.name } }) };
  }
  if (!h.fdSocket || !h.token) throw new Error('launchVm: handoff has no fdSocket/token: this tap is not handed off by fd');
  const { reply, fds } = await requestTapFds(h.fdSocket, { sandbox_id: o.sandboxId, interface: o.ifname, token: h.token });
  try {
    if (!reply.ok) throw new Error(`hand-off socket refused: ${reply.error}`);
    if (fds.length !== h.queues) throw new Error(`hand-off socket sent ${fds.length} fds for ${h.queues} queues`);
    return { guest: await bootGuest({ ...base, tap: { fds } }), fdReply: reply };
  } finally {
    fds.forEach(closeFd); // QEMU has its own copies once it runs
  }
}

/** The macvtap `name` in netnsPath: its ifindex and its character device's numbers, as sysfs
 * inside that netns shows them (sysfs shows the net devices of the netns it was mounted in). */
export function macvtapDevice(netnsPath: string, name: string): { ifindex: number; dev: string } {
  const read = 'mount -t sysfs sysfs /sys && i=$(cat "/sys/class/net/$1/ifindex") && echo "$i" && cat "/sys/class/net/$1/macvtap/tap$i/dev"';
  const out = execFileSync('nsenter', [`--net=${netnsPath}`, '--', 'unshare', '--mount', 'sh', '-c', read, 'sh', name], { encoding: 'utf8' });
  const [ifindex, dev] = out.trim().split('\n');
  return { ifindex: Number(ifindex), dev };
}

/** major:minor of a character device node, as stat(1) prints them (hex), in sysfs's decimal form. */
export function charDevNumbers(node: string): string {
  const [kind, major, minor] = execFileSync('stat', ['-c', '%F:%t:%T', node], { encoding: 'utf8' }).trim().split(':');
  if (kind !== 'character special file') throw new Error(`${node} is a ${kind}, not a character device`);
  return `${parseInt(major, 16)}:${parseInt(minor, 16)}`;
}

/** Opens a macvtap's queues as Kata's Go runtime does: /dev/tap<ifindex>, once per queue. The
 * node is host-wide and named after an ifindex that is unique only inside one netns, so it is
 * taken only if it carries this macvtap's own device numbers (knit picks an ifindex no other
 * macvtap has: README "Which Kata runtime takes which model"). The caller owns the fds. */
export function openMacvtapQueues(netnsPath: string, name: string, queues: number): { node: string; fds: number[] } {
  const { ifindex, dev } = macvtapDevice(netnsPath, name);
  const node = `/dev/tap${ifindex}`;
  const found = charDevNumbers(node);
  if (found !== dev) throw new Error(`${node} is device ${found}, but macvtap ${name} in ${netnsPath} is ${dev}: another netns's macvtap`);
  const fds: number[] = [];
  try {
    for (let q = 0; q < queues; q++) fds.push(openSync(node, 'r+'));
  } catch (err) {
    fds.forEach((fd) => closeSync(fd));
    throw err;
  }
  return { node, fds };
}

/** The README's hand-off client in Python (no knit code): send the request line, receive the
 * answer and the fds. Prints {"reply": ..., "iff": [tap name each fd is attached to]} so a test
 * can see what arrived without trusting knit's own fd code. argv[1]: socket, argv[2]: request
 * JSON. */
export const PYTHON_FD_CLIENT = [
  'import json, socket, sys',
  's = socket.socket(socket.AF_UNIX)',
  's.connect(sys.argv[1])',
  "s.sendall((sys.argv[2] + '\\n').encode())",
  'msg, fds, _, _ = socket.recv_fds(s, 4096, 253)',
  "iff = [next((l.split()[1] for l in open(f'/proc/self/fdinfo/{fd}') if l.startswith('iff:')), None) for fd in fds]",
  "print(json.dumps({'reply': json.loads(msg), 'iff': iff}))",
].join('\n');

/** Debian's interpreter by absolute path: a pyenv shim under /root is not usable by other uids. */
export const SYSTEM_PYTHON = '/usr/bin/python3';

/** One line to the test guest's agent stand-in (test/fixtures/guest-init.ts) at addr; resolves
 * with its answer once it closes the connection. */
export function askGuestAgent(addr: string, line: string, timeoutMs = 30_000): Promise<string> {
  return new Promise((resolve, reject) => {
    let answer = '';
    const s = net.connect(GUEST_AGENT_PORT, addr, () => s.write(line + '\n'));
    s.setTimeout(timeoutMs, () => s.destroy(new Error(`guest agent at ${addr} did not answer`)));
    s.setEncoding('utf8').on('data', (d: string) => (answer += d));
    s.once('error', reject);
    s.once('close', () => resolve(answer.trim()));
  });
}
