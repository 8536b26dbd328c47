// JSON as Go's encoding/json reads and writes it, where knit must agree with Go programs byte for
// byte or key for key: Multus, the CNI plugins and containerd are Go, and so are the readers of
// what knit writes (KubeVirt reads network-status).

/**
 * A key of an object as encoding/json's Unmarshal matches a struct field: the exact key first,
 * then any key equal to it without regard to case (encoding/json, "Unmarshal": "preferring an
 * exact match but also accepting a case-insensitive match").
 */
export function goField(o: Record<string, unknown>, key: string): unknown {
  if (Object.hasOwn(o, key)) return o[key];
  const lower = key.toLowerCase();
  const k = Object.keys(o).find((x) => x.toLowerCase() === lower);
  return k === undefined ? undefined : o[k];
}

const escapes: Record<string, string> = { '<': '\\u003c', '>': '\\u003e', '&': '\\u0026', '\u2028': '\\u2028', '\u2029': '\\u2029' };

/**
 * json.MarshalIndent(v, "", "    "): JSON.stringify with four spaces is the same layout (one
 * member a line, `"key": value`, `{}` and `[]` when empty); Go also escapes <, > and & (its
 * HTML-safe default) and U+2028/U+2029, which only occur inside strings.
 */
export function goMarshalIndent(v: unknown): string {
  return JSON.stringify(v, null, 4).replace(/[<>&\u2028\u2029]/g, (c) => escapes[c]!);
}
