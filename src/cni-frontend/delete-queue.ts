// The DELs knit-cni wrote while the daemon was down (one request per "<container>.<ifname>.json",
// written durably by the shim): carried out at start-up, before the daemon serves. One that
// fails is retried with a doubling delay while the daemon runs; after `maxAttempts` it moves to
// "failed/" with a log line, a metric and a NodeStatus condition, so a DEL that cannot succeed
// is neither retried forever nor forgotten. Attempts survive restarts ("<file>.attempts").
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../api/logger.js';

export interface DeleteQueueOptions {
  dir: string;
  /** Runs one queued request; exitCode 0 = done (CniFrontend via server.ts answer()). */
  run: (request: string) => Promise<{ exitCode: number; stdout: string }>;
  log: Logger;
  /** Attempts before a DEL moves to failed/ (the start-up one included). */
  maxAttempts: number;
  /** Delay before the first retry; doubled for each further one. */
  backoffMs: number;
  /** Called when a DEL gives up (a metric). */
  onFailed?: (file: string) => void;
}

export const FAILED_DIR = 'failed';
const ATTEMPTS_SUFFIX = '.attempts';

export class DeleteQueue {
  private readonly timers = new Set<NodeJS.Timeout>();
  private stopped = false;

  constructor(private readonly o: DeleteQueueOptions) {}

  /** The start-up pass: every queued DEL once; the ones that fail are scheduled again. */
  async drain(): Promise<{ done: number; failed: number }> {
    let names: string[];
    try {
      names = (await readdir(this.o.dir)).filter((n) => n.endsWith('.json'));
    } catch {
      return { done: 0, failed: 0 };
    }
    let done = 0;
    let failed = 0;
    for (const name of names) {
      if (await this.attempt(name)) done++;
      else failed++;
    }
    // Half-written files of a shim that died mid-write.
    for (const n of await readdir(this.o.dir).catch(() => [])) if (n.startsWith('.tmp-')) await rm(path.join(this.o.dir, n), { force: true });
    return { done, failed };
  }

  /** The DELs that gave up, for NodeStatus (they may have left something behind). */
  failedFiles(): string[] {
    try {
      return readdirSync(path.join(this.o.dir, FAILED_DIR)).filter((n) => n.endsWith('.json'));
    } catch {
      return [];
    }
  }

  stop(): void {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }

  /** One try of one file; true when it is done (or gone). */
  private async attempt(name: string): Promise<boolean> {
    const file = path.join(this.o.dir, name);
    let request: string;
    try {
      request = await readFile(file, 'utf8');
    } catch {
      return true; // carried out meanwhile (or replaced by nothing)
    }
    const a = await this.o.run(request);
    if (a.exitCode === 0) {
      await rm(file, { force: true });
      await rm(file + ATTEMPTS_SUFFIX, { force: true });
      return true;
    }
    const attempts = (await this.attempts(file)) + 1;
    const cni = a.stdout.trim();
    if (attempts >= this.o.maxAttempts) {
      await this.giveUp(name, attempts, cni);
      return false;
    }
    await writeFile(file + ATTEMPTS_SUFFIX, `${attempts}\n`);
    const delayMs = this.o.backoffMs * 2 ** (attempts - 1);
    this.o.log.warn({ file, attempts, maxAttempts: this.o.maxAttempts, retryInMs: delayMs, cni }, 'queued CNI DEL failed; retrying');
    this.schedule(name, delayMs);
    return false;
  }

  private schedule(name: string, delayMs: number): void {
    if (this.stopped) return;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      this.attempt(name).catch((err: Error) => this.o.log.error({ file: name, err: err.message }, 'queued CNI DEL retry failed'));
    }, delayMs);
    this.timers.add(timer);
  }

  private async attempts(file: string): Promise<number> {
    const n = Number.parseInt(await readFile(file + ATTEMPTS_SUFFIX, 'utf8').catch(() => '0'), 10);
    return Number.isFinite(n) && n > 0 ? n : 0;
  }

  private async giveUp(name: string, attempts: number, cni: string): Promise<void> {
    const failedDir = path.join(this.o.dir, FAILED_DIR);
    await mkdir(failedDir, { recursive: true, mode: 0o700 });
    const target = path.join(failedDir, name);
    await rename(path.join(this.o.dir, name), target);
    await rm(path.join(this.o.dir, name + ATTEMPTS_SUFFIX), { force: true });
    this.o.log.error({ file: target, attempts, cni }, 'queued CNI DEL gave up; moved to failed/ (what it names may be left behind: remove it with knit detach, then delete the file)');
    this.o.onFailed?.(target);
  }
}
