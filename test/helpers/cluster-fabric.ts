// Several "nodes" on one machine (docs/cluster.md, "Testing"): each node a netns with its own
// knit daemon (started inside it with `ip netns exec`, so the node netns is that knit's host),
// the first ones joined by a fabric bridge in its own netns, one more behind a router netns on a
// second segment, and an "outside" netns beyond node 1. Everything is named with the test's
// prefix and removed in teardown, processes by PID.
import type { ExecutionContext } from 'ava';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { makeNetns, removeNetns } from './names.js';
import { cleanupDaemon, startDaemon, type Daemon } from './daemon.js';

export const sh = (ns: string, ...args: string[]) => execFileSync('ip', ['netns', 'exec', ns, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const ipn = (ns: string, ...args: string[]) => execFileSync('ip', ['-n', ns, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });

export interface FabricNode {
  name: string;
  ns: string;
  ip4: string;
  ip6: string;
  pod4: string;
  pod6: string;
}

/** Nodes on one fabric bridge and nothing else. */
export interface FabricSegment {
  prefix: string;
  /** The netns holding the fabric bridge (named "fab" in it): where a test plugs in more. */
  bridgeNs: string;
  nodes: FabricNode[];
}

export interface Fabric extends FabricSegment {
  /** The netns beyond node 1, and the address node 1 has towards it. */
  outside: { ns: string; ip4: string; ip6: string; node1ip4: string; node1ip6: string };
}

/** Who ends what a helper made: a test's t, or a hook's own list (ava runs a hook's teardowns
 * when the hook ends, so a test.before that builds for the whole file collects them itself). */
export type Teardowns = Pick<ExecutionContext, 'teardown'>;

const plug = (ns: string, bridgeNs: string, port: string, ifname: string) => {
  execFileSync('ip', ['link', 'add', port, 'netns', bridgeNs, 'type', 'veth', 'peer', 'name', ifname, 'netns', ns]);
  ipn(bridgeNs, 'link', 'set', port, 'master', 'fab', 'up');
  ipn(ns, 'link', 'set', ifname, 'up');
  ipn(ns, 'link', 'set', 'lo', 'up');
};

/** A node netns n<i>, forwarding off whatever the host (or another test meanwhile) set: a new
 * netns copies the host's IPv4 switches. Pod blocks 10.<seg>.<i>.0/24 unless given. */
function fabricNode(t: Teardowns, prefix: string, seg: number, s: number, i: number, block?: { pod4: string; pod6: string }): FabricNode {
  const name = `n${i}`;
  const ns = makeNetns(t, prefix, name).name;
  sh(ns, 'sysctl', '-qw', 'net.ipv4.conf.all.forwarding=0', 'net.ipv6.conf.all.forwarding=0');
  return { name, ns, ip4: `192.168.${s}.${i}`, ip6: `fd6b:${s}::${i}`, pod4: `10.${seg}.${i}.0/24`, pod6: `fd6b:${seg}:${i}::/64`, ...block };
}

/** `count` nodes n1..n<count> on a fabric bridge (192.168.<seg>.0/24, fd6b:<seg>::/64), each
 * with its eth0 there; `blocks` gives their pod blocks where a test needs its own ranges. */
export function buildSegment(t: Teardowns, prefix: string, seg: number, count: number, blocks: { pod4: string; pod6: string }[] = []): FabricSegment {
  const fab = makeNetns(t, prefix, 'fab').name;
  ipn(fab, 'link', 'add', 'fab', 'type', 'bridge');
  ipn(fab, 'link', 'set', 'fab', 'up');
  const nodes: FabricNode[] = [];
  for (let i = 1; i <= count; i++) {
    const node = fabricNode(t, prefix, seg, seg, i, blocks[i - 1]);
    nodes.push(node);
    plug(node.ns, fab, `${prefix}p${i}`.slice(0, 15), 'eth0');
    ipn(node.ns, 'addr', 'add', `${node.ip4}/24`, 'dev', 'eth0');
    ipn(node.ns, '-6', 'addr', 'add', `${node.ip6}/64`, 'dev', 'eth0', 'nodad');
  }
  return { prefix, bridgeNs: fab, nodes };
}

/** `count` nodes on the fabric (192.168.<seg>.0/24), plus one on a second segment behind a router. */
export function buildFabric(t: Teardowns, prefix: string, seg: number, count = 3): Fabric {
  const { bridgeNs: fab, nodes } = buildSegment(t, prefix, seg, count);
  const rtr = makeNetns(t, prefix, 'rtr').name;
  const out = makeNetns(t, prefix, 'out').name;
  // The second segment: the far node, a veth straight to the router.
  const far = fabricNode(t, prefix, seg, seg + 1, count + 1);
  nodes.push(far);
  execFileSync('ip', ['link', 'add', 'eth0', 'netns', far.ns, 'type', 'veth', 'peer', 'name', 'seg2', 'netns', rtr]);
  ipn(far.ns, 'link', 'set', 'eth0', 'up');
  ipn(far.ns, 'link', 'set', 'lo', 'up');
  ipn(rtr, 'link', 'set', 'seg2', 'up');
  ipn(rtr, 'addr', 'add', `192.168.${seg + 1}.254/24`, 'dev', 'seg2');
  ipn(rtr, '-6', 'addr', 'add', `fd6b:${seg + 1}::fe/64`, 'dev', 'seg2', 'nodad');
  ipn(far.ns, 'addr', 'add', `${far.ip4}/24`, 'dev', 'eth0');
  ipn(far.ns, '-6', 'addr', 'add', `${far.ip6}/64`, 'dev', 'eth0', 'nodad');
  // Node 1's default route leads outside (below); the others' to the router.
  ipn(nodes[0].ns, 'route', 'add', `192.168.${seg + 1}.0/24`, 'via', `192.168.${seg}.254`);
  ipn(nodes[0].ns, '-6', 'route', 'add', `fd6b:${seg + 1}::/64`, 'via', `fd6b:${seg}::fe`);
  for (const node of nodes.slice(1)) {
    const s = node === far ? seg + 1 : seg;
    ipn(node.ns, 'route', 'add', 'default', 'via', `192.168.${s}.254`);
    ipn(node.ns, '-6', 'route', 'add', 'default', 'via', `fd6b:${s}::fe`);
  }
  plug(rtr, fab, `${prefix}pr`, 'eth0');
  ipn(rtr, 'addr', 'add', `192.168.${seg}.254/24`, 'dev', 'eth0');
  ipn(rtr, '-6', 'addr', 'add', `fd6b:${seg}::fe/64`, 'dev', 'eth0', 'nodad');
  sh(rtr, 'sysctl', '-qw', 'net.ipv4.ip_forward=1', 'net.ipv6.conf.all.forwarding=1');
  // The outside: beyond node 1, with no route back to any pod.
  execFileSync('ip', ['link', 'add', 'up0', 'netns', nodes[0].ns, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', out]);
  ipn(nodes[0].ns, 'link', 'set', 'up0', 'up');
  ipn(out, 'link', 'set', 'eth0', 'up');
  ipn(out, 'link', 'set', 'lo', 'up');
  const o = { ns: out, ip4: `198.18.${seg}.2`, ip6: `fd6b:ff:${seg}::2`, node1ip4: `198.18.${seg}.1`, node1ip6: `fd6b:ff:${seg}::1` };
  ipn(nodes[0].ns, 'addr', 'add', `${o.node1ip4}/24`, 'dev', 'up0');
  ipn(nodes[0].ns, '-6', 'addr', 'add', `${o.node1ip6}/64`, 'dev', 'up0', 'nodad');
  ipn(out, 'addr', 'add', `${o.ip4}/24`, 'dev', 'eth0');
  ipn(out, '-6', 'addr', 'add', `${o.ip6}/64`, 'dev', 'eth0', 'nodad');
  ipn(nodes[0].ns, 'route', 'add', 'default', 'via', o.ip4);
  ipn(nodes[0].ns, '-6', 'route', 'add', 'default', 'via', o.ip6);
  return { prefix, bridgeNs: fab, nodes, outside: o };
}

/** cluster.nodes as the config writes it. */
export function nodeMap(f: FabricSegment, nodes = f.nodes) {
  return Object.fromEntries(nodes.map((n) => [n.name, { podCIDRs: [n.pod4, n.pod6], internalIPs: [n.ip4, n.ip6] }]));
}

export interface ClusterDaemons {
  daemons: Map<string, Daemon>;
  start(node: FabricNode, network: object, extra?: object): Promise<Daemon>;
}

/** One knit per node, inside its netns; teardown stops each by PID and removes its dirs. */
export function clusterDaemons(t: Teardowns, f: FabricSegment): ClusterDaemons {
  const daemons = new Map<string, Daemon>();
  const prefixOf = (node: string) => `${f.prefix}${node}`.replace(/-/g, '');
  t.teardown(async () => {
    for (const [name, d] of daemons) await cleanupDaemon(d, { prefix: prefixOf(name) });
  });
  return {
    daemons,
    async start(node, network, extra = {}) {
      const d = await startDaemon({
        prefix: prefixOf(node.name),
        subnet: node.pod4,
        netns: node.ns,
        config: { networks: [network], cluster: { nodeName: node.name, nodes: nodeMap(f), clusterCIDRs: [], serviceCIDRs: [] }, ...extra },
      });
      daemons.set(node.name, d);
      return d;
    },
  };
}

/** A TCP echo server in ns on port; answers each connection with the address it came from. */
export function tcpServer(t: ExecutionContext, ns: string, port: number): ChildProcess {
  // A connection reset by its peer (a stream a policy cut, whose client's kernel resets the
  // server's retransmissions once a later change lets them through) ends that connection, not
  // the server.
  const code = `const s=require('net').createServer((c)=>{c.on('error',()=>c.destroy());c.write('from '+c.remoteAddress.replace(/^::ffff:/,'')+'\\n');c.pipe(c)});s.listen(${port},'::',()=>console.log('listening'))`;
  const child = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  return child;
}

export function listening(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => child.stdout!.once('data', () => resolve()));
}

/** One TCP connection from ns: the server's first line (who it saw). */
export function tcpHello(ns: string, host: string, port: number): string {
  const code = `const c=require('net').connect(${port},'${host}');c.setTimeout(3000,()=>{console.log('timeout');process.exit(1)});c.once('data',(d)=>{process.stdout.write(String(d).split('\\n')[0]);c.destroy()})`;
  try {
    return sh(ns, process.execPath, '-e', code).trim();
  } catch {
    return '';
  }
}

/** A TCP stream from ns that sends a line every 50 ms for `ms` and checks each echo; resolves
 * with the lines echoed back (lost ones make it fewer) and whether the connection broke. */
export function tcpStream(ns: string, host: string, port: number, ms: number): Promise<{ sent: number; echoed: number; broke: boolean }> {
  const code = `const c=require('net').connect(${port},'${host}');let sent=0,buf='',broke=false;c.on('error',()=>{broke=true});c.on('close',()=>{broke=broke||sent<${Math.floor(ms / 50)}});c.on('data',(d)=>buf+=d);c.once('connect',()=>{const t=setInterval(()=>{if(sent>=${Math.floor(ms / 50)}){clearInterval(t);setTimeout(()=>{const echoed=buf.split('\\n').filter((l)=>l.startsWith('x')).length;console.log(JSON.stringify({sent,echoed,broke}));process.exit(0)},1500);return}c.write('x'+(sent++)+'\\n')},50)})`;
  return new Promise((resolve, reject) => {
    const child = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.on('close', () => {
      try {
        resolve(JSON.parse(out));
      } catch {
        reject(new Error(`tcp stream from ${ns} printed ${out}`));
      }
    });
  });
}

/** `ip monitor route` in ns until stop(): every line it printed. */
export function routeMonitor(ns: string) {
  const child = spawn('ip', ['-n', ns, 'monitor', 'route'], { stdio: ['ignore', 'pipe', 'ignore'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  return {
    stop(): string[] {
      child.kill('SIGKILL');
      return out.split('\n').filter(Boolean);
    },
  };
}

/** The API server listens on the host's loopback; a node netns has its own. A relay carries
 * the TLS stream through a unix socket (the file system is shared): 127.0.0.1:port inside the
 * node netns → the socket → 127.0.0.1:port on the host. A child process, ended by PID with
 * stop(); `up` rejects if it exits before it listens. */
export function startRelay(port: number, sock: string, ns?: string): { up: Promise<void>; stop(): void } {
  const code = ns
    ? `const n=require('net');n.createServer((c)=>{const u=n.connect(${JSON.stringify(sock)});c.pipe(u).pipe(c);u.on('error',()=>c.destroy());c.on('error',()=>u.destroy())}).listen(${port},'127.0.0.1',()=>console.log('up'))`
    : `const n=require('net');n.createServer((c)=>{const u=n.connect(${port},'127.0.0.1');c.pipe(u).pipe(c);u.on('error',()=>c.destroy());c.on('error',()=>u.destroy())}).listen(${JSON.stringify(sock)},()=>console.log('up'))`;
  const argv = ns ? ['ip', 'netns', 'exec', ns, process.execPath, '-e', code] : [process.execPath, '-e', code];
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'inherit'] });
  const up = new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (c) => reject(new Error(`relay ${ns ?? 'host'} exited ${c}`)));
  });
  return { up, stop: () => void (child.exitCode === null && child.kill('SIGKILL')) };
}

/** startRelay, ended by the test's teardown. */
export function apiRelay(t: { teardown(fn: () => void): void }, port: number, sock: string, ns?: string): Promise<void> {
  const r = startRelay(port, sock, ns);
  t.teardown(r.stop);
  return r.up;
}

/** Polls an async condition until it holds (no timing threshold: the deadline only ends a hang). */
export async function until(fn: () => Promise<boolean>, what: string, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await fn())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export { removeNetns };
