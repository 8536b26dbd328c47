// Counters, gauges and histograms in Prometheus's text exposition format (version 0.0.4,
// https://prometheus.io/docs/instrumenting/exposition_formats/). Series whose values live
// elsewhere (records, pools) are read at scrape time instead of being kept in step.

export const EXPOSITION_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

type Labels = Record<string, string>;
const NO_LABELS: Labels = Object.freeze({});

const escapeValue = (v: string) => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');

/** `{a="x",b="y"}` with the names sorted, so a series always reads the same; '' for none. */
export function labelText(labels: Labels): string {
  const names = Object.keys(labels).sort();
  return names.length ? `{${names.map((n) => `${n}="${escapeValue(labels[n]!)}"`).join(',')}}` : '';
}

/** Prometheus prints numbers Go's way: +Inf, -Inf, NaN. */
export const num = (v: number) => (Number.isNaN(v) ? 'NaN' : v === Infinity ? '+Inf' : v === -Infinity ? '-Inf' : String(v));

export function header(name: string, help: string, type: 'counter' | 'gauge' | 'histogram'): string {
  return `# HELP ${name} ${help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}\n# TYPE ${name} ${type}\n`;
}

export class Counter {
  private readonly values = new Map<string, number>();
  constructor(readonly name: string, readonly help: string, readonly labelNames: readonly string[] = []) {}
  inc(labels: Labels = {}, by = 1): void {
    const key = labelText(labels);
    this.values.set(key, (this.values.get(key) ?? 0) + by);
  }
  render(): string {
    let out = header(this.name, this.help, 'counter');
    for (const [labels, v] of this.values) out += `${this.name}${labels} ${num(v)}\n`;
    return out;
  }
}

export class Gauge {
  private readonly fixed: { labels: Labels; value: () => number }[] = [];
  private readonly families: (() => { labels: Labels; value: number }[])[] = [];
  constructor(readonly name: string, readonly help: string, readonly labelNames: readonly string[] = []) {}
  set(labels: Labels, fn: () => number): void {
    this.fixed.push({ labels, value: fn });
  }
  /** Series whose label sets change at run time (one per network, and a reload changes the
   * networks): fn is asked for all of them at each scrape. */
  setEach(fn: () => { labels: Labels; value: number }[]): void {
    this.families.push(fn);
  }
  render(): string {
    const samples = [...this.fixed.map((f) => ({ labels: f.labels, value: f.value() })), ...this.families.flatMap((fn) => fn())];
    return header(this.name, this.help, 'gauge') + samples.map((s) => `${this.name}${labelText(s.labels)} ${num(s.value)}\n`).join('');
  }
}

export class Histogram {
  private readonly series = new Map<string, { counts: number[]; sum: number; count: number }>();
  private readonly buckets: readonly number[];
  constructor(readonly name: string, readonly help: string, buckets: readonly number[], readonly labelNames: readonly string[] = []) {
    this.buckets = [...buckets].sort((a, b) => a - b);
  }
  /** labelText of label objects observed before: a caller that passes the same object for a
   * series (a module constant) has its key made once, not at every call. */
  private readonly keys = new WeakMap<Labels, string>();
  observe(value: number, labels: Labels = NO_LABELS): void {
    let key = this.keys.get(labels);
    if (key === undefined) this.keys.set(labels, (key = labelText(labels)));
    let s = this.series.get(key);
    if (!s) this.series.set(key, (s = { counts: this.buckets.map(() => 0), sum: 0, count: 0 }));
    const at = this.buckets.findIndex((b) => value <= b);
    if (at >= 0) s.counts[at]!++;
    s.sum += value;
    s.count++;
  }
  render(): string {
    let out = header(this.name, this.help, 'histogram');
    for (const [labels, s] of this.series) {
      const inner = labels.slice(1, -1); // the labels without braces, to add le to
      const withLe = (le: string) => `{${inner ? `${inner},` : ''}le="${le}"}`;
      let cumulative = 0;
      this.buckets.forEach((b, i) => {
        cumulative += s.counts[i]!;
        out += `${this.name}_bucket${withLe(num(b))} ${cumulative}\n`;
      });
      out += `${this.name}_bucket${withLe('+Inf')} ${s.count}\n${this.name}_sum${labels} ${num(s.sum)}\n${this.name}_count${labels} ${s.count}\n`;
    }
    return out;
  }
}
