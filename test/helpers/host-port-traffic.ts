// Real traffic for host-port tests: a TCP+UDP echo server inside a pod netns that answers with
// the peer address it saw (so a test can tell a masqueraded flow from one that kept its
// source), a one-shot client run in any netns, and a "remote client" netns wired to the node
// by a veth the test names and addresses.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { makeNetns, removeLinkQuietly, removeNetns } from './daemon.js';

const PY = '/usr/bin/python3';

const SERVER = `
import socket, sys, threading
port = int(sys.argv[1])
def tcp(fam, addr):
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if fam == socket.AF_INET6: s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind((addr, port)); s.listen(16)
    while True:
        c, peer = s.accept(); c.sendall(("pod saw " + peer[0]).encode()); c.close()
def udp(fam, addr):
    s = socket.socket(fam, socket.SOCK_DGRAM)
    if fam == socket.AF_INET6: s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind((addr, port))
    while True:
        _, peer = s.recvfrom(100); s.sendto(("pod saw " + peer[0]).encode(), peer)
for f in (tcp, udp):
    for fam, addr in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        threading.Thread(target=f, args=(fam, addr), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
`;

const CLIENT = `
import socket, sys
proto, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
fam = socket.AF_INET6 if ":" in host else socket.AF_INET
try:
    if proto == "tcp":
        s = socket.create_connection((host, port), timeout=3); print(s.recv(100).decode())
    else:
        s = socket.socket(fam, socket.SOCK_DGRAM); s.settimeout(3); s.sendto(b"hi", (host, port)); print(s.recvfrom(100)[0].decode())
except Exception as e:
    print("ERR " + type(e).__name__)
`;

export interface Traffic {
  /** Starts the echo server on `port` in netns `ns`; resolves once it listens. */
  serve(ns: string, port: number): Promise<void>;
  /** The server's answer ("pod saw <addr>") or "ERR <exception>", from netns `ns` (undefined: the node). */
  ask(ns: string | undefined, proto: 'tcp' | 'udp', host: string, port: number): string;
  /** Stops the servers it started (by PID) and removes its files. */
  close(): void;
}

export function traffic(prefix: string): Traffic {
  const dir = mkdtempSync(path.join(os.tmpdir(), `knit-${prefix}-traffic-`));
  writeFileSync(path.join(dir, 'server.py'), SERVER);
  writeFileSync(path.join(dir, 'client.py'), CLIENT);
  const servers: ChildProcess[] = [];
  return {
    serve(ns, port) {
      const child = spawn('ip', ['netns', 'exec', ns, PY, path.join(dir, 'server.py'), String(port)], { stdio: ['ignore', 'pipe', 'inherit'] });
      servers.push(child);
      return new Promise((resolve, reject) => {
        child.stdout!.once('data', () => resolve());
        child.once('exit', (code) => reject(new Error(`echo server in ${ns} exited ${code}`)));
      });
    },
    ask(ns, proto, host, port) {
      const argv = [PY, path.join(dir, 'client.py'), proto, host, String(port)];
      const [cmd, ...args] = ns ? ['ip', 'netns', 'exec', ns, ...argv] : argv;
      return execFileSync(cmd, args, { encoding: 'utf8' }).trim();
    },
    close() {
      for (const s of servers) if (s.exitCode === null && s.signalCode === null) s.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface RemoteClient {
  ns: string;
  /** The node's end of the wire and its addresses (what the client connects to). */
  nodeLink: string;
  node4: string;
  node6: string;
  client4: string;
  client6: string;
  remove(): void;
}

/** A netns standing in for another machine: a veth to the node, `<net4>.1`/`<net6>1` on the
 * node's end, `.2`/`2` on the client's, default routes via the node, and forwarding on the
 * node's end only (IPv4 checks the ingress device; IPv6 needs Linux 6.17's force_forwarding). */
export function remoteClient(prefix: string, net4: string, net6: string): RemoteClient {
  const ns = `${prefix}-cli`;
  const nodeLink = `${prefix}-up`;
  removeLinkQuietly(nodeLink);
  makeNetns(ns);
  const r: RemoteClient = {
    ns, nodeLink, node4: `${net4}.1`, node6: `${net6}1`, client4: `${net4}.2`, client6: `${net6}2`,
    remove() {
      removeLinkQuietly(nodeLink);
      removeNetns(ns);
    },
  };
  const sh = (...args: string[]) => execFileSync(args[0], args.slice(1), { stdio: 'ignore' });
  sh('ip', 'link', 'add', nodeLink, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns);
  sh('ip', 'addr', 'add', `${r.node4}/24`, 'dev', nodeLink);
  sh('ip', 'addr', 'add', `${r.node6}/64`, 'dev', nodeLink, 'nodad');
  sh('ip', 'link', 'set', nodeLink, 'up');
  sh('ip', '-n', ns, 'addr', 'add', `${r.client4}/24`, 'dev', 'eth0');
  sh('ip', '-n', ns, 'addr', 'add', `${r.client6}/64`, 'dev', 'eth0', 'nodad');
  sh('ip', '-n', ns, 'link', 'set', 'eth0', 'up');
  sh('ip', '-n', ns, 'link', 'set', 'lo', 'up');
  sh('ip', '-n', ns, 'route', 'add', 'default', 'via', r.node4);
  sh('ip', '-n', ns, '-6', 'route', 'add', 'default', 'via', r.node6);
  forward(nodeLink);
  return r;
}

/** Per-device forwarding on a node device the test owns (never the global switches). */
export function forward(dev: string): void {
  execFileSync('sysctl', ['-qw', `net.ipv4.conf.${dev}.forwarding=1`, `net.ipv6.conf.${dev}.force_forwarding=1`]);
}
