// Progress while the bench runs: one line rewritten in place on a TTY, plain lines otherwise
// (at most one every few seconds, so a CI log stays readable).

export class Progress {
  private readonly tty: boolean;
  private phase = '';
  private total = 0;
  private done = 0;
  private lastPlain = 0;
  private started = 0;

  constructor(private readonly out: NodeJS.WriteStream = process.stderr) {
    this.tty = Boolean(out.isTTY);
  }

  /** Start a phase of `total` steps (0: unknown). */
  begin(phase: string, total = 0): void {
    this.finishLine();
    this.phase = phase;
    this.total = total;
    this.done = 0;
    this.started = Date.now();
    this.lastPlain = 0;
    this.render('', true);
  }

  /** One more step done; detail says what (e.g. the contender). */
  tick(detail = '', steps = 1): void {
    this.done += steps;
    this.render(detail, false);
  }

  /** A message that must stay on screen (a skip, a warning). */
  note(line: string): void {
    this.clearLine();
    this.out.write(`${line}\n`);
    if (this.tty) this.render('', true); // a plain log needs no repeat of the phase line
  }

  end(summary = ''): void {
    const secs = ((Date.now() - this.started) / 1000).toFixed(1);
    this.clearLine();
    this.out.write(`${this.phase}: done in ${secs} s${summary ? ` — ${summary}` : ''}\n`);
    this.phase = '';
  }

  private render(detail: string, force: boolean): void {
    if (!this.phase) return;
    const count = this.total ? `${this.done}/${this.total}` : `${this.done}`;
    const pct = this.total ? ` ${Math.floor((100 * this.done) / this.total)}%` : '';
    const line = `${this.phase} ${count}${pct}${detail ? ` ${detail}` : ''}`;
    if (this.tty) {
      const width = this.out.columns || 100;
      this.out.write(`\r\x1b[K${line.slice(0, width - 1)}`);
    } else if (force || Date.now() - this.lastPlain > 5000) {
      this.lastPlain = Date.now();
      this.out.write(`${line}\n`);
    }
  }

  private clearLine(): void {
    if (this.tty) this.out.write('\r\x1b[K');
  }

  private finishLine(): void {
    if (this.phase) this.end();
  }
}
