// The position-tracking JSON parser: same values as JSON.parse, a line for every key path,
// syntax errors with line and column.
import test from 'ava';
import { formatKeyPath, JsonSyntaxError, lineOf, parseJsonWithLines } from '../../src/config/json-lines.js';

test('values match JSON.parse', (t) => {
  const samples = [
    '{}', '[]', '0', '-0', '1.5e-3', '-12E+2', 'true', 'false', 'null', '"a\\"b\\\\c\\/\\b\\f\\n\\r\\t\\u00e9\\ud83e\\udd80"',
    '{"a":[1,{"b":null}],"c":{"d":[[]]},"e":"x"}', ' \r\n\t{ "k" : [ 1 , 2 ] } \n',
  ];
  for (const text of samples) t.deepEqual(parseJsonWithLines(text).value, JSON.parse(text), text);
});

test('every key path gets the line of its key (array elements: their own line)', (t) => {
  const text = [
    '{', //                               1
    '  "a": 1,', //                       2
    '  "nets": [', //                     3
    '    {', //                           4
    '      "name": "x",', //              5
    '      "ipv4": {', //                 6
    '        "subnet":', //               7
    '          "10.0.0.0/8"', //          8  (value on the next line: the key's line counts)
    '      }', //                         9
    '    },', //                          10
    '    { "name": "y" }', //             11
    '  ],', //                            12
    '  "odd key": true', //               13
    '}', //                               14
  ].join('\n');
  const { lines } = parseJsonWithLines(text);
  t.is(lines.get(''), 1);
  t.is(lines.get('a'), 2);
  t.is(lines.get('nets'), 3);
  t.is(lines.get('nets[0]'), 4);
  t.is(lines.get('nets[0].name'), 5);
  t.is(lines.get('nets[0].ipv4.subnet'), 7);
  t.is(lines.get('nets[1]'), 11);
  t.is(lines.get('nets[1].name'), 11);
  t.is(lines.get('["odd key"]'), 13);
  // A path that is not in the file falls back to its nearest ancestor.
  t.is(lineOf(lines, ['nets', 1, 'ipv4', 'subnet']), 11);
  t.is(lineOf(lines, ['missing']), 1);
});

test('key paths are formatted like the error messages', (t) => {
  t.is(formatKeyPath([]), '');
  t.is(formatKeyPath(['networks', 0, 'ipv4', 'subnet']), 'networks[0].ipv4.subnet');
  t.is(formatKeyPath(['a b', 'c']), '["a b"].c');
  t.is(formatKeyPath([0, 'x']), '[0].x');
});

test('syntax errors say line and column', (t) => {
  const cases: [string, number, number, RegExp][] = [
    ['{\n  "a": 1\n  "b": 2\n}', 3, 3, /expected ',' or '}' after the value of "a"/],
    ['{\n  "a": 1,\n}', 3, 1, /expected a key in double quotes, found "}"/],
    ['{\n  a: 1\n}', 2, 3, /expected a key in double quotes/],
    ['[1,\n2,,3]', 2, 3, /expected a value, found ",3]"/],
    ['{"a": "unterminated\n}', 1, 7, /unterminated string|invalid string/],
    ['{"a": "tab\there"}', 1, 7, /invalid string/],
    ['{"a": 01}', 1, 8, /expected ',' or '}'/],
    ['{"a": 1} x', 1, 10, /after the end of the document/],
    ['', 1, 1, /the file is empty/],
    ['  \n ', 2, 2, /the file is empty/],
    ['{"a": tru}', 1, 7, /expected a value/],
    ['{"a": [1, 2}', 1, 12, /expected ',' or ']' in a list/],
    ['{"a":', 1, 6, /expected a value, found the end of the file/],
  ];
  for (const [text, line, column, reason] of cases) {
    const err = t.throws(() => parseJsonWithLines(text), { instanceOf: JsonSyntaxError }, JSON.stringify(text)) as JsonSyntaxError;
    t.is(err.line, line, `line of ${JSON.stringify(text)}`);
    t.is(err.column, column, `column of ${JSON.stringify(text)}`);
    t.regex(err.reason, reason);
  }
});

test('duplicate keys are an error at the second occurrence; __proto__ stays plain data', (t) => {
  const err = t.throws(() => parseJsonWithLines('{\n "n": [{\n  "mtu": 1,\n  "mtu": 2\n }]\n}'), { instanceOf: JsonSyntaxError }) as JsonSyntaxError;
  t.is(err.line, 4);
  t.regex(err.reason, /duplicate key "mtu" in n\[0\]/);
  const { value } = parseJsonWithLines('{"__proto__": {"polluted": true}}');
  t.is(Object.getPrototypeOf(value), Object.prototype);
  t.deepEqual(Object.keys(value as object), ['__proto__']);
  t.is(({} as Record<string, unknown>).polluted, undefined);
});

test('a leading byte-order mark is skipped; absurd nesting is refused, not a stack overflow', (t) => {
  t.deepEqual(parseJsonWithLines('\uFEFF{"a":1}').value, { a: 1 });
  t.throws(() => parseJsonWithLines('['.repeat(100_000)), { instanceOf: JsonSyntaxError, message: /nested deeper than/ });
});
