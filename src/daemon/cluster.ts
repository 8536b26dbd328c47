// The cluster network of this node (README "A cluster", docs/cluster.md): learns the nodes from
// a NodeSource (the config's literal map, or the Kubernetes API, loaded only then), fills in the
// node's pod subnets, and keeps the kernel's cross-node routes, VTEP, neighbour and FDB entries,
// forwarding switches and masquerade table in step with the node list. Planning is pure
// (src/cluster/); this file reads the kernel, runs the changes and reports.
import os from 'node:os';
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import type { ClusterSettings, KnitConfig, NetworkConfig } from '../config/index.js';
import type { DaemonActionRunner } from './action-runner.js';
import type { KnitMetrics } from './metrics.js';
import { clusterNatTable } from '../base/names.js';
import { nodeNetworks } from '../cluster/node-networks.js';
import { planNetwork, type NetworkPlan } from '../cluster/plan.js';
import { peersInPlace, reconcile, type KernelView } from '../cluster/reconcile.js';
import { masqueradeRuleset } from '../cluster/masquerade.js';
import { REFUSAL_REASONS, refusedPeers, type OwnBlock, type PeerRefusal } from '../cluster/refusals.js';
import { StaticNodes } from '../cluster/static-nodes.js';
import type { ClusterNetworkStatus, ClusterNode, NodeSource } from '../cluster/types.js';
import type { IpFamily } from '../ipam/ip.js';
import { atomicWriteFile } from '../store/index.js';
import { ClusterKernel, vtepDrift } from './cluster-kernel.js';

/** Changes that arrive together are applied together: the first change of a quiet spell starts
 * this wait, later ones ride along (no reset, so a steady stream of changes cannot postpone the
 * pass); those that come during a pass get the next one, which is where a burst is batched. */
const SETTLE_MS = 3;
/** How long start-up waits for the API's first list; after it knit serves, its node-subnet
 * networks not ready until the list arrives. */
const FIRST_VIEW_MS = 5_000;
/** A pass even when the node list did not change: what someone removed by hand comes back. */
const RESYNC_MS = 60_000;
/** While a subnet is held back for the pods in it, how often to look whether they are gone. */
const CONFLICT_RETRY_MS = 2_000;

/** NODE_NAME (the DaemonSet sets it from spec.nodeName), else the host name. */
export function clusterNodeName(cluster: ClusterSettings, env: NodeJS.ProcessEnv = process.env): string {
  return cluster.nodeName ?? (env.NODE_NAME || os.hostname());
}

/** The node list: the config's, or the API's (src/kube is imported only here, only then). */
export async function openNodeSource(cluster: ClusterSettings, log: Logger): Promise<NodeSource> {
  if (cluster.nodes) return new StaticNodes(cluster.nodes);
  const { KubeNodes } = await import('./kube-nodes.js');
  try {
    return await KubeNodes.open(cluster, log);
  } catch (err) {
    // No kubeconfig, no ServiceAccount: knit still serves its other networks, and says why
    // these wait (NodeStatus, /readyz, CNI STATUS) instead of exiting in a crash loop.
    log.error({ err: (err as Error).message }, 'cannot reach the Kubernetes API; networks that take the node\'s subnet stay not ready');
    return unavailableSource((err as Error).message);
  }
}

function unavailableSource(why: string): NodeSource {
  return {
    description: 'the Kubernetes API',
    start() {},
    async stop() {},
    nodes: () => [],
    onChange() {},
    state: () => ({ state: 'unreachable', detail: why }),
  };
}

export interface ClusterDeps {
  config: () => KnitConfig;
  runner: DaemonActionRunner;
  log: Logger;
  metrics: KnitMetrics;
  source: NodeSource;
  nodeName: string;
  /** Does a pod hold an address in this network and family? */
  held(network: string, family: IpFamily): boolean;
  /** The networks IPAM and the strategies should use changed (a subnet was learned). */
  onNetworks(networks: NetworkConfig[]): Promise<void>;
  ipv6PerDeviceForwarding: boolean;
  /** Where the last node list read is kept (under runDir): after a restart while the API is
   * down, the node's subnets are known at once, and its pods' addresses still fit. */
  cacheFile: string;
}

