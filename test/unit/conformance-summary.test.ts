// The durations the conformance runner writes into summary.md and cnp.md.
import test from 'ava';
import { minutes } from '../conformance/run.js';

test('a duration is rounded to the second before it is split: 179.6 s is 3 min 0 s, never 2 min 60 s', (t) => {
  t.is(minutes(179.6), '3 min 0 s');
  t.is(minutes(61.2), '1 min 1 s');
  t.is(minutes(59.4), '0 min 59 s');
  t.is(minutes(1026), '17 min 6 s');
});
