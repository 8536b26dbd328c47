// Record ids <-> file names: reversible, canonical, never a path or a hidden name.
import test from 'ava';
import { decodeId, encodeId, idOfFileName } from '../../src/store/file-names.js';

test('plain ids stay readable; everything else is %XX of its UTF-8 bytes', (t) => {
  t.is(encodeId('abc-DEF_1.2'), 'abc-DEF_1.2');
  t.is(encodeId('ns/name'), 'ns%2Fname');
  t.is(encodeId('.x'), '%2Ex', 'a leading dot is escaped');
  t.is(encodeId('..'), '%2E.');
  t.is(encodeId('é'), '%C3%A9');
  t.is(encodeId('100%'), '100%25');
});

test('decode inverts encode and accepts only the canonical form', (t) => {
  for (const id of ['a', 'ns/name', '..', '.x', 'é', '🦀', 'a b\nc', '%', '\u0000']) t.is(decodeId(encodeId(id)), id, id);
  for (const bad of ['', '%2f', '%41', '%C3', '%C3%', '%G1', '.x', 'a/b', 'a b', 'é', '%2E%2E']) {
    t.is(decodeId(bad), undefined, bad);
  }
  t.is(idOfFileName('ns%2Fname.json'), 'ns/name');
  t.is(idOfFileName('ns%2Fname.txt'), undefined);
  t.is(idOfFileName('.json'), undefined);
});