export class ClusterController {
  private current: NetworkConfig[] = [];
  private waiting = new Map<string, string>();
  private plans: NetworkPlan[] = [];
  /** Peers knit does not route, and why; what the log has said of them (once per problem). */
  private refused = new Map<string, PeerRefusal>();
  private refusalsLogged = new Map<string, string>();
  private statuses: ClusterNetworkStatus[] = [];
  private timer: NodeJS.Timeout | undefined;
  private resync: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();
  private again = false;
  private changedAt = 0;
  private everSynced = false;
  private stopped = false;
  /** The node list a previous run saw, until the source has one of its own. */
  private cached: ClusterNode[] | undefined;
  private savedJson = '';

  private readonly kernel: ClusterKernel;

  constructor(private readonly deps: ClusterDeps) {
    this.kernel = new ClusterKernel(deps.runner, deps.log);
    const { metrics } = deps;
    metrics.clusterSourceState.setEach(() => (['starting', 'synced', 'unreachable'] as const).map((state) => ({ labels: { state }, value: deps.source.state().state === state ? 1 : 0 })));
    metrics.clusterSubnetConflicts.set({}, () => this.conflicts());
    metrics.clusterPeers.setEach(() => this.statuses.flatMap((s) => [
      { labels: { network: s.network, state: 'in_place' }, value: s.peers.filter((p) => p.inPlace).length },
      { labels: { network: s.network, state: 'not_routed' }, value: s.peers.filter((p) => !p.inPlace).length },
    ]));
    metrics.clusterRefusedPeers.setEach(() => REFUSAL_REASONS.map((reason) => ({ labels: { reason }, value: [...this.refused.values()].filter((r) => r.reasons.includes(reason)).length })));
    try {
      this.cached = JSON.parse(readFileSync(deps.cacheFile, 'utf8')) as ClusterNode[];
      this.savedJson = JSON.stringify(this.cached);
    } catch {
      /* none yet, or unreadable: the source's own list will do */
    }
  }

  /** The source's list once it has one; before that, what the last run saw. */
  private view(): ClusterNode[] {
    const { source } = this.deps;
    if (this.everSynced || source.state().state === 'synced' || !this.cached) return source.nodes();
    return this.cached;
  }

  /** Networks whose subnet is held back for the pods in it (node-networks.ts says so). */
  private conflicts(): number {
    return [...this.waiting.values()].filter((why) => /pods (still )?hold addresses/.test(why)).length;
  }

  /** The networks with node subnets filled in (a network still waiting has no pools). */
  networks(): NetworkConfig[] {
    return this.current;
  }

  /** Networks not ready because of the cluster view, and why. */
  notReady(): Map<string, string> {
    return this.waiting;
  }

