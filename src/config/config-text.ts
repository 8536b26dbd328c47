// Config file text -> value, with the line each key path starts on, so a config error can say
// "knit.yaml:14: networks[0].ipv4.subnet: ...". YAML 1.2 (the `yaml` package), which reads
// JSON as well: operators write the ConfigMap in the form they write everything else in.
// A repeated key is an error (in a config it is always a mistake), not "last one wins".
// A JSON file that parses with JSON.parse and repeats no key is read without the YAML parser:
// the `yaml` package costs the daemon ~2 MiB of resident memory for as long as it runs
// (bench/README.md, "Memory"), so it is loaded only for YAML text, or to say where a problem is.
import type { Node } from 'yaml';
import { plainJson, yamlPackage as yaml } from '../base/plain-json.js';

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
