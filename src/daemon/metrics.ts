// Prometheus text exposition without a client library: knit needs three metric shapes and a
// plain HTTP endpoint, which is less code than wiring a dependency.
import http from 'node:http';

type Labels = Record<string, string>;
const key = (l: Labels) => Object.keys(l).sort().map((k) => `${k}="${String(l[k]).replace(/["\\\n]/g, '\\$&')}"`).join(',');

abstract class Metric {
  constructor(readonly name: string, readonly help: string, readonly type: string) {}
  abstract lines(): string[];
  render(): string {
    return [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} ${this.type}`, ...this.lines()].join('\n');
  }
}

export class Counter extends Metric {
  private readonly values = new Map<string, number>();
  constructor(name: string, help: string) { super(name, help, 'counter'); }
  inc(labels: Labels = {}, by = 1) { const k = key(labels); this.values.set(k, (this.values.get(k) ?? 0) + by); }
  lines() { return [...this.values].map(([k, v]) => `${this.name}${k ? `{${k}}` : ''} ${v}`); }
}

export class Gauge extends Metric {
  private readonly values = new Map<string, () => number>();
  private readonly families: (() => { labels: Labels; value: number }[])[] = [];
  constructor(name: string, help: string) { super(name, help, 'gauge'); }
  set(labels: Labels, fn: () => number) { this.values.set(key(labels), fn); }
  /** Series whose label sets change at run time (one per network, and a reload changes the
   * networks): fn is asked for all of them at each scrape. */
  setEach(fn: () => { labels: Labels; value: number }[]) { this.families.push(fn); }
  lines() {
    const fixed = [...this.values].map(([k, fn]) => [k, fn()] as const);
    const dynamic = this.families.flatMap((fn) => fn().map((s) => [key(s.labels), s.value] as const));
    return [...fixed, ...dynamic].map(([k, v]) => `${this.name}${k ? `{${k}}` : ''} ${v}`);
  }
}

export class Histogram extends Metric {
  private readonly series = new Map<string, { counts: number[]; sum: number; n: number }>();
  constructor(name: string, help: string, private readonly buckets: number[]) { super(name, help, 'histogram'); }
  observe(seconds: number, labels: Labels = {}) {
    const k = key(labels);
    let s = this.series.get(k);
    if (!s) this.series.set(k, (s = { counts: this.buckets.map(() => 0), sum: 0, n: 0 }));
    this.buckets.forEach((b, i) => { if (seconds <= b) s!.counts[i]++; });
    s.sum += seconds;
    s.n++;
  }
  lines() {
    return [...this.series].flatMap(([k, s]) => {
      const lb = (le: string) => `{${k ? `${k},` : ''}le="${le}"}`;
      return [
        ...this.buckets.map((b, i) => `${this.name}_bucket${lb(String(b))} ${s.counts[i]}`),
        `${this.name}_bucket${lb('+Inf')} ${s.n}`,
        `${this.name}_sum${k ? `{${k}}` : ''} ${s.sum}`,
        `${this.name}_count${k ? `{${k}}` : ''} ${s.n}`,
      ];
    });
  }
}

const LATENCY_BUCKETS = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

export class KnitMetrics {
  readonly attachSeconds = new Histogram('knit_attach_duration_seconds', 'Attach latency inside the daemon.', LATENCY_BUCKETS);
  readonly detachSeconds = new Histogram('knit_detach_duration_seconds', 'Detach latency inside the daemon.', LATENCY_BUCKETS);
  readonly errors = new Counter('knit_errors_total', 'Failed operations by RPC and gRPC code.');
  readonly sandboxes = new Gauge('knit_sandboxes_attached', 'Sandboxes attached on this node.');
  readonly poolUsed = new Gauge('knit_pool_addresses_used', 'Addresses allocated per network pool.');
  readonly poolSize = new Gauge('knit_pool_addresses_total', 'Addresses a network pool can hand out.');
  private readonly all: Metric[] = [this.attachSeconds, this.detachSeconds, this.errors, this.sandboxes, this.poolUsed, this.poolSize];

  render(): string {
    return this.all.map((m) => m.render()).join('\n') + '\n';
  }
}

/** GET /metrics, /healthz (the process answers) and /readyz (NodeStatus.ready). */
export function startMetricsServer(address: string, metrics: KnitMetrics, ready: () => Promise<{ ready: boolean; message: string }>): Promise<http.Server> {
  const at = address.lastIndexOf(':');
  const host = address.slice(0, at).replace(/^\[|\]$/g, '');
  const port = Number(address.slice(at + 1));
  const server = http.createServer((req, res) => {
    if (req.url === '/metrics') {
      // A throw here would be an uncaught exception: a scrape must never take the daemon down.
      let text: string;
      try {
        text = metrics.render();
      } catch (err) {
        res.writeHead(500).end(`${(err as Error).message}\n`);
        return;
      }
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(text);
    } else if (req.url === '/healthz') {
      res.writeHead(200).end('ok\n');
    } else if (req.url === '/readyz') {
      ready().then(
        (r) => res.writeHead(r.ready ? 200 : 503).end(r.ready ? 'ready\n' : `not ready: ${r.message}\n`),
        (err) => res.writeHead(500).end(`${(err as Error).message}\n`),
      );
    } else {
      res.writeHead(404).end();
    }
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}
