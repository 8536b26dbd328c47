// JSON text read without a YAML parser. Config files and kubeconfigs are YAML, which reads JSON
// as well; when the text is a JSON object that repeats no key, JSON.parse gives the same value,
// and the `yaml` package, which costs a daemon ~2 MiB for as long as it runs (bench/README.md,
// "Memory" and "The DRA driver: memory and restart"), is not loaded. A repeated key is left to
// the YAML parser, which refuses it where JSON.parse would keep the last.
import { createRequire } from 'node:module';

let yamlModule: typeof import('yaml') | undefined;
/** The yaml package, loaded on first use (synchronously: config and kubeconfig loading are). */
export const yamlPackage = () => (yamlModule ??= createRequire(import.meta.url)('yaml') as typeof import('yaml'));

/** text as JSON, when it is a JSON object that repeats no key; otherwise the YAML parser reads it
 * (and says what is wrong, where). */
export function plainJson(text: string): { value: unknown } | undefined {
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
