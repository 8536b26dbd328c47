// A watch answer is a stream of JSON objects, one per line, that arrives in chunks cut anywhere:
// mid-object, mid-line, even inside a multi-byte UTF-8 character. LineSplitter keeps the bytes of
// the unfinished line and hands out whole lines only, decoding each once it is complete.

export class LineTooLongError extends Error {
  constructor(readonly limit: number) {
    super(`a watch event is longer than ${limit} bytes`);
    this.name = 'LineTooLongError';
  }
}

/** The largest event accepted: above the API's own 3 MiB request limit times a margin for the
 * server's defaulted fields, far below what would hurt the daemon. */
export const MAX_LINE_BYTES = 16 << 20;

const NEWLINE = 0x0a;

export class LineSplitter {
  private parts: Buffer[] = [];
  private pending = 0;

  constructor(private readonly maxLineBytes = MAX_LINE_BYTES) {}

  /** The lines this chunk completes, without their "\n" (and "\r"); empty lines are skipped. */
  push(chunk: Buffer): string[] {
    const lines: string[] = [];
    let start = 0;
    for (let nl = chunk.indexOf(NEWLINE); nl !== -1; nl = chunk.indexOf(NEWLINE, start)) {
      this.take(chunk.subarray(start, nl), false);
      const line = this.flush();
      if (line) lines.push(line);
      start = nl + 1;
    }
    if (start < chunk.length) this.take(chunk.subarray(start), true);
    return lines;
  }

  /** The last line when the stream ended without a final "\n". */
  end(): string | undefined {
    return this.flush() || undefined;
  }

  private take(bytes: Buffer, kept: boolean): void {
    if (bytes.length === 0) return;
    this.pending += bytes.length;
    if (this.pending > this.maxLineBytes) {
      this.parts = [];
      this.pending = 0;
      throw new LineTooLongError(this.maxLineBytes);
    }
    // A tail kept past this call is copied: the caller's chunk may be a view into a pooled buffer.
    this.parts.push(kept ? Buffer.from(bytes) : bytes);
  }

  private flush(): string {
    const whole = this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts, this.pending);
    this.parts = [];
    this.pending = 0;
    let text = whole.toString('utf8');
    if (text.endsWith('\r')) text = text.slice(0, -1);
    return text.trim() ? text : '';
  }
}
