// A long-lived child answering one stdout line per stdin line (the C floor's --serve mode):
// requests are queued so each answer goes to the request that caused it.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';

export class LineProcess {
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly waiting: Array<{ resolve: (line: string) => void; reject: (e: Error) => void }> = [];
  private exited?: Error;
  private stderr = '';

  constructor(readonly what: string, cmd: string, args: readonly string[]) {
    this.child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    createInterface({ input: this.child.stdout }).on('line', (line) => this.waiting.shift()?.resolve(line));
    this.child.stderr.on('data', (b: Buffer) => (this.stderr = (this.stderr + b.toString()).slice(-2000)));
    const fail = (why: string) => {
      this.exited = new Error(`${what} (pid ${this.child.pid}) ${why}${this.stderr ? `: ${this.stderr.trim()}` : ''}`);
      for (const w of this.waiting.splice(0)) w.reject(this.exited);
    };
    this.child.on('error', (e) => fail(`failed: ${e.message}`));
    this.child.on('exit', (code, signal) => fail(`exited (${signal ?? code})`));
    this.child.stdin.on('error', () => {}); // reported through 'exit'
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  request(line: string): Promise<string> {
    if (this.exited) return Promise.reject(this.exited);
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      this.child.stdin.write(`${line}\n`);
    });
  }

  /** Close stdin (the child exits at EOF) and wait, killing it if it lingers. */
  async close(): Promise<void> {
    if (this.exited) return;
    const gone = new Promise<void>((r) => this.child.once('exit', () => r()));
    this.child.stdin.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 2000);
    await gone;
    clearTimeout(timer);
  }
}
