// A caller's mistakes at the API layer: bodies that are not the message they claim to be, values
// quoted by a bounded prefix, request limits, duplicate addresses, kernel name templates, long
// path components; and errors renamed to the field the caller sent.
import test from 'ava';
import * as grpc from '@grpc/grpc-js';
import { KnitError, quote, renameField } from '../../src/base/errors.js';
import { knitProto, kniProto, loadedMessageTypes } from '../../src/api/proto.js';
import { wireProblem, MAX_DEPTH } from '../../src/api/wire-check.js';
import { guardService, MalformedRequest } from '../../src/api/request-guard.js';
import { validateAttach, validateAddInterface, validateGarbageCollect } from '../../src/api/validate.js';
import { ifnameProblem, netnsPathProblem } from '../../src/api/rules.js';
import { LIMITS } from '../../src/api/limits.js';
import { toServiceError } from '../../src/api/status.js';
import { silentLogger } from '../../src/api/logger.js';

knitProto();
kniProto();
const types = loadedMessageTypes();

const varint = (n: number): number[] => (n > 127 ? [(n & 0x7f) | 0x80, ...varint(Math.floor(n / 128))] : [n]);
const len = (field: number, body: Buffer | string) => {
  const b = Buffer.from(body);
  return Buffer.from([...varint((field << 3) | 2), ...varint(b.length), ...b]);
};
const varintField = (field: number, v: number) => Buffer.from([...varint(field << 3), ...varint(v)]);

test('quote keeps short values whole and cuts long ones to a prefix that says how long they were', (t) => {
  t.is(quote('eth0'), '"eth0"');
  t.is(quote('a'.repeat(1000)), `"${'a'.repeat(64)}"… (1000 characters)`);
  t.is(quote('abcdef', 3), '"abc"… (6 characters)');
});

test('wire check: well-formed bodies pass, including unknown fields, packed and map entries', (t) => {
  const ok = Buffer.concat([
    len(1, 'sb'),
    len(5, '/run/netns/x'),
    varintField(6, 1), // runtime enum
    len(7, Buffer.concat([len(1, 'eth0'), len(5, '10.0.0.2/24'), len(7, Buffer.concat([len(1, 'k'), len(2, 'v')]))])),
    len(10, Buffer.concat([len(1, 'app'), len(2, 'web')])),
    varintField(99, 7), // unknown to this version: skipped, as the encoding allows
  ]);
  t.is(wireProblem(ok, 'knit.v1.AttachRequest', types), undefined);
  t.is(wireProblem(Buffer.alloc(0), 'knit.v1.AttachRequest', types), undefined);
});

