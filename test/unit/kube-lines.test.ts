// The watch stream's line splitter: lines cut anywhere by chunking (mid-line, mid-character,
// at the newline itself) come out whole and in order, once each.
import test from 'ava';
import { LineSplitter, LineTooLongError } from '../../src/kube/lines.js';

const events = [
  '{"type":"ADDED","object":{"metadata":{"name":"n1"}}}',
  '{"type":"MODIFIED","object":{"metadata":{"name":"nœud-é-✓-🚀"}}}',
  '{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"42"}}}',
];
const stream = Buffer.from(events.join('\n') + '\n');

function splitAll(chunks: Buffer[]): string[] {
  const s = new LineSplitter();
  const out = chunks.flatMap((c) => s.push(c));
  const last = s.end();
  return last === undefined ? out : [...out, last];
}

test('every cut of the stream into two chunks yields the same lines', (t) => {
  for (let cut = 0; cut <= stream.length; cut++) {
    t.deepEqual(splitAll([stream.subarray(0, cut), stream.subarray(cut)]), events, `cut at byte ${cut}`);
  }
});

test('one byte at a time, multi-byte characters included', (t) => {
  const chunks = [...stream].map((b) => Buffer.from([b]));
  t.deepEqual(splitAll(chunks), events);
});

test('several lines in one chunk; CRLF and blank lines; a last line with no newline', (t) => {
  const s = new LineSplitter();
  t.deepEqual(s.push(Buffer.from('a\r\n\nb\n  \nc')), ['a', 'b']);
  t.deepEqual(s.push(Buffer.from('d')), []);
  t.is(s.end(), 'cd');
  t.is(s.end(), undefined);
});

test('a kept tail is a copy: reusing the chunk buffer does not change it', (t) => {
  const s = new LineSplitter();
  const chunk = Buffer.from('{"a":');
  s.push(chunk);
  chunk.fill(0x78);
  t.deepEqual(s.push(Buffer.from('1}\n')), ['{"a":1}']);
});

test('a line past the limit is refused, and the splitter goes on with the next', (t) => {
  const s = new LineSplitter(8);
  t.throws(() => s.push(Buffer.from('0123456789')), { instanceOf: LineTooLongError, message: 'a watch event is longer than 8 bytes' });
  t.deepEqual(s.push(Buffer.from('\nok\n')), ['ok']);
  t.throws(() => [Buffer.from('01234'), Buffer.from('5678')].forEach((c) => s.push(c)), { instanceOf: LineTooLongError });
});
