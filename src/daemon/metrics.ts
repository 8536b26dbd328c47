// The daemon's Prometheus metrics: knit's own series beside the process and Node.js series
// every dashboard expects (resident memory, heap, event-loop lag, GC, open fds), served with
// /healthz and /readyz on one small HTTP listener. The text format is written here, not with
// prom-client: loaded, with its default metrics collecting whether anyone scraped or not, it
// and yaml together held ~7 MiB of the daemon's idle 84 (bench/README.md, "Memory"), a tenth
// of a node agent's budget, for a format of a few lines per series. The process and Node.js
// series start with the listener, so a daemon without metricsAddress pays nothing for them.
import http from 'node:http';
import { Counter, EXPOSITION_CONTENT_TYPE, Gauge, Histogram } from './exposition.js';
import { RuntimeMetrics } from './runtime-metrics.js';

export { Counter, Gauge, Histogram };

const LATENCY_BUCKETS = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

export class KnitMetrics {
  readonly attachSeconds = new Histogram('knit_attach_duration_seconds', 'Attach latency inside the daemon.', LATENCY_BUCKETS, ['outcome']);
  readonly detachSeconds = new Histogram('knit_detach_duration_seconds', 'Detach latency inside the daemon.', LATENCY_BUCKETS, ['outcome']);
  readonly errors = new Counter('knit_errors_total', 'Failed operations by RPC and gRPC code.', ['rpc', 'code']);
  readonly sandboxes = new Gauge('knit_sandboxes_attached', 'Sandboxes attached on this node.');
  readonly poolUsed = new Gauge('knit_pool_addresses_used', 'Addresses allocated per network pool.', ['network', 'family']);
  readonly poolSize = new Gauge('knit_pool_addresses_total', 'Addresses a network pool can hand out.', ['network', 'family']);
  readonly goneNetnsSweeps = new Counter('knit_gone_netns_sweeps_total', 'Sweeps for sandboxes whose network namespace is gone, by what started them (start-up, timer, link-gone, netns-file-gone, pool-low, pool-exhausted); each reads every record.', ['trigger']);
  readonly sandboxesReaped = new Counter('knit_sandboxes_reaped_total', 'Sandboxes knit detached on its own, by reason (netns-gone: their network namespace no longer exists).', ['reason']);
  readonly cniDeletesFailed = new Counter('knit_cni_queued_deletes_failed_total', 'Queued CNI DELs that gave up after their retries (moved to the queue\'s failed/).');
  readonly cniDeletesFailedPending = new Gauge('knit_cni_queued_deletes_failed', 'Files in the CNI delete queue\'s failed/ (an operator has to look at them).');
  readonly clusterPeers = new Gauge('knit_cluster_peers', 'Other nodes per network, by whether their routes are in place (state in_place or not_routed).', ['network', 'state']);
  readonly clusterReconcileSeconds = new Histogram('knit_cluster_reconcile_duration_seconds', 'From a change of the cluster view to the kernel holding its routes, neighbours and FDB entries.', LATENCY_BUCKETS, ['outcome']);
  readonly clusterSourceState = new Gauge('knit_cluster_node_source_state', '1 for the state the node list is in (starting, synced, unreachable), 0 for the others.', ['state']);
  readonly clusterSubnetConflicts = new Gauge('knit_cluster_subnet_conflicts', 'Networks whose node subnet changed while pods hold addresses in the old one.');
  readonly clusterRefusedPeers = new Gauge('knit_cluster_refused_peers', 'Other nodes knit does not route, by reason: overlaps_this_node (a podCIDR overlaps one of this node\'s blocks), overlaps_peer (it overlaps the podCIDR of a Node created first, or of one created in the same second), this_node_address (an InternalIP is an address of this node). A node refused for two reasons counts under both.', ['reason']);
  readonly draRegistrations = new Counter('knit_dra_registrations_total', 'The kubelet\'s NotifyRegistrationStatus calls to the DRA plugin, by outcome (registered "true" or "false").', ['registered']);
  readonly dhcpFrames = new Counter('knit_dhcp_frames_total', 'Frames knit\'s DHCP/RA responders read from KubeVirt guest taps, by result (answered, received, ignored, dropped) and detail (the answer\'s kind, the message taken without one: release, decline; or why not: foreign-mac, truncated, oversized, bad-header, bad-checksum, bad-message, over-budget, not-for-us, ...).', ['result', 'detail']);
  readonly dhcpResponders = new Gauge('knit_dhcp_responders', 'Guest taps knit answers DHCP and router solicitations on.');
  readonly policyPackets = new Gauge('knit_policy_packets', 'Packets of this node\'s isolated pods by NetworkPolicy, direction (ingress, egress) and verdict: allowed by one of its rules, or denied (no rule of the policies that select the pod allowed it; counted against each of them); and by ClusterNetworkPolicy (policy "cnp:<name>"): accepted, denied or passed by one of its rules. nft\'s own counters, read at the scrape; a policy made anew starts again from 0.', ['policy', 'direction', 'verdict']);
  readonly policyProblems = new Gauge('knit_policy_problems', 'NetworkPolicies knit cannot express (each fails closed: its pods isolated, none of its rules applied) and ClusterNetworkPolicies it cannot read whole (policy "cnp:<name>": each rule it cannot read fails closed as the API defines), with the number of problems found.', ['policy']);
  readonly policyIsolated = new Gauge('knit_policy_isolated_addresses', 'Addresses of this node\'s pods isolated by NetworkPolicy, by direction.', ['direction']);
  readonly policySourceState = new Gauge('knit_policy_source_state', '1 for the state the NetworkPolicy view is in (starting, synced, unreachable), 0 for the others.', ['state']);
  readonly policyApplySeconds = new Histogram('knit_policy_apply_duration_seconds', 'From a change of the NetworkPolicy view (a policy, a pod, a namespace, a pod of this node) to the kernel holding the table that follows from it.', LATENCY_BUCKETS, ['outcome']);
  /** Read before each scrape (series whose values live in the kernel: nft counters). */
  readonly beforeScrape: (() => Promise<void>)[] = [];
  /** The process and Node.js series; started with the metrics listener, so a node that
   * serves no metrics pays nothing for them. */
  private runtime?: RuntimeMetrics;

