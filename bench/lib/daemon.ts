// Starting a server child process and waiting until it can take calls: either it prints a
// line matching `ready`, or its unix socket appears. Its stdin is a pipe we keep open, so a
// child that watches stdin dies with the harness even on SIGKILL.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';

export interface DaemonOptions {
  what: string;
  cmd: string;
  args: readonly string[];
  env?: NodeJS.ProcessEnv;
  /** Ready when stdout or stderr has a line matching this... */
  readyLine?: RegExp;
  /** ...or when this path exists. */
  socket?: string;
  timeoutMs?: number;
}

export interface Daemon {
  child: ChildProcess;
  pid: number;
  /** The last output lines, for error messages. */
  tail(): string;
  stop(): Promise<void>;
}

export function startDaemon(opts: DaemonOptions): Promise<Daemon> {
  const child = spawn(opts.cmd, opts.args, { env: opts.env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] });
  let output = '';
  let exited = false;
  child.on('exit', () => (exited = true));
  const daemon: Daemon = {
    child,
    pid: child.pid ?? -1,
    tail: () => {
      // a stack trace's first line says what went wrong; otherwise the last lines
      const lines = output.trim().split('\n');
      const error = lines.find((l) => /\bError\b|error:/.test(l));
      return error ? error.trim() : lines.slice(-3).join(' | ');
    },
    stop: async () => {
      if (exited) return;
      const gone = new Promise<void>((r) => child.once('exit', () => r()));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
      await gone;
      clearTimeout(timer);
    },
  };
  return new Promise((resolve, reject) => {
    const timeout = opts.timeoutMs ?? 15000;
    let settled = false;
    const finish = (err?: Error) => {
      if (settled) return;
      settled = true;
      clearInterval(poll);
      clearTimeout(timer);
      if (err) {
        void daemon.stop();
        reject(err);
      } else resolve(daemon);
    };
    const onData = (b: Buffer) => {
      output = (output + b.toString()).slice(-4000);
      if (opts.readyLine && output.split('\n').some((l) => opts.readyLine!.test(l))) finish();
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.stdin!.on('error', () => {});
    child.on('error', (e) => finish(new Error(`${opts.what}: ${e.message}`)));
    child.on('exit', (code, signal) => finish(new Error(`${opts.what} exited (${signal ?? code}) before it was ready: ${daemon.tail()}`)));
    const poll = setInterval(() => {
      if (opts.socket && existsSync(opts.socket)) finish();
    }, 20);
    const timer = setTimeout(() => finish(new Error(`${opts.what} not ready after ${timeout} ms: ${daemon.tail()}`)), timeout);
  });
}

/** Resident set size of a process in KiB (VmRSS from /proc/<pid>/status), undefined if gone. */
export async function rssKiB(pid: number): Promise<number | undefined> {
  const { readFile } = await import('node:fs/promises');
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}
