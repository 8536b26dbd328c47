// Config text: YAML 1.2 and JSON alike, the line of every key path, syntax errors with line
// and column, repeated keys refused, absurd input refused before it reaches the parser.
import test from 'ava';
import { ConfigSyntaxError, formatKeyPath, parseConfigText } from '../../src/config/config-text.js';

test('JSON reads as JSON.parse reads it', (t) => {
  const samples = [
    '{}', '[]', '0', '-0', '1.5e-3', '-12E+2', 'true', 'false', 'null', '"a\\"b\\\\c\\/\\b\\f\\n\\r\\t\\u00e9\\ud83e\\udd80"',
    '{"a":[1,{"b":null}],"c":{"d":[[]]},"e":"x"}', ' \r\n\t{ "k" : [ 1 , 2 ] } \n',
  ];
  for (const text of samples) t.deepEqual(parseConfigText(text).value, JSON.parse(text), text);
});

test('the same config in YAML gives the same value', (t) => {
  const json = '{"networks": [{"name": "pods", "ipv4": {"subnet": "10.0.0.0/8"}, "mtu": 1450}], "logLevel": "info"}';
  const yaml = 'networks:\n  - name: pods\n    ipv4:\n      subnet: 10.0.0.0/8\n    mtu: 1450\nlogLevel: info\n';
  t.deepEqual(parseConfigText(yaml).value, JSON.parse(json));
});

test('every key path gets the line of its key (array elements: their own line), JSON and YAML', (t) => {
  const json = [
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
  const doc = parseConfigText(json);
  t.is(doc.lineOf([]), 1);
  t.is(doc.lineOf(['a']), 2);
  t.is(doc.lineOf(['nets']), 3);
  t.is(doc.lineOf(['nets', 0]), 4);
  t.is(doc.lineOf(['nets', 0, 'name']), 5);
  t.is(doc.lineOf(['nets', 0, 'ipv4', 'subnet']), 7);
  t.is(doc.lineOf(['nets', 1]), 11);
  t.is(doc.lineOf(['nets', 1, 'name']), 11);
  t.is(doc.lineOf(['odd key']), 13);
  // A path that is not in the file falls back to its nearest ancestor.
  t.is(doc.lineOf(['nets', 1, 'ipv4', 'subnet']), 11);
  t.is(doc.lineOf(['missing']), 1);

  const yaml = parseConfigText('a: 1\nnets:\n  - name: x\n    ipv4:\n      subnet: 10.0.0.0/8\n  - name: y\n');
  t.is(yaml.lineOf(['nets', 0, 'ipv4', 'subnet']), 5);
  t.is(yaml.lineOf(['nets', 1, 'name']), 6);
  t.is(yaml.lineOf(['nets', 1, 'mtu']), 6);
});

test('key paths are formatted like the error messages', (t) => {
  t.is(formatKeyPath([]), '');
  t.is(formatKeyPath(['networks', 0, 'ipv4', 'subnet']), 'networks[0].ipv4.subnet');
  t.is(formatKeyPath(['a b', 'c']), '["a b"].c');
  t.is(formatKeyPath([0, 'x']), '[0].x');
});

test('syntax errors say line and column', (t) => {
  const cases: [string, number, number][] = [
    ['{\n  "a": 1\n  "b": 2\n}', 2, 8],
    ['{"a":', 1, 6],
    ['a: [1, 2\n', 2, 1],
    ['"x" "y"', 1, 5],
    ['', 1, 1],
    ['  \n ', 2, 2],
    ['a: 1\n b: 2\n', 1, 4],
  ];
  for (const [text, line, column] of cases) {
    const err = t.throws(() => parseConfigText(text), { instanceOf: ConfigSyntaxError }, JSON.stringify(text)) as ConfigSyntaxError;
    t.is(err.line, line, `line of ${JSON.stringify(text)}`);
    t.is(err.column, column, `column of ${JSON.stringify(text)}`);
    t.true(err.reason.length > 0);
  }
});

test('repeated keys are an error at the second occurrence; __proto__ stays plain data', (t) => {
  for (const text of ['{\n "n": [{\n  "mtu": 1,\n  "mtu": 2\n }]\n}', 'n:\n  - a: 0\n\n    mtu: 2\n    mtu: 1\n']) {
    const err = t.throws(() => parseConfigText(text), { instanceOf: ConfigSyntaxError }) as ConfigSyntaxError;
    t.is(err.line, text.startsWith('{') ? 4 : 5);
    t.regex(err.reason, /unique|repeated/);
  }
  const { value } = parseConfigText('{"__proto__": {"polluted": true}}');
  t.is(Object.getPrototypeOf(value), Object.prototype);
  t.deepEqual(Object.keys(value as object), ['__proto__']);
  t.is(({} as Record<string, unknown>).polluted, undefined);
});

test('a leading byte-order mark is skipped; absurd nesting and size are refused, not a crash', (t) => {
  t.deepEqual(parseConfigText('\uFEFF{"a":1}').value, { a: 1 });
  t.throws(() => parseConfigText('['.repeat(100_000)), { instanceOf: ConfigSyntaxError, message: /nested deeper than/ });
  t.throws(() => parseConfigText(`a: "${'x'.repeat(2 << 20)}"`), { instanceOf: ConfigSyntaxError, message: /larger than/ });
  // Brackets inside quoted strings are text, not nesting.
  t.deepEqual(parseConfigText(`a: "${'['.repeat(500)}"`).value, { a: '['.repeat(500) });
});
