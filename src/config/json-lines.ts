// A small JSON parser that also remembers on which line each key path starts, so a config
// error can say "config.json:14: networks[0].ipv4.subnet: ...". JSON.parse gives no positions.
// Strings and numbers are decoded by JSON.parse/Number after a strict grammar check, so
// values come out exactly as JSON.parse would make them. Unlike JSON.parse, a repeated key
// is an error (in a config it is always a mistake), and a leading BOM is skipped.

export type PathSegment = string | number;

export class JsonSyntaxError extends Error {
  constructor(readonly line: number, readonly column: number, readonly reason: string) {
    super(`line ${line}, column ${column}: ${reason}`);
    this.name = 'JsonSyntaxError';
  }
}

export interface JsonWithLines {
  value: unknown;
  /** formatKeyPath(path) -> 1-based line where that member's key (or that element) starts. */
  lines: Map<string, number>;
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** `networks[0].ipv4.subnet`; keys that are not identifiers as `["a key"]`; root is "". */
export function formatKeyPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else if (typeof seg === 'string' && IDENTIFIER.test(seg)) out += out ? `.${seg}` : seg;
    else out += `[${JSON.stringify(String(seg))}]`;
  }
  return out;
}

/** The line of the deepest recorded ancestor of path (a missing key reports its object). */
export function lineOf(lines: Map<string, number>, path: readonly PropertyKey[]): number | undefined {
  for (let n = path.length; n >= 0; n--) {
    const line = lines.get(formatKeyPath(path.slice(0, n)));
    if (line !== undefined) return line;
  }
  return undefined;
}

const STRING = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y;
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const MAX_DEPTH = 256;

export function parseJsonWithLines(text: string): JsonWithLines {
  return new Parser(text).parseDocument();
}

class Parser {
  private i = 0;
  private line = 1;
  private lineStart = 0;
  private readonly lines = new Map<string, number>();

  constructor(private readonly text: string) {
    if (text.charCodeAt(0) === 0xfeff) this.i = this.lineStart = 1;
  }

  parseDocument(): JsonWithLines {
    this.skipSpace();
    if (this.i >= this.text.length) this.fail('the file is empty');
    const value = this.parseValue([], 0);
    this.skipSpace();
    if (this.i < this.text.length) this.fail(`unexpected ${this.describeHere()} after the end of the document`);
    return { value, lines: this.lines };
  }

  private parseValue(path: PathSegment[], depth: number): unknown {
    if (depth > MAX_DEPTH) this.fail(`nested deeper than ${MAX_DEPTH} levels`);
    this.lines.set(formatKeyPath(path), this.line);
    const ch = this.text[this.i];
    if (ch === '{') return this.parseObject(path, depth);
    if (ch === '[') return this.parseArray(path, depth);
    if (ch === '"') return this.parseString();
    if (ch === '-' || (ch >= '0' && ch <= '9')) return this.parseNumber();
    for (const [word, value] of [['true', true], ['false', false], ['null', null]] as const) {
      if (this.text.startsWith(word, this.i)) {
        this.i += word.length;
        return value;
      }
    }
    return this.fail(`expected a value, found ${this.describeHere()}`);
  }

  private parseObject(path: PathSegment[], depth: number): Record<string, unknown> {
    const obj: Record<string, unknown> = {};
    this.i++; // {
    this.skipSpace();
    if (this.text[this.i] === '}') {
      this.i++;
      return obj;
    }
    for (;;) {
      if (this.text[this.i] !== '"') this.fail(`expected a key in double quotes, found ${this.describeHere()}`);
      const keyAt = this.position();
      const key = this.parseString();
      if (Object.prototype.hasOwnProperty.call(obj, key)) {
        this.fail(`duplicate key ${JSON.stringify(key)}${path.length ? ` in ${formatKeyPath(path)}` : ''}`, keyAt);
      }
      this.skipSpace();
      if (this.text[this.i] !== ':') this.fail(`expected ':' after key ${JSON.stringify(key)}, found ${this.describeHere()}`);
      this.i++;
      this.skipSpace();
      const childPath = [...path, key];
      const value = this.parseValue(childPath, depth + 1);
      this.lines.set(formatKeyPath(childPath), keyAt.line); // the key's line, not the value's
      // defineProperty: a "__proto__" key must become data, not change the prototype.
      Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
      this.skipSpace();
      const next = this.text[this.i];
      this.i++;
      if (next === '}') return obj;
      if (next !== ',') {
        this.i--;
        this.fail(`expected ',' or '}' after the value of ${JSON.stringify(key)}, found ${this.describeHere()}`);
      }
      this.skipSpace();
    }
  }

  private parseArray(path: PathSegment[], depth: number): unknown[] {
    const arr: unknown[] = [];
    this.i++; // [
    this.skipSpace();
    if (this.text[this.i] === ']') {
      this.i++;
      return arr;
    }
    for (;;) {
      arr.push(this.parseValue([...path, arr.length], depth + 1));
      this.skipSpace();
      const next = this.text[this.i];
      this.i++;
      if (next === ']') return arr;
      if (next !== ',') {
        this.i--;
        this.fail(`expected ',' or ']' in a list, found ${this.describeHere()}`);
      }
      this.skipSpace();
    }
  }

  private parseString(): string {
    STRING.lastIndex = this.i;
    const m = STRING.exec(this.text);
    if (!m) this.fail(this.text.indexOf('"', this.i + 1) < 0 ? 'unterminated string' : 'invalid string (a raw control character or a bad escape)');
    this.i += m![0].length;
    return JSON.parse(m![0]) as string;
  }

  private parseNumber(): number {
    NUMBER.lastIndex = this.i;
    const m = NUMBER.exec(this.text);
    if (!m) this.fail(`invalid number at ${this.describeHere()}`);
    this.i += m![0].length;
    return Number(m![0]);
  }

  private skipSpace(): void {
    for (; this.i < this.text.length; this.i++) {
      const ch = this.text[this.i];
      if (ch === '\n') {
        this.line++;
        this.lineStart = this.i + 1;
      } else if (ch !== ' ' && ch !== '\t' && ch !== '\r') {
        return;
      }
    }
  }

  private describeHere(): string {
    if (this.i >= this.text.length) return 'the end of the file';
    return JSON.stringify(this.text.slice(this.i, this.i + 10).split('\n')[0]);
  }

  private position(): { line: number; column: number } {
    return { line: this.line, column: this.i - this.lineStart + 1 };
  }

  private fail(reason: string, at = this.position()): never {
    throw new JsonSyntaxError(at.line, at.column, reason);
  }
}