test('wire check: wrong wire types, truncation, bad UTF-8, groups and deep nesting are named', (t) => {
  t.regex(wireProblem(varintField(5, 3), 'knit.v1.AttachRequest', types)!, /field netns_path came as varint; its type string is sent as length-delimited/);
  t.regex(wireProblem(len(6, 'x'), 'knit.v1.AttachRequest', types)!, /field runtime came as length-delimited/);
  t.regex(wireProblem(Buffer.from([0x0a, 0x05, 0x61]), 'knit.v1.AttachRequest', types)!, /runs past the end/);
  t.regex(wireProblem(len(1, Buffer.from([0xff])), 'knit.v1.AttachRequest', types)!, /sandbox_id is not valid UTF-8/);
  t.regex(wireProblem(Buffer.from([0x7b]), 'knit.v1.AttachRequest', types)!, /#15 uses wire type 3/);
  t.regex(wireProblem(Buffer.from([0x0b]), 'knit.v1.AttachRequest', types)!, /sandbox_id came as group start/);
  t.regex(wireProblem(Buffer.from([0x00]), 'knit.v1.AttachRequest', types)!, /field number 0/);
  // A nested field's wrong type is named by its path.
  t.regex(wireProblem(len(7, varintField(3, 1)), 'knit.v1.AttachRequest', types)!, /field interfaces\.mac came as varint/);
  let struct = Buffer.alloc(0);
  for (let i = 0; i < MAX_DEPTH; i++) struct = len(1, Buffer.concat([len(1, 'a'), len(2, len(5, struct))]));
  const deep = Buffer.concat([len(7, Buffer.concat([len(1, 'eth0'), len(6, len(5, struct))]))]);
  t.regex(wireProblem(deep, 'knit.v1.AttachRequest', types)!, /nest more than 64 deep in field interfaces/);
});

test('a guarded deserializer answers a MalformedRequest instead of throwing, which status maps to INVALID_ARGUMENT', (t) => {
  const guarded = guardService(knitProto().Knit.service, types);
  const bad = guarded.Attach!.requestDeserialize(varintField(5, 3));
  t.true(bad instanceof MalformedRequest);
  t.like(guarded.Attach!.requestDeserialize(len(1, 'sb')), { sandbox_id: 'sb' });
  t.true(guardService(kniProto().KNI.service, types).AttachInterface!.requestDeserialize(Buffer.from([0xff, 0xff])) instanceof MalformedRequest);
  // Plan's attach is checked as an AttachRequest.
  t.true(guarded.Plan!.requestDeserialize(len(1, len(1, Buffer.from([0xc3, 0x28])))) instanceof MalformedRequest);
});

const base = { sandbox_id: 'sb', netns_path: '/run/netns/x' };
/** The KnitError fn throws. */
function invalid(fn: () => unknown): KnitError {
  try {
    fn();
  } catch (err) {
    if (err instanceof KnitError) return err;
    throw err;
  }
  throw new Error('expected a KnitError');
}

test('limits: interfaces, static IPs, maps and GC lists are bounded, naming the field', (t) => {
  const many = Array.from({ length: LIMITS.interfaces + 1 }, (_, i) => ({ name: `e${i}` }));
  t.is(invalid(() => validateAttach({ ...base, interfaces: many } as never)).details.field, 'interfaces');
  t.is(invalid(() => validateAttach({ ...base, interfaces: many } as never, { prefix: 'attach.' })).details.field, 'attach.interfaces');
  const ips = Array.from({ length: LIMITS.ipsPerInterface + 1 }, (_, i) => `10.0.0.${i + 2}/24`);
  t.is(invalid(() => validateAttach({ ...base, interfaces: [{ name: 'eth0', ips }] } as never)).details.field, 'interfaces[0].ips');
  t.is(invalid(() => validateAttach({ ...base, annotations: { a: 'x'.repeat(LIMITS.mapBytes) } } as never)).details.field, 'annotations');
  const labels = Object.fromEntries(Array.from({ length: LIMITS.mapEntries + 1 }, (_, i) => [`k${i}`, '']));
  t.is(invalid(() => validateAttach({ ...base, labels } as never)).details.field, 'labels');
  const binding = Object.fromEntries(Array.from({ length: LIMITS.bindingEntries + 1 }, (_, i) => [`k${i}`, 'v']));
  t.is(invalid(() => validateAddInterface({ sandbox_id: 'sb', interface: { name: 'net1', binding } })).details.field, 'interface.binding');
  const valid_attachments = Array.from({ length: LIMITS.validAttachments + 1 }, () => ({ sandbox_id: 'sb' }));
  t.is(invalid(() => validateGarbageCollect({ valid_attachments })).details.field, 'valid_attachments');
  // At the limits, accepted.
  t.notThrows(() => validateAttach({ ...base, interfaces: many.slice(0, LIMITS.interfaces) } as never));
});

test('the same static address twice, in one interface or two, is refused naming the second', (t) => {
  const twice = invalid(() => validateAttach({ ...base, interfaces: [{ name: 'eth0', ips: ['10.0.0.5/24', '10.0.0.5/32'] }] } as never));
  t.is(twice.details.field, 'interfaces[0].ips[1]');
  t.regex(twice.message, /10\.0\.0\.5 is already given as interfaces\[0\]\.ips\[0\]/);
  // IPv6 compared in canonical form.
  const v6 = invalid(() => validateAttach({ ...base, interfaces: [{ name: 'eth0', ips: ['fd00::5/64'] }, { name: 'eth1', ips: ['fd00:0::0005/64'] }] } as never));
  t.is(v6.details.field, 'interfaces[1].ips[0]');
});

test('rules: "%" in an interface name, a path component over NAME_MAX, and a 1 MB MAC quoted by a prefix', (t) => {
  t.regex(ifnameProblem('eth%d')!, /name template/);
  t.regex(netnsPathProblem(`/run/netns/${'x'.repeat(256)}`)!, /256 bytes.*NAME_MAX/);
  t.is(netnsPathProblem(`/run/netns/${'x'.repeat(255)}`), undefined);
  const mac = invalid(() => validateAttach({ ...base, interfaces: [{ name: 'eth0', mac: 'a'.repeat(1 << 20) }] } as never));
  t.true(mac.message.length < 200, mac.message);
});

test('status messages and field metadata are bounded even when a message is not', (t) => {
  const huge = new KnitError('INVALID_ARGUMENT', `x: ${'y'.repeat(100_000)}`, { field: 'z'.repeat(5000) });
  const status = toServiceError(huge, silentLogger, 'Attach');
  t.is(status.code, grpc.status.INVALID_ARGUMENT);
  t.true(status.details!.length < 1100);
  t.true(String(status.metadata!.get('knit-field')[0]).length < 1100);
  // A field that quotes a map key with non-ASCII text still goes out as metadata.
  const keyed = toServiceError(KnitError.invalid(`labels[${quote('ü'.repeat(100))}]`, 'bad'), silentLogger, 'Attach');
  t.regex(String(keyed.metadata!.get('knit-field')[0]), /^labels\["\\u00fc/);
});

test('renameField says a core error about the field the caller sent, keeping its code', (t) => {
  const err = new KnitError('FAILED_PRECONDITION', 'netns_path: /x is already attached', { field: 'netns_path' });
  const renamed = renameField(err, (f) => f.replace(/^netns_path/, 'isolation.path'));
  t.is(renamed.code, 'FAILED_PRECONDITION');
  t.is(renamed.details.field, 'isolation.path');
  t.is(renamed.message, 'isolation.path: /x is already attached');
  t.is(renameField(new KnitError('INTERNAL', 'boom'), () => 'x').message, 'boom');
});
