// The Prometheus text knit writes by hand (src/daemon/exposition.ts) reads as the format says
// (https://prometheus.io/docs/instrumenting/exposition_formats/): HELP and TYPE before the
// samples, labels sorted and escaped, histogram buckets cumulative with +Inf, _sum and _count.
import test from 'ava';
import { Counter, Gauge, Histogram } from '../../src/daemon/exposition.js';
import { KnitMetrics } from '../../src/daemon/metrics.js';

test('a counter sums by label set, whatever order the labels come in, and escapes their values', (t) => {
  const c = new Counter('knit_x_total', 'Things.\nTwo lines.');
  c.inc({ rpc: 'attach', code: 'INTERNAL' });
  c.inc({ code: 'INTERNAL', rpc: 'attach' }, 2);
  c.inc({ rpc: 'say "hi"\\\n' });
  t.is(c.render(), [
    '# HELP knit_x_total Things.\\nTwo lines.',
    '# TYPE knit_x_total counter',
    'knit_x_total{code="INTERNAL",rpc="attach"} 3',
    'knit_x_total{rpc="say \\"hi\\"\\\\\\n"} 1',
    '',
  ].join('\n'));
});

test('a histogram counts each observation in its bucket and every one above, then +Inf, _sum and _count', (t) => {
  const h = new Histogram('knit_d_seconds', 'Time.', [0.01, 0.001, 0.1], ['outcome']);
  for (const v of [0.0005, 0.002, 0.002, 0.05, 3]) h.observe(v, { outcome: 'ok' });
  t.is(h.render(), [
    '# HELP knit_d_seconds Time.',
    '# TYPE knit_d_seconds histogram',
    'knit_d_seconds_bucket{outcome="ok",le="0.001"} 1',
    'knit_d_seconds_bucket{outcome="ok",le="0.01"} 3',
    'knit_d_seconds_bucket{outcome="ok",le="0.1"} 4',
    'knit_d_seconds_bucket{outcome="ok",le="+Inf"} 5',
    'knit_d_seconds_sum{outcome="ok"} 3.0545',
    'knit_d_seconds_count{outcome="ok"} 5',
    '',
  ].join('\n'));
});

test('a gauge reads its values at render time, fixed series and families', (t) => {
  let n = 1;
  const g = new Gauge('knit_g', 'G.');
  g.set({}, () => n);
  g.setEach(() => [{ labels: { network: 'a', family: '4' }, value: n * 2 }]);
  n = 5;
  t.regex(g.render(), /^knit_g 5\nknit_g\{family="4",network="a"\} 10\n$/m);
});

test('without the metrics listener the daemon has no process or Node.js series; with it, the ones dashboards use', (t) => {
  const m = new KnitMetrics();
  t.notRegex(m.render(), /process_|nodejs_/);
  m.startRuntimeMetrics();
  try {
    const text = m.render();
    for (const name of ['process_resident_memory_bytes', 'process_open_fds', 'process_cpu_seconds_total', 'nodejs_heap_size_used_bytes', 'nodejs_eventloop_lag_seconds']) {
      t.regex(text, new RegExp(`^${name} [0-9.e+-]+$`, 'm'), name);
    }
    t.regex(text, /^# TYPE nodejs_gc_duration_seconds histogram$/m);
    t.regex(text, /^knit_sandboxes_reaped_total\{reason="netns-gone"\} 0$/m);
  } finally {
    m.stop();
  }
});
