// Helpers for the netns / fd-passing / monitor kernel tests: private run dirs, independent
// observers (nsenter + ip, stat, /proc/self/mountinfo, /proc/self/fd), and a child process
// for exact fd and thread counts (ava runs test files as worker threads of one process, so
// /proc/self/fd there also shows other files' fds).
import type { ExecutionContext } from 'ava';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { must, run } from '../fixtures/exec.js';

/**
 * A fresh directory under /tmp to use as a netns run dir. Teardown lazily unmounts every pin
 * inside it and the dir's own self-bind, then removes it — also when the test failed.
 */
export function tempRunDir(t: ExecutionContext, prefix: string): string {
  const dir = mkdtempSync(`/tmp/${prefix}run-`);
  t.teardown(() => removeRunDir(dir));
  return dir;
}

export async function removeRunDir(dir: string): Promise<void> {
  for (const m of mountsUnder(dir).reverse()) await run('umount', ['-l', m]);
  rmSync(dir, { recursive: true, force: true });
}

/** Mount points at or below dir, in /proc/self/mountinfo order. */
export function mountsUnder(dir: string): string[] {
  return mountinfo()
    .map((m) => m.mountPoint)
    .filter((p) => p === dir || p.startsWith(dir + '/'));
}

export interface MountEntry {
  root: string;
  mountPoint: string;
  optional: string[];
  fsType: string;
}

export function mountinfo(): MountEntry[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .trim()
    .split('\n')
    .map((line) => {
      const [pre, post] = line.split(' - ');
      const f = pre.split(' ');
      const unescape = (s: string) => s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
      return { root: unescape(f[3]), mountPoint: unescape(f[4]), optional: f.slice(6), fsType: post.split(' ')[0] };
    });
}

/** `stat -L` of a file: the identity a netns file has for everyone else. */
export async function statId(file: string): Promise<{ dev: number; ino: number }> {
  const [dev, ino] = (await must('stat', ['-L', '-c', '%d %i', file])).trim().split(' ').map(Number);
  return { dev, ino };
}

/** `ip -j <args>` run inside the netns at nsPath (works for any path, not only /run/netns). */
export async function ipIn(nsPath: string, ...args: string[]): Promise<unknown> {
  const out = await must('nsenter', [`--net=${nsPath}`, 'ip', '-j', ...args]);
  return out.trim() ? JSON.parse(out) : [];
}

export async function linkNamesIn(nsPath: string): Promise<string[]> {
  const links = (await ipIn(nsPath, 'link', 'show')) as { ifname: string }[];
  return links.map((l) => l.ifname).sort();
}

/** Netlink sockets that live in the netns at nsPath, other than the kernel's own (port 0). */
export async function userNetlinkSockets(nsPath: string): Promise<number> {
  const out = await must('nsenter', [`--net=${nsPath}`, 'cat', '/proc/net/netlink']);
  return out
    .trim()
    .split('\n')
    .slice(1)
    .filter((l) => Number(l.trim().split(/\s+/)[2]) !== 0).length;
}

/** Open fds of this process whose target (readlink) contains needle. */
export function fdsPointingAt(needle: string): number[] {
  const found: number[] = [];
  for (const name of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${name}`).includes(needle)) found.push(Number(name));
    } catch {
      // the fd readdir used itself is gone by now
    }
  }
  return found;
}

/** Polls check until it returns a value other than undefined, up to tries × delayMs. */
export async function eventually<T>(check: () => T | undefined, tries = 200, delayMs = 10): Promise<T> {
  for (let i = 0; i < tries; i++) {
    const v = check();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, delayMs));
  }
  throw new Error(`condition not met after ${tries} tries`);
}

const here = path.dirname(fileURLToPath(import.meta.url));

/**
 * Runs a scenario of ns-child.js in its own process and returns what it printed as JSON.
 * The child must exit by itself (no process.exit): a leaked handle or thread shows up as a
 * timeout here.
 */
export function runChild(scenario: string, args: string[], timeoutMs = 60_000): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(here, 'ns-child.js'), scenario, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (err += b.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`child scenario ${scenario} did not exit within ${timeoutMs} ms (a handle or thread left open?)\n${err}`));
    }, timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code !== 0) return reject(new Error(`child scenario ${scenario} exited ${code}: ${err.trim()}`));
      try {
        resolve(JSON.parse(out.trim().split('\n').pop() ?? '{}'));
      } catch {
        reject(new Error(`child scenario ${scenario} printed no JSON: ${out}\n${err}`));
      }
    });
  });
}
