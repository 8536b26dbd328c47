// google.protobuf.Struct <-> plain JSON values. proto-loader decodes a Struct as the raw
// message ({fields: {k: {kind, stringValue, ...}}}); core and users deal in plain objects.

export interface StructMsg {
  fields: Record<string, ValueMsg>;
}
export interface ValueMsg {
  kind?: string;
  nullValue?: unknown;
  numberValue?: number;
  stringValue?: string;
  boolValue?: boolean;
  structValue?: StructMsg;
  listValue?: { values: ValueMsg[] };
}

export function toValue(v: unknown): ValueMsg {
  if (v === null || v === undefined) return { nullValue: 'NULL_VALUE' };
  if (typeof v === 'number') return { numberValue: v };
  if (typeof v === 'bigint') return { numberValue: Number(v) };
  if (typeof v === 'string') return { stringValue: v };
  if (typeof v === 'boolean') return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(toValue) } };
  if (typeof v === 'object') return { structValue: toStruct(v as Record<string, unknown>) };
  return { stringValue: String(v) };
}

export function toStruct(obj: object): StructMsg {
  const fields: Record<string, ValueMsg> = {};
  for (const [k, v] of Object.entries(obj)) if (v !== undefined) fields[k] = toValue(v);
  return { fields };
}

export function fromValue(v: ValueMsg | null | undefined): unknown {
  if (!v) return null;
  // `kind` names the set member when oneofs:true; fall back to whichever member is present.
  const kind = v.kind ?? Object.keys(v).find((k) => k.endsWith('Value'));
  switch (kind) {
    case 'numberValue':
      return v.numberValue;
    case 'stringValue':
      return v.stringValue;
    case 'boolValue':
      return v.boolValue;
    case 'structValue':
      return fromStruct(v.structValue);
    case 'listValue':
      return (v.listValue?.values ?? []).map(fromValue);
    default:
      return null;
  }
}

export function fromStruct(s: StructMsg | null | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(s?.fields ?? {})) out[k] = fromValue(v);
  return out;
}