  /** Starts reading the node list and takes the first view of it (the daemon then sets up
   * the networks and calls reconcileNow); every later change schedules a reconcile. */
  async begin(): Promise<void> {
    const { source } = this.deps;
    source.onChange(() => this.schedule());
    source.start();
    this.resync = setInterval(() => this.schedule(), RESYNC_MS);
    this.resync.unref();
    await source.waitSynced?.(FIRST_VIEW_MS);
    this.resolve();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.resync);
    await this.deps.source.stop();
    await this.running;
  }

  /** Node subnets for the config's networks, from the view as it stands. */
  private resolve(config = this.deps.config()): boolean {
    const { source, nodeName } = this.deps;
    const node = this.view().find((n) => n.name === nodeName);
    const s = source.state();
    const where = s.state === 'synced' ? source.description : `${source.description} (${s.state}: ${s.detail})`;
    const r = nodeNetworks({ networks: config.networks, nodeName, node, source: where, previous: this.current, held: this.deps.held });
    const changed = JSON.stringify(r.networks) !== JSON.stringify(this.current);
    this.current = r.networks;
    this.waiting = r.notReady;
    return changed;
  }

  /** A reload's literal node list (cluster.nodes): the routes follow it. */
  replaceNodes(nodes: ClusterSettings['nodes']): void {
    if (nodes && this.deps.source instanceof StaticNodes) this.deps.source.replace(nodes);
  }

  /** For a config reload: what the new config's networks become on this node. */
  networksFor(config: KnitConfig): NetworkConfig[] {
    this.resolve(config);
    return this.current;
  }

  schedule(): void {
    if (this.stopped) return;
    if (!this.changedAt) this.changedAt = performance.now();
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.reconcileNow();
    }, SETTLE_MS);
  }

  /** One pass at a time; a change during a pass gets another. */
  reconcileNow(): Promise<void> {
    if (this.again) return this.running;
    this.again = true;
    this.running = this.running.then(async () => {
      this.again = false;
      const started = this.changedAt || performance.now();
      this.changedAt = 0;
      try {
        await this.pass();
        this.deps.metrics.clusterReconcileSeconds.observe((performance.now() - started) / 1000, { outcome: 'ok' });
      } catch (err) {
        this.deps.metrics.clusterReconcileSeconds.observe((performance.now() - started) / 1000, { outcome: 'error' });
        this.deps.log.error({ err: (err as Error).message }, 'cluster reconcile failed; the next change or resync tries again');
      }
    });
    return this.running;
  }

  private async pass(): Promise<void> {
    const { source, log } = this.deps;
    const state = source.state();
    if (state.state === 'synced') this.everSynced = true;
    if (this.resolve()) {
      await this.deps.onNetworks(this.current);
      log.info({ networks: this.current.map((n) => ({ name: n.name, ipv4: n.ipv4?.subnet, ipv6: n.ipv6?.subnet })), waiting: Object.fromEntries(this.waiting) }, 'node subnets');
    }
    for (const [network, why] of this.waiting) log.warn({ network, why }, 'network not ready');
    // A subnet held back for its pods moves once they are gone: look again soon.
    if (this.conflicts() && !this.stopped) setTimeout(() => this.schedule(), CONFLICT_RETRY_MS).unref();
    // Until the node list was read once, it says nothing about the peers: knit changes no
    // route (after a restart with the API down, the routes its predecessor made stay).
    if (!this.everSynced) return;
    const ready = this.current.filter((n) => n.crossNode && (n.ipv4 || n.ipv6));
    const kernel = await this.readKernel();
    const nodes = source.nodes();
    const self = nodes.find((n) => n.name === this.deps.nodeName);
    const linkNames = new Map(kernel.links.map((l) => [l.index, l.name]));
    const defaultLinks = kernel.routes.filter((r) => r.dst === 'default' && r.index).map((r) => linkNames.get(r.index!)!).filter(Boolean);
    this.refused = refusedPeers({ self: this.deps.nodeName, nodes, ownBlocks: this.ownBlocks(self), ownAddresses: [...kernel.addrs.map((a) => a.address), ...(self?.internalIPs ?? [])] });
    this.logRefusals();
    const refused = this.refused;
    this.plans = ready.map((net) => planNetwork({ net, self, nodes, addrs: kernel.addrs, linkNames, defaultLinks, refused }));
    let made = false;
    for (const plan of this.plans) if (plan.vtep) made = (await this.kernel.ensureVtep(plan.vtep, kernel)) || made;
    await this.kernel.removeVtepsExcept(this.plans.flatMap((p) => (p.vtep ? [p.vtep.name] : [])), kernel);
    const view = made ? await this.readKernel() : kernel;
    const { ops, differences } = reconcile(this.plans, view);
    if (ops.length) {
      await this.kernel.apply(ops);
      log.info({ changes: differences }, 'cluster routes reconciled');
    }
    // The node list for a restart without the API, saved once the routes are in (it decides no
    // route: until the API answers, a restarted knit changes none).
    const seen = JSON.stringify(nodes);
    if (seen !== this.savedJson) {
      await atomicWriteFile(this.deps.cacheFile, seen);
      this.savedJson = seen;
    }
    await this.kernel.switchOn(this.forwardingKeys());
    const cluster = this.deps.config().cluster;
    // A refused peer's block is not the cluster's: a peer claiming 0.0.0.0/1 must not stop
    // this node's pods from being masqueraded.
    const members = nodes.filter((n) => !refused.has(n.name));
    if (cluster) await this.kernel.masquerade(clusterNatTable(), masqueradeRuleset({ table: clusterNatTable(), networks: this.current.filter((n) => n.ipv4 || n.ipv6), nodes: members, cluster }));
    const after = ops.length ? await this.readKernel() : view;
    this.statuses = this.networkStatuses(after);
  }

  /** This node's blocks no peer's may overlap: its podCIDRs, and the subnet of each of its
   * networks (one kept for the pods in it after the podCIDR moved, a network of its own). */
  private ownBlocks(self: ClusterNode | undefined): OwnBlock[] {
    const blocks: OwnBlock[] = (self?.podCIDRs ?? []).map((cidr) => ({ cidr, what: `this node's podCIDR ${cidr}` }));
    for (const net of this.current) {
      for (const pool of [net.ipv4, net.ipv6]) {
        if (pool && !blocks.some((b) => b.cidr === pool.subnet)) blocks.push({ cidr: pool.subnet, what: `${pool.subnet}, the subnet of this node's network ${net.name}` });
      }
    }
    return blocks;
  }

  /** A log line when a peer is refused or its problem changes, and when it no longer is: not
   * one per pass (a resync every minute would repeat them all). */
  private logRefusals(): void {
    for (const [node, r] of this.refused) {
      if (this.refusalsLogged.get(node) !== r.problem) this.deps.log.warn({ node, reasons: r.reasons, problem: r.problem }, 'not routing a node that conflicts with this one or with an older Node');
    }
    for (const node of this.refusalsLogged.keys()) {
      if (!this.refused.has(node)) this.deps.log.info({ node }, 'node no longer refused');
    }
    this.refusalsLogged = new Map([...this.refused].map(([node, r]) => [node, r.problem]));
  }

  private networkStatuses(kernel: KernelView): ClusterNetworkStatus[] {
    return this.plans.map((p) => {
      const net = this.current.find((n) => n.name === p.network);
      return { network: p.network, crossNode: net?.crossNode, subnets: [net?.ipv4?.subnet, net?.ipv6?.subnet].filter((s): s is string => !!s), peers: peersInPlace(p, kernel).map(({ routes: _r, ...peer }) => peer) };
    });
  }

  private readKernel() {
    return this.kernel.read(this.plans.flatMap((p) => (p.vtep ? [p.vtep.name] : [])));
  }

  /** Forwarding on exactly the devices cross-node traffic enters by: the bridge, the uplinks,
   * the VTEP (IPv4 per device; IPv6 per device on Linux 6.17+, else it needs the host's global
   * switch, which knit leaves as it finds it: docs/cluster.md). */
  private forwardingKeys(): string[] {
    const keys: string[] = [];
    for (const dev of new Set(this.plans.flatMap((p) => p.forwarding))) {
      const nets = this.plans.filter((p) => p.forwarding.includes(dev)).map((p) => this.current.find((n) => n.name === p.network));
      keys.push(`net.ipv4.conf.${dev}.forwarding`);
      if (this.deps.ipv6PerDeviceForwarding && nets.some((n) => n?.ipv6)) keys.push(`net.ipv6.conf.${dev}.force_forwarding`);
    }
    return keys;
  }

  /** NodeStatus's view: the node, where its list comes from, and per network its peers. */
  async status(): Promise<{ node: string; source: string; state: string; detail: string; networks: ClusterNetworkStatus[] }> {
    const s = this.deps.source.state();
    const networks = this.plans.length ? this.networkStatuses(await this.readKernel()) : this.statuses;
    return { node: this.deps.nodeName, source: this.deps.source.description, state: s.state, detail: s.detail, networks };
  }

  /** `knit check --node`: what the kernel lacks or holds beyond the node list, changing nothing. */
  async check(): Promise<string[]> {
    const kernel = await this.readKernel();
    const problems = this.plans.flatMap((p) => [
      ...(p.problem ? [`network ${p.network}: ${p.problem}`] : []),
      ...p.peers.filter((x) => x.problem).map((x) => `network ${p.network}: node ${x.node}: ${x.problem}`),
    ]);
    for (const p of this.plans) {
      if (!p.vtep) continue;
      const have = kernel.links.find((l) => l.name === p.vtep!.name);
      if (!have) problems.push(`network ${p.network}: VTEP ${p.vtep.name} is missing`);
      else for (const d of vtepDrift(have, p.vtep, kernel.links)) problems.push(`network ${p.network}: VTEP ${p.vtep.name}: ${d}`);
    }
    return [...problems, ...reconcile(this.plans, kernel).differences];
  }
}
