// Running commands: promise-based spawn that names the command in its error, with optional stdin.
import { spawn } from 'node:child_process';
import { native } from '../../src/net/native.js';

export interface ExecOptions {
  input?: string;
  env?: NodeJS.ProcessEnv;
  /** Resolve even on a non-zero exit (the caller reads code). */
  allowFailure?: boolean;
}

export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function exec(cmd: string, args: readonly string[], opts: ExecOptions = {}): Promise<ExecResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: opts.env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', (e) => reject(new Error(`${cmd}: ${e.message}`)));
    child.on('close', (code, signal) => {
      const r = { code: code ?? 128, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() };
      if (r.code === 0 || opts.allowFailure) resolve(r);
      else {
        const why = signal ? `killed by ${signal}` : `exit ${r.code}`;
        const detail = (r.stderr || r.stdout).trim().split('\n').slice(-3).join(' | ');
        reject(new Error(`${cmd} ${args.join(' ')}: ${why}${detail ? `: ${detail}` : ''}`));
      }
    });
    child.stdin.on('error', () => {}); // a child that exits early closes its stdin: the exit code says why
    child.stdin.end(opts.input ?? '');
  });
}

/** `ip -batch -` with the given lines; an empty list runs nothing. */
export async function ipBatch(lines: readonly string[], netns?: string, allowFailure = false): Promise<ExecResult> {
  if (lines.length === 0) return { code: 0, stdout: '', stderr: '' };
  const args = netns ? ['-n', netns, '-force', '-batch', '-'] : ['-force', '-batch', '-'];
  return exec('ip', args, { input: lines.join('\n') + '\n', allowFailure });
}

/** The environment a runtime gives a CNI plugin (or knit-cni) for one sandbox interface. */
export function cniEnv(command: 'ADD' | 'DEL', sandbox: { id: string; netnsPath: string; ifname: string }, cniPath: string): Record<string, string | undefined> {
  return { PATH: process.env.PATH, CNI_COMMAND: command, CNI_CONTAINERID: sandbox.id, CNI_NETNS: sandbox.netnsPath, CNI_IFNAME: sandbox.ifname, CNI_PATH: cniPath };
}

/** Waits (up to 2 s) until no link in the host's link group `group` is one `ours` claims: the
 * reaper of a contender that parks devices has deleted them. */
export async function untilReaped(group: number, ours: (link: { ifname?: string; ifalias?: string }) => boolean): Promise<void> {
  const until = Date.now() + 2000;
  while (Date.now() < until) {
    const r = await exec('ip', ['-j', 'link', 'show', 'group', String(group)], { allowFailure: true });
    // ip 6.1's JSON has an empty object for every link the group filter left out
    const links = JSON.parse(r.stdout || '[]') as Array<{ ifname?: string; ifalias?: string }>;
    if (!links.some((l) => l.ifname && ours(l))) return;
    await new Promise((res) => setTimeout(res, 5));
  }
}

/** Execs a CNI-style binary (knit-cni, a plugin) with exactly env and stdin, as a runtime does:
 * posix_spawn (vfork), as a Go runtime's os/exec does, not Node's fork of this process, whose
 * cost grows with the bench's own size and which no runtime pays (bench/README.md). */
export async function spawnAsRuntime(file: string, env: Record<string, string | undefined>, stdin: string): Promise<ExecResult> {
  const vars = Object.entries(env).map(([k, v]) => `${k}=${v ?? ''}`);
  const r = (await native.spawnAndWait(file, vars, stdin, 60_000)) as { code: number | null; stdout: string; stderr: string };
  return { code: r.code ?? 128, stdout: r.stdout, stderr: r.stderr };
}
