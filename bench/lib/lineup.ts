// The contenders taking part in a run: set up each (a failed setup skips that contender, with
// the reason in the report), hand each its own network and sandbox source, drop one that keeps
// failing, tear all down at the end.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Contender } from './contender.js';
import type { ContenderInfo } from './results.js';
import { SandboxSource } from './sandboxes.js';
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
    try {
      await contender.setup({
        network: await this.world.network(tag),
        scratch,
        prefix: this.world.prefix,
        trackPid: (pid, what) => this.world.trackPid(pid, what),
      });
      this.active.push({ contender, source: new SandboxSource(this.world, contender, tag), info });
    } catch (e) {
      info.skipped = `setup failed: ${(e as Error).message}`;
      this.progress.note(`${contender.name}: skipped (${info.skipped})`);
    }
  }

  /** Count a failed call; past MAX_ERRORS the contender leaves the run. */
  failed(entry: Entry, message: string): void {
    const n = (this.errorCounts.get(entry.contender.name) ?? 0) + 1;
    this.errorCounts.set(entry.contender.name, n);
    this.progress.note(`${entry.contender.name}: ${message}`);
    if (n >= MAX_ERRORS && this.active.includes(entry)) {
      this.active.splice(this.active.indexOf(entry), 1);
      entry.info.skipped = `dropped after ${n} failed calls; last: ${message}`;
      this.progress.note(`${entry.contender.name}: dropped from the run after ${n} failures`);
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
