// The daemon's Prometheus metrics: knit's own series beside the process and Node.js series
// every dashboard expects (resident memory, heap, event-loop lag, GC, open fds), all from
// prom-client, served with /healthz and /readyz on one small HTTP listener.
import http from 'node:http';
import client from 'prom-client';

type Labels = Record<string, string>;
// prom-client prints labels in the order given: sort them so a series always reads the same.
const sorted = (l: Labels): Labels => Object.fromEntries(Object.entries(l).sort(([a], [b]) => (a < b ? -1 : 1)));

// knit's metric vocabulary over prom-client. Series whose values live elsewhere (records,
// pools) are read at scrape time instead of being kept in step on every change.

export class Counter {
  readonly metric: client.Counter;
  constructor(name: string, help: string, labelNames: readonly string[] = []) {
    this.metric = new client.Counter({ name, help, labelNames, registers: [] });
  }
  inc(labels: Labels = {}, by = 1): void {
    this.metric.inc(sorted(labels), by);
  }
}

export class Gauge {
  readonly metric: client.Gauge;
  private readonly fixed: { labels: Labels; value: () => number }[] = [];
  private readonly families: (() => { labels: Labels; value: number }[])[] = [];
  constructor(name: string, help: string, labelNames: readonly string[] = []) {
    const self = this;
    this.metric = new client.Gauge({
      name, help, labelNames, registers: [],
      collect() {
        this.reset(); // a network removed by reload must lose its series
        for (const f of self.fixed) this.set(sorted(f.labels), f.value());
        for (const fn of self.families) for (const s of fn()) this.set(sorted(s.labels), s.value);
      },
    });
  }
  set(labels: Labels, fn: () => number): void {
    this.fixed.push({ labels, value: fn });
  }
  /** Series whose label sets change at run time (one per network, and a reload changes the
   * networks): fn is asked for all of them at each scrape. */
  setEach(fn: () => { labels: Labels; value: number }[]): void {
    this.families.push(fn);
  }
}

export class Histogram {
  readonly metric: client.Histogram;
  constructor(name: string, help: string, buckets: number[], labelNames: readonly string[] = []) {
    this.metric = new client.Histogram({ name, help, buckets, labelNames, registers: [] });
  }
  observe(seconds: number, labels: Labels = {}): void {
    this.metric.observe(sorted(labels), seconds);
  }
}

const LATENCY_BUCKETS = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

export class KnitMetrics {
  readonly attachSeconds = new Histogram('knit_attach_duration_seconds', 'Attach latency inside the daemon.', LATENCY_BUCKETS, ['outcome']);
  readonly detachSeconds = new Histogram('knit_detach_duration_seconds', 'Detach latency inside the daemon.', LATENCY_BUCKETS, ['outcome']);
  readonly errors = new Counter('knit_errors_total', 'Failed operations by RPC and gRPC code.', ['rpc', 'code']);
  readonly sandboxes = new Gauge('knit_sandboxes_attached', 'Sandboxes attached on this node.');
  readonly poolUsed = new Gauge('knit_pool_addresses_used', 'Addresses allocated per network pool.', ['network', 'family']);
  readonly poolSize = new Gauge('knit_pool_addresses_total', 'Addresses a network pool can hand out.', ['network', 'family']);
  readonly goneNetnsSweeps = new Counter('knit_gone_netns_sweeps_total', 'Sweeps for sandboxes whose network namespace is gone, by what started them (start-up, timer, link-gone, pool-low, pool-exhausted); each reads every record.', ['trigger']);
  readonly sandboxesReaped = new Counter('knit_sandboxes_reaped_total', 'Sandboxes knit detached on its own, by reason (netns-gone: their network namespace no longer exists).', ['reason']);
  readonly cniDeletesFailed = new Counter('knit_cni_queued_deletes_failed_total', 'Queued CNI DELs that gave up after their retries (moved to the queue\'s failed/).');
  readonly cniDeletesFailedPending = new Gauge('knit_cni_queued_deletes_failed', 'Files in the CNI delete queue\'s failed/ (an operator has to look at them).');
  readonly clusterPeers = new Gauge('knit_cluster_peers', 'Other nodes per network, by whether their routes are in place (state in_place or not_routed).', ['network', 'state']);
  readonly clusterReconcileSeconds = new Histogram('knit_cluster_reconcile_duration_seconds', 'From a change of the cluster view to the kernel holding its routes, neighbours and FDB entries.', LATENCY_BUCKETS, ['outcome']);
  readonly clusterSourceState = new Gauge('knit_cluster_node_source_state', '1 for the state the node list is in (starting, synced, unreachable), 0 for the others.', ['state']);
  readonly clusterSubnetConflicts = new Gauge('knit_cluster_subnet_conflicts', 'Networks whose node subnet changed while pods hold addresses in the old one.');
  private readonly registry = new client.Registry();

  constructor() {
    for (const m of [this.attachSeconds, this.detachSeconds, this.errors, this.sandboxes, this.poolUsed, this.poolSize, this.goneNetnsSweeps, this.sandboxesReaped, this.cniDeletesFailed, this.cniDeletesFailedPending,
      this.clusterPeers, this.clusterReconcileSeconds, this.clusterSourceState, this.clusterSubnetConflicts]) {
      this.registry.registerMetric(m.metric);
    }
    this.sandboxesReaped.inc({ reason: 'netns-gone' }, 0); // the series exists before the first reap
    // process_resident_memory_bytes, process_open_fds, nodejs_heap_size_used_bytes,
    // nodejs_eventloop_lag_seconds, nodejs_gc_duration_seconds, ...
    client.collectDefaultMetrics({ register: this.registry });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }
}

/** GET /metrics, /healthz (the process answers) and /readyz (NodeStatus.ready). */
export function startMetricsServer(address: string, metrics: KnitMetrics, ready: () => Promise<{ ready: boolean; message: string }>): Promise<http.Server> {
  const at = address.lastIndexOf(':');
  const host = address.slice(0, at).replace(/^\[|\]$/g, '');
  const port = Number(address.slice(at + 1));
  const server = http.createServer((req, res) => {
    if (req.url === '/metrics') {
      // A failure here must be an answer, never an unhandled rejection that takes the daemon down.
      metrics.render().then(
        (text) => res.writeHead(200, { 'content-type': metrics.contentType }).end(text),
        (err) => res.writeHead(500).end(`${(err as Error).message}\n`),
      );
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
