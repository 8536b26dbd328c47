// Config file text -> value, with the line each key path starts on, so a config error can say
// "knit.yaml:14: networks[0].ipv4.subnet: ...". YAML 1.2 (the `yaml` package), which reads
// JSON as well: operators write the ConfigMap in the form they write everything else in.
// A repeated key is an error (in a config it is always a mistake), not "last one wins".
// A JSON file that parses with JSON.parse and repeats no key is read without the YAML parser:
// the `yaml` package costs the daemon ~2 MiB of resident memory for as long as it runs
// (bench/README.md, "Memory"), so it is loaded only for YAML text, or to say where a problem is.
import { createRequire } from 'node:module';
import type { Node } from 'yaml';

let yamlModule: typeof import('yaml') | undefined;
/** The yaml package, loaded on first use (synchronously: the config API is synchronous). */
const yaml = () => (yamlModule ??= createRequire(import.meta.url)('yaml') as typeof import('yaml'));

export class ConfigSyntaxError extends Error {
  constructor(readonly line: number, readonly column: number, readonly reason: string) {
    super(`line ${line}, column ${column}: ${reason}`);
    this.name = 'ConfigSyntaxError';
  }
}

export interface ConfigText {
  value: unknown;
  /** The 1-based line of path's deepest ancestor present in the file. */
  lineOf(path: readonly PropertyKey[]): number | undefined;
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

// The parser recurses per flow level and its error reporting blows up far below a stack
// overflow (100,000 '[' runs V8 out of memory): refuse absurd input before parsing it.
export const MAX_CONFIG_BYTES = 1 << 20;
const MAX_FLOW_DEPTH = 128;

export function parseConfigText(text: string): ConfigText {
  if (text.length > MAX_CONFIG_BYTES) throw new ConfigSyntaxError(1, 1, `the file is larger than ${MAX_CONFIG_BYTES} bytes`);
  refuseDeepFlow(text);
  const json = plainJson(text);
  if (json) {
    let parsed: ConfigText | undefined; // lines are needed only to place a problem
    return { value: json.value, lineOf: (path) => (parsed ??= parseYaml(text)).lineOf(path) };
  }
  return parseYaml(text);
}

/** text as JSON, when it is a JSON object that repeats no key; otherwise the YAML parser reads it
 * (and says what is wrong, where). */
function plainJson(text: string): { value: unknown } | undefined {
  if (!/^\s*\{/.test(text)) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  return repeatsKey(text) ? undefined : { value };
}

/** Whether an object in well-formed JSON text has a key twice (JSON.parse keeps the last). */
function repeatsKey(text: string): boolean {
  const open: (Set<string> | undefined)[] = []; // the keys of each enclosing object; undefined: an array
  let expectKey = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (ch === '"') {
      let end = i + 1;
      while (text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
      if (expectKey) {
        const keys = open[open.length - 1]!;
        const key = JSON.parse(text.slice(i, end + 1)) as string;
        if (keys.has(key)) return true;
        keys.add(key);
        expectKey = false;
      }
      i = end;
    } else if (ch === '{') {
      open.push(new Set());
      expectKey = true;
    } else if (ch === '[') open.push(undefined);
    else if (ch === '}' || ch === ']') open.pop();
    else if (ch === ',') expectKey = open[open.length - 1] !== undefined;
  }
  return false;
}

function parseYaml(text: string): ConfigText {
  const { LineCounter, parseDocument, isMap, isPair, isScalar, isSeq } = yaml();
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: true, version: '1.2', prettyErrors: true });
  const first = doc.errors[0];
  if (first) {
    const at = first.linePos?.[0] ?? { line: 1, col: 1 };
    throw new ConfigSyntaxError(at.line, at.col, describe(first.code, first.message));
  }
  if (doc.contents === null) {
    const end = lines.linePos(text.length);
    throw new ConfigSyntaxError(end.line, end.col, 'the file is empty');
  }
  const value = doc.toJS({ maxAliasCount: 100 });
  const lineAt = (node: Node | undefined | null) => (node?.range ? lines.linePos(node.range[0]).line : undefined);
  return {
    value,
    lineOf(path) {
      let node: unknown = doc.contents;
      let line = lineAt(doc.contents as Node);
      for (const seg of path) {
        let next: unknown;
        if (isMap(node)) {
          const pair = node.items.find((p) => isPair(p) && isScalar(p.key) && String(p.key.value) === String(seg));
          if (!pair) break;
          line = lineAt(pair.key as Node) ?? line;
          next = pair.value;
        } else if (isSeq(node) && typeof seg === 'number' && node.items[seg]) {
          next = node.items[seg];
          line = lineAt(next as Node) ?? line;
        } else {
          break;
        }
        node = next;
      }
      return line;
    },
  };
}

function describe(code: string, message: string): string {
  const head = message.split('\n')[0].replace(/ at line \d+, column \d+:?$/, '');
  return code === 'DUPLICATE_KEY' ? `${head} (a key is repeated)` : head;
}

function refuseDeepFlow(text: string): void {
  let depth = 0;
  let quote = '';
  let line = 1;
  let lineStart = 0;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (ch === '\n') {
      line++;
      lineStart = i + 1;
    } else if (quote) {
      if (ch === '\\' && quote === '"') i++;
      else if (ch === quote) quote = '';
    } else if (ch === '"' || ch === "'") {
      quote = ch;
    } else if (ch === '[' || ch === '{') {
      if (++depth > MAX_FLOW_DEPTH) throw new ConfigSyntaxError(line, i - lineStart + 1, `nested deeper than ${MAX_FLOW_DEPTH} levels`);
    } else if ((ch === ']' || ch === '}') && depth > 0) {
      depth--;
    }
  }
}
