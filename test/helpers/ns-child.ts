// Scenarios run in a child process by runChild() (ns-fixtures.ts), so fd and thread counts
// belong to the scenario alone. Each prints one JSON line and then must exit on its own.
// Usage: node ns-child.js <scenario> [args...]
import { execFileSync } from 'node:child_process';
import { readdirSync, readlinkSync } from 'node:fs';
import net from 'node:net';
import { createNetns, deleteNetns, identifyNetns, isHostNetns } from '../../src/net/netns.js';
import { isNetns } from './net-calls.js';
import { Monitor } from '../../src/net/monitor.js';
import { closeFd, replyWithFds, requestFds } from '../../src/net/fdpass.js';

function fds(): string[] {
  return readdirSync('/proc/self/fd')
    .map((n) => {
      try {
        return `${n}->${readlinkSync(`/proc/self/fd/${n}`)}`;
      } catch {
        return undefined; // the directory fd readdir used
      }
    })
    .filter((x): x is string => x !== undefined)
    .sort();
}

const threads = () => readdirSync('/proc/self/task').length;

async function identify([nsPath, regularFile, count]: string[]): Promise<object> {
  const cycle = () => {
    identifyNetns(nsPath);
    isNetns(nsPath);
    isHostNetns(nsPath);
    try {
      identifyNetns(regularFile);
    } catch {
      // expected: not a netns (the error path must close its fd too)
    }
  };
  cycle();
  const before = fds();
  for (let i = 0; i < Number(count); i++) cycle();
  return { before, after: fds() };
}

async function createDelete([runDir, count]: string[]): Promise<object> {
  const cycle = async (i: number) => {
    const p = `${runDir}/c${i}`;
    await createNetns(p);
    await deleteNetns(p);
  };
  await cycle(-1);
  const before = fds();
  const t0 = Date.now();
  for (let i = 0; i < Number(count); i++) await cycle(i);
  return { before, after: fds(), ms: Date.now() - t0, leftovers: readdirSync(runDir) };
}

async function monitor([nsPath, count]: string[]): Promise<object> {
  execFileSync('true'); // child_process keeps a /dev/null fd after its first spawn
  const warm = new Monitor(nsPath, ['link']);
  warm.close();
  const before = fds();
  const threadsBefore = threads();
  for (let i = 0; i < Number(count); i++) new Monitor(nsPath, ['link', 'ipv4-addr', 'ipv6-addr']).close();

  // One that really receives events, then closes with events possibly still queued.
  // (Toggling lo down and up makes at least one change whatever state it was in.)
  const m = new Monitor(nsPath, ['link']);
  try {
    const seen = m.waitFor((e) => e.type === 'link' && e.name === 'lo', 10_000);
    execFileSync('nsenter', [`--net=${nsPath}`, 'ip', 'link', 'set', 'lo', 'down']);
    execFileSync('nsenter', [`--net=${nsPath}`, 'ip', 'link', 'set', 'lo', 'up']);
    await seen;
    execFileSync('nsenter', [`--net=${nsPath}`, 'ip', 'link', 'set', 'lo', 'down']);
  } finally {
    m.close();
  }

  const openDuring = new Monitor(nsPath, ['link']);
  const threadsOpen = threads();
  const fdsOpen = fds().length;
  openDuring.close();
  return { before, after: fds(), threadsBefore, threadsAfter: threads(), threadsOpen, fdsOpen };
}

// Leaves a monitor open but unref()'d: the process must still exit by itself.
async function monitorUnref([nsPath]: string[]): Promise<object> {
  new Monitor(nsPath, ['link']).unref();
  return { open: true };
}

async function fdpass([dir, count]: string[]): Promise<object> {
  const sock = `${dir}/s.sock`;
  let connections = 0;
  const server = net.createServer((s) => {
    connections++;
    s.on('close', () => connections--);
    // fd 0 is /dev/null here (runChild ignores stdin): any open fd will do.
    s.once('data', () => void replyWithFds(s, Buffer.from('ok'), [0]));
  });
  // The server's end of a connection closes once libuv has read the client's EOF.
  const settled = async () => {
    for (let i = 0; i < 500 && connections > 0; i++) await new Promise((r) => setTimeout(r, 10));
  };
  await new Promise<void>((r) => server.listen(sock, r));
  const cycle = async () => {
    const reply = await requestFds(sock, Buffer.from('give'), 5000);
    reply.fds.forEach(closeFd);
  };
  await cycle();
  await settled();
  const before = fds();
  for (let i = 0; i < Number(count); i++) await cycle();
  await settled();
  const after = fds();
  await new Promise((r) => server.close(r));
  return { before, after };
}

const scenarios: Record<string, (args: string[]) => Promise<object>> = {
  identify,
  'create-delete': createDelete,
  monitor,
  'monitor-unref': monitorUnref,
  fdpass,
};

const [scenario, ...args] = process.argv.slice(2);
const fn = scenarios[scenario];
if (!fn) {
  console.error(`unknown scenario ${scenario}; known: ${Object.keys(scenarios).join(', ')}`);
  process.exitCode = 2;
} else {
  fn(args).then(
    (result) => console.log(JSON.stringify(result)),
    (err) => {
      console.error((err as Error).stack ?? String(err));
      process.exitCode = 1;
    },
  );
}
