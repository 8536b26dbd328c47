// A structural check of a protobuf body against its message type, before protobufjs decodes
// it. protobufjs reads a known field by the type the .proto declares whatever wire type the
// sender used (a varint where a string belongs is read as a length and then as text), and it
// recurses without a bound; both turn a malformed body into something acted upon or into
// deep recursion. The rules are the encoding's (protobuf.dev/programming-guides/encoding):
// each known field comes with the wire type of its declared type (repeated scalars also packed,
// wire type 2), strings are UTF-8, lengths stay inside their message, and unknown fields are
// skipped as the encoding allows. Messages nest at most MAX_DEPTH deep.
import { isUtf8 } from 'node:buffer';

/** The parts of a google.protobuf.DescriptorProto (as @grpc/proto-loader gives it) we read. */
export interface MessageDescriptor {
  name: string;
  field: { name: string; number: number; label: string; type: string; typeName: string }[];
  nestedType?: MessageDescriptor[];
}

export const MAX_DEPTH = 64;

const VARINT = 0;
const I64 = 1;
const LEN = 2;
const I32 = 5;

const wireTypeOf: Record<string, number> = {
  TYPE_DOUBLE: I64, TYPE_FIXED64: I64, TYPE_SFIXED64: I64,
  TYPE_FLOAT: I32, TYPE_FIXED32: I32, TYPE_SFIXED32: I32,
  TYPE_STRING: LEN, TYPE_BYTES: LEN, TYPE_MESSAGE: LEN,
};
const wireNames = ['varint', '64-bit', 'length-delimited', 'group start', 'group end', '32-bit'];

class Malformed extends Error {}

type Field = MessageDescriptor['field'][number];
const NO_FIELDS: ReadonlyMap<number, Field> = new Map();
/** Each message type's fields by number, made once per type rather than at every walk. */
const fieldMaps = new WeakMap<MessageDescriptor, ReadonlyMap<number, Field>>();
function fieldsOf(type: MessageDescriptor | undefined): ReadonlyMap<number, Field> {
  if (!type) return NO_FIELDS;
  let fields = fieldMaps.get(type);
  if (!fields) fieldMaps.set(type, (fields = new Map(type.field.map((f) => [f.number, f]))));
  return fields;
}

/** Why buf is not a well-formed `typeName` (full name, e.g. "knit.v1.AttachRequest"), or undefined. */
export function wireProblem(buf: Uint8Array, typeName: string, types: ReadonlyMap<string, MessageDescriptor>): string | undefined {
  try {
    walk(buf, 0, buf.length, typeName, types, 0, '');
    return undefined;
  } catch (err) {
    if (err instanceof Malformed) return err.message;
    throw err;
  }
}

function walk(buf: Uint8Array, start: number, end: number, typeName: string, types: ReadonlyMap<string, MessageDescriptor>, depth: number, at: string): void {
  if (depth > MAX_DEPTH) throw new Malformed(`messages nest more than ${MAX_DEPTH} deep in field ${at.split('.')[0]}`);
  const fields = fieldsOf(types.get(typeName));
  let pos = start;
  const varint = (): number => {
    let value = 0;
    for (let i = 0, scale = 1; i < 10; i++, scale *= 128) {
      if (pos >= end) throw new Malformed(`a varint runs past the end of ${at || 'the request'}`);
      const byte = buf[pos++]!;
      value += (byte & 0x7f) * scale;
      if (!(byte & 0x80)) return value;
    }
    throw new Malformed(`a varint longer than 10 bytes in ${at || 'the request'}`);
  };
  /** Skips field number's n bytes of payload. */
  const skip = (n: number, number: number, field: Field | undefined) => {
    if (n > end - pos) throw new Malformed(`field ${fieldPath(at, number, field)} runs past the end of ${at || 'the request'}`);
    pos += n;
  };
  while (pos < end) {
    const tag = varint();
    const number = Math.floor(tag / 8);
    const wire = tag % 8;
    if (number < 1 || number > 0x1fffffff) throw new Malformed(`field number ${number} is out of range in ${at || 'the request'}`);
    const field = fields.get(number);
    if (field) {
      const expected = wireTypeOf[field.type] ?? VARINT;
      const packed = field.label === 'LABEL_REPEATED' && expected !== LEN && wire === LEN;
      if (wire !== expected && !packed) {
        throw new Malformed(`field ${fieldPath(at, number, field)} came as ${wireNames[wire] ?? `wire type ${wire}`}; its type ${field.type.replace('TYPE_', '').toLowerCase()} is sent as ${wireNames[expected]}`);
      }
    }
    switch (wire) {
      case VARINT: varint(); break;
      case I64: skip(8, number, field); break;
      case I32: skip(4, number, field); break;
      case LEN: {
        const length = varint();
        const from = pos;
        skip(length, number, field);
        if (field?.type === 'TYPE_MESSAGE') walk(buf, from, pos, resolve(field.typeName, typeName, types), types, depth + 1, fieldPath(at, number, field));
        else if (field?.type === 'TYPE_STRING' && !isUtf8(buf.subarray(from, pos))) throw new Malformed(`field ${fieldPath(at, number, field)} is not valid UTF-8`);
        break;
      }
      default:
        throw new Malformed(`field ${fieldPath(at, number, field)} uses wire type ${wire} (${wireNames[wire] ?? 'none'}), which knit's messages never use`);
    }
  }
}

/** A field's path for a message about it ("interfaces.mac", "#17" for an unknown one): made
 * only when something is said about the field, or a message nests in it, not for every field. */
function fieldPath(at: string, number: number, field: Field | undefined): string {
  if (field) return at ? `${at}.${field.name}` : field.name;
  return `${at ? `${at}.` : ''}#${number}`;
}

/** A field's type name as the .proto wrote it ("Labels", "AttachRequest", "google.protobuf.Struct"),
 * looked up as protobuf scopes it: in the message, then each enclosing scope outwards. */
function resolve(name: string, within: string, types: ReadonlyMap<string, MessageDescriptor>): string {
  if (name.startsWith('.')) return name.slice(1);
  for (let scope = within; scope; scope = scope.slice(0, Math.max(0, scope.lastIndexOf('.')))) {
    if (types.has(`${scope}.${name}`)) return `${scope}.${name}`;
  }
  return name;
}

/** Every message type of some descriptors by full name, nested ones ("knit.v1.AttachRequest.Labels") too. */
export function indexTypes(entries: Iterable<[string, MessageDescriptor]>): Map<string, MessageDescriptor> {
  const out = new Map<string, MessageDescriptor>();
  const add = (name: string, d: MessageDescriptor) => {
    out.set(name, d);
    for (const nested of d.nestedType ?? []) add(`${name}.${nested.name}`, nested);
  };
  for (const [name, d] of entries) add(name, d);
  return out;
}
