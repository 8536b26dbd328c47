// The contenders taking part in a run: set up each and check one probe attach with iproute2
// (a failure skips that contender, with the reason in the report), hand each its own network
// and sandbox source, drop one that keeps failing from the current phase, tear all down.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Contender } from './contender.js';
import type { ContenderInfo } from './results.js';
import { freshSandboxes, SandboxSource } from './sandboxes.js';
import { probe } from './verify.js';
import type { World } from './world.js';
import type { Progress } from './progress.js';

export interface Entry {
  contender: Contender;
  source: SandboxSource;
  info: ContenderInfo;
}

/** A contender whose calls failed this many times is dropped from the rest of the run. */
const MAX_ERRORS = 5;

export class Lineup {
  readonly infos: ContenderInfo[] = [];
  private readonly active: Entry[] = [];
  private readonly setUp: Contender[] = [];
  private readonly errorCounts = new Map<string, number>();
  /** Set-up entries in report order, and those out of the current phase. */
  private readonly order: Entry[] = [];
  private readonly dropped: Entry[] = [];
  private phase = 'setup';

  constructor(
    private readonly world: World,
    private readonly progress: Progress,
  ) {}

  get entries(): readonly Entry[] {
    return this.active;
  }

  get network(): Entry[] {
    return this.active.filter((e) => e.contender.kind === 'network');
  }

  /** tag: one character, unique per contender, used in link and netns names. */
  async add(contender: Contender, tag: string): Promise<void> {
    const info: ContenderInfo = { name: contender.name, label: contender.label, kind: contender.kind };
    this.infos.push(info);
    const scratch = path.join(this.world.scratch, contender.name);
    mkdirSync(scratch, { recursive: true });
    this.setUp.push(contender); // teardown copes with partial setups
    let step = 'setup';
    try {
      const network = await this.world.network(tag);
      await contender.setup({ network, scratch, prefix: this.world.prefix, tag, trackPid: (pid, what) => this.world.trackPid(pid, what) });
      const source = new SandboxSource(this.world, contender, tag);
      if (contender.kind === 'network') {
        step = 'check of a probe attach';
        const [[sb]] = await freshSandboxes(this.world, [[source, 1]]);
        source.done(sb);
        await probe(contender, network, sb);
      }
      const entry = { contender, source, info };
      this.active.push(entry);
      this.order.push(entry);
    } catch (e) {
      info.skipped = `${step} failed: ${(e as Error).message}`;
      this.progress.note(`${contender.name}: skipped (${info.skipped})`);
    }
  }

  /**
   * Start a phase: contenders dropped from the previous one come back (a failure that shows
   * only under churn should not hide the scale figures), error counts start at zero.
   */
  beginPhase(name: string): void {
    this.phase = name;
    this.errorCounts.clear();
    for (const e of this.dropped.splice(0)) this.active.push(e);
    this.active.sort((a, b) => this.order.indexOf(a) - this.order.indexOf(b));
  }

  /** Count a failed call; past MAX_ERRORS the contender leaves the current phase. */
  failed(entry: Entry, message: string): void {
    if (this.world.closing) return; // failures caused by the cleanup itself
    const n = (this.errorCounts.get(entry.contender.name) ?? 0) + 1;
    this.errorCounts.set(entry.contender.name, n);
    this.progress.note(`${entry.contender.name}: ${message}`);
    if (n >= MAX_ERRORS && this.active.includes(entry)) {
      this.active.splice(this.active.indexOf(entry), 1);
      this.dropped.push(entry);
      (entry.info.dropped ??= []).push(`${this.phase}: dropped after ${n} failed calls; last: ${message}`);
      this.progress.note(`${entry.contender.name}: dropped from ${this.phase} after ${n} failures`);
    }
  }

  async teardown(): Promise<void> {
    for (const c of this.setUp.reverse()) {
      try {
        await c.teardown();
      } catch (e) {
        this.progress.note(`${c.name}: teardown: ${(e as Error).message}`);
      }
    }
    this.setUp.length = 0;
  }
}