  constructor() {
    this.sandboxesReaped.inc({ reason: 'netns-gone' }, 0); // the series exists before the first reap
  }

  readonly contentType = EXPOSITION_CONTENT_TYPE;

  /** Starts the process and Node.js series (event-loop delay, GC durations). */
  startRuntimeMetrics(): void {
    this.runtime ??= new RuntimeMetrics();
  }

  stop(): void {
    this.runtime?.stop();
  }

  render(): string {
    const own = [this.attachSeconds, this.detachSeconds, this.errors, this.sandboxes, this.poolUsed, this.poolSize, this.goneNetnsSweeps, this.sandboxesReaped, this.cniDeletesFailed, this.cniDeletesFailedPending, this.draRegistrations, this.dhcpFrames, this.dhcpResponders,
      this.clusterPeers, this.clusterReconcileSeconds, this.clusterSourceState, this.clusterSubnetConflicts, this.clusterRefusedPeers,
      this.policyPackets, this.policyProblems, this.policyIsolated, this.policySourceState, this.policyApplySeconds];
    return own.map((m) => m.render()).join('') + (this.runtime?.render() ?? '');
  }
}

/** GET /metrics, /healthz (the process answers) and /readyz (NodeStatus.ready). */
export function startMetricsServer(address: string, metrics: KnitMetrics, ready: () => Promise<{ ready: boolean; message: string }>): Promise<http.Server> {
  const at = address.lastIndexOf(':');
  const host = address.slice(0, at).replace(/^\[|\]$/g, '');
  const port = Number(address.slice(at + 1));
  const server = http.createServer((req, res) => {
    if (req.url === '/metrics') {
      // A failure here must be an answer, never an exception that takes the daemon down.
      Promise.all(metrics.beforeScrape.map((read) => read())).then(() => {
        const text = metrics.render();
        res.writeHead(200, { 'content-type': metrics.contentType }).end(text);
      }).catch((err: Error) => res.writeHead(500).end(`${err.message}\n`));
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
  metrics.startRuntimeMetrics();
  server.once('close', () => metrics.stop());
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}
