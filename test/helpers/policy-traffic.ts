// Traffic for the NetworkPolicy kernel tests, with real sockets: a UDP listener that counts
// what reaches it, a UDP sender that fires a datagram every millisecond (optionally from the
// moment a pod's eth0 exists), and nft's own counters as the independent observer of drops.
import type { ExecutionContext } from 'ava';
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';

/** A UDP listener in ns on port (both families): each datagram's source, one per line. */
export function udpListener(t: Pick<ExecutionContext, 'teardown'>, ns: string, port: number) {
  const code = `const s=require('dgram').createSocket({type:'udp6'});s.on('message',(m,r)=>console.log(r.address.replace(/^::ffff:/,'')));s.bind(${port},'::',()=>console.log('listening'))`;
  const child = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => void (child.exitCode === null && child.kill('SIGKILL')));
  let out = '';
  const ready = new Promise<void>((resolve) => child.stdout.on('data', (d) => {
    out += d;
    if (out.includes('listening')) resolve();
  }));
  return { ready, received: () => out.split('\n').filter((l) => l && l !== 'listening') };
}

/** From ns, a datagram to host:port every millisecond until stop() (sends that fail, before a
 * route exists, are counted apart). With waitFor, it starts the moment that link exists in ns
 * (a pod's eth0 being made). */
export function udpFlood(ns: string, host: string, port: number, waitFor?: string) {
  const code = `const fs=require('fs'),d=require('dgram');let sent=0,failed=0;const s=d.createSocket('${host.includes(':') ? 'udp6' : 'udp4'}');s.on('error',()=>{});
process.on('SIGTERM',()=>{console.log(JSON.stringify({sent,failed}));process.exit(0)});console.log('started');
const go=()=>{const tick=()=>{s.send('x',${port},'${host}',(e)=>{if(e)failed++;else sent++});setTimeout(tick,1)};tick()};
${waitFor ? `const w=()=>fs.existsSync('/sys/class/net/${waitFor}')?go():setImmediate(w);w()` : 'go()'}`;
  const child = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  const started = new Promise<void>((resolve) => child.stdout.on('data', (d) => {
    out += d;
    if (out.includes('started')) resolve();
  }));
  const done = new Promise<{ sent: number; failed: number }>((resolve, reject) => child.on('close', () => {
    try {
      resolve(JSON.parse(out.trim().split('\n').pop()!));
    } catch {
      reject(new Error(`udp flood from ${ns} printed ${out}`));
    }
  }));
  // Stopped only once it runs: a SIGTERM before its handler is set would lose its count.
  return { started, stop: () => started.then(() => (child.kill('SIGTERM'), done)) };
}

/** A TCP connection from ns to host:port that sends a line every 50 ms and counts the echoes,
 * until stop(): sent(), echoed() and broke() (an error or a close) so far. */
export function tcpEchoStream(t: Pick<ExecutionContext, 'teardown'>, ns: string, host: string, port: number) {
  const code = `const c=require('net').connect(${port},'${host}');let sent=0,on=true;c.on('error',()=>console.log('broke'));c.on('close',()=>console.log('broke'));c.on('data',(d)=>{for(const l of String(d).split('\\n'))if(l.startsWith('x'))console.log('e')});c.once('connect',()=>setInterval(()=>{if(on){c.write('x'+(sent++)+'\\n');console.log('s')}},50));process.on('SIGUSR1',()=>{on=false})`;
  const child = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => void (child.exitCode === null && child.kill('SIGKILL')));
  let echoes = 0;
  let sent = 0;
  let broke = false;
  child.stdout.on('data', (d) => {
    for (const l of String(d).split('\n')) {
      if (l === 'e') echoes++;
      else if (l === 's') sent++;
      else if (l === 'broke') broke = true;
    }
  });
  return { echoed: () => echoes, sent: () => sent, broke: () => broke, pause: () => void child.kill('SIGUSR1'), stop: () => void child.kill('SIGKILL') };
}

/** nft -j list of knit's policy table in ns (undefined: this netns): named counters' packets by name. */
export function policyCounters(ns: string | undefined, table: string): Record<string, number> {
  const argv = ['/usr/sbin/nft', '-j', 'list', 'counters', 'table', 'inet', table];
  const out = JSON.parse(ns ? execFileSync('ip', ['netns', 'exec', ns, ...argv], { encoding: 'utf8' }) : execFileSync(argv[0]!, argv.slice(1), { encoding: 'utf8' }));
  return Object.fromEntries(out.nftables.filter((x: any) => x.counter).map((x: any) => [x.counter.name, x.counter.packets]));
}

/** nft -j list table: the maps' elements (address → chain) and the sets' names. */
export function policyTableJson(ns: string, table: string): { maps: Record<string, Record<string, string>>; sets: string[]; chains: string[] } {
  const out = JSON.parse(execFileSync('ip', ['netns', 'exec', ns, '/usr/sbin/nft', '-j', 'list', 'table', 'inet', table], { encoding: 'utf8' }));
  const maps: Record<string, Record<string, string>> = {};
  const sets: string[] = [];
  const chains: string[] = [];
  for (const o of out.nftables) {
    if (o.map) maps[o.map.name] = Object.fromEntries((o.map.elem ?? []).map(([k, v]: [string, any]) => [k, v.jump.target]));
    if (o.set) sets.push(o.set.name);
    if (o.chain) chains.push(o.chain.name);
  }
  return { maps, sets, chains };
}
