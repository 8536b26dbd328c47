// Human output: aligned tables and short lists. --json bypasses all of this.

/** Columns padded to their widest cell, two spaces apart; the last column is not padded. */
export function table(header: string[], rows: string[][]): string {
  const all = [header, ...rows];
  const widths = header.map((_, c) => Math.max(...all.map((r) => (r[c] ?? '').length)));
  return all
    .map((r) => r.map((cell, c) => (c === r.length - 1 ? cell : (cell ?? '').padEnd(widths[c]!))).join('  ').trimEnd())
    .join('\n');
}

/** proto-loader's google.protobuf.Struct ({fields:{k:{kind,...}}}) turned into plain JSON, deeply. */
export function plain(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(plain);
  if (!v || typeof v !== 'object') return v;
  const o = v as Record<string, unknown>;
  if (isStruct(o)) return structToJson(o);
  // proto-loader's oneofs option adds a "_field" key naming the set member of each optional
  // field: loader bookkeeping, not part of the answer.
  return Object.fromEntries(Object.entries(o).filter(([k]) => !k.startsWith('_')).map(([k, x]) => [k, plain(x)]));
}

function isStruct(o: Record<string, unknown>): o is { fields: Record<string, Record<string, unknown>> } {
  const keys = Object.keys(o);
  if (keys.length !== 1 || keys[0] !== 'fields' || !o.fields || typeof o.fields !== 'object') return false;
  return Object.values(o.fields as object).every((x) => x && typeof x === 'object' && 'kind' in x);
}

function valueToJson(v: Record<string, unknown>): unknown {
  switch (v.kind) {
    case 'structValue':
      return structToJson(v.structValue as { fields: Record<string, Record<string, unknown>> });
    case 'listValue':
      return ((v.listValue as { values?: Record<string, unknown>[] }).values ?? []).map(valueToJson);
    case 'nullValue':
      return null;
    default:
      return v[v.kind as string];
  }
}

function structToJson(s: { fields: Record<string, Record<string, unknown>> }): Record<string, unknown> {
  return Object.fromEntries(Object.entries(s.fields ?? {}).map(([k, v]) => [k, valueToJson(v)]));
}

export function json(v: unknown): string {
  return JSON.stringify(plain(v), null, 2);
}
