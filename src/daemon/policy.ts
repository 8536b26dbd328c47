// NetworkPolicy on this node (docs/network-policy.md): the cluster's policies, namespaces and
// pods from a PolicySource (the config's literal lists, or the API's informers, loaded only
// then), this node's pods from knit's own records and admits, compiled incrementally
// (src/policy/incremental.ts, pure) into knit's table `inet <instance>-policy` by one nft
// transaction per pass, which writes only what the pass's changes touched. A pod's admit (a
// step of its attach, before its interface exists) returns once its rules are in the kernel.
// The table stays when knit stops; a restart reads it, diffs it whole and changes only what
// differs, and changes nothing until the source has been read once.
import type { Logger } from 'pino';
import { execFile } from 'node:child_process';
import type { SandboxRecord } from '../core/record.js';
import type { PolicyAdmitAction } from '../base/ops.js';
import { policyTable } from '../base/names.js';
import { canonical, ViewIndex } from '../policy/view-index.js';
import type { PolicyRuleset } from '../policy/compile.js';
import { IncrementalCompiler, type LocalInput } from '../policy/incremental.js';
import { committed, emptyKernel, heldWithChanges, mergeTouched, parseKernel, transaction, type KernelPolicy } from '../policy/ruleset.js';
import { forwardVerdict, localVerdict } from '../policy/datapath.js';
import { evaluate } from '../policy/evaluate.js';
import { TierIndex, evaluateTiered } from '../policy/cluster-policy-evaluate.js';
import { addTiers, tierChanges, type TierShare } from '../policy/cluster-policy-compile.js';
import { IncrementalTiers } from '../policy/cluster-policy-incremental.js';
import { tierCounter } from '../policy/cluster-policy-nft.js';
import { KnitError } from '../base/errors.js';
import { familyOfText, type IpFamily } from '../ipam/ip.js';
import type { PolicyAnswer, PolicyQuestion } from '../api/knit-service.js';
import type { PolicySource, SourceChange } from '../policy/types.js';
import type { ClusterSettings, NetworkPolicySettings } from '../config/index.js';
import { nft, type PolicyAction } from './host-actions.js';
import type { KnitMetrics } from './metrics.js';

const CONNTRACK = '/usr/sbin/conntrack';

/** How long start-up waits for the source's first view before serving (rules stay as found). */
const FIRST_VIEW_MS = 5_000;
/** A pass even when nothing changed: what someone removed from the table by hand comes back. */
const RESYNC_MS = 60_000;

/** The configured source: the literal lists, or the API (src/kube loaded only then). */
export async function openPolicySource(settings: NetworkPolicySettings, cluster: ClusterSettings | undefined, log: Logger): Promise<PolicySource> {
  if (settings.literal) {
    const { LiteralPolicies } = await import('../policy/literal.js');
    return new LiteralPolicies(settings.literal, settings.clusterNetworkPolicies);
  }
  const { KubePolicies } = await import('./kube-policy.js');
  try {
    return await KubePolicies.open(settings.kubeconfig ?? cluster?.kubeconfig, log, settings.clusterNetworkPolicies);
  } catch (err) {
    // No kubeconfig, no ServiceAccount: knit still serves, keeps the table it finds, and
    // isolates the pods that come (fail closed) rather than exit in a crash loop.
    const why = (err as Error).message;
    log.error({ err: why }, 'NetworkPolicy cannot reach the Kubernetes API; the table stays as it is and new pods are isolated');
    return {
      description: 'the Kubernetes API', start() {}, async stop() {}, onChange() {}, synced: () => false,
      state: () => ({ state: 'unreachable', detail: why }), view: () => ({ policies: [], namespaces: [], pods: [] }), pod: async () => 'unknown',
    };
  }
}

export interface PolicyDeps {
  source: PolicySource;
  log: Logger;
  nodeName: string;
  records: () => Iterable<SandboxRecord>;
  metrics?: KnitMetrics;
  /** networkPolicy.logDenied: each chain's drop logs to nflog, read into JSON lines. */
  logDenied?: NetworkPolicySettings['logDenied'];
}

/** What a pass applies to the compiler: the source's changes and this node's admits and
 * releases, in the order they came. */
type Change = SourceChange | { kind: 'local'; id: string; input?: LocalInput };

export class PolicyController {
  /** This node's pods, by sandbox, as their admits left them. */
  private readonly local = new Map<string, LocalInput>();
  private kernel: KernelPolicy | undefined;
  /** Whether `kernel` was read from nft since the last transaction: the next one diffs it whole. */
  private kernelRead = false;
  /** Made from the source's whole view at the first pass that has one; then kept up to date
   * change by change (`changes`). */
  private compiler: IncrementalCompiler | undefined;
  private changes: Change[] = [];
  private last: PolicyRuleset | undefined;
  /** The compiler of the last pass, whose view ExplainPolicy judges; and that view indexed,
   * made when first asked. */
  private explained: IncrementalCompiler | undefined;
  private index: ViewIndex | undefined;
  /** The last pass's ClusterNetworkPolicies, indexed on the view ExplainPolicy judges. */
  private tiers: TierIndex | undefined;
  /** The tiers kept compiled on the compiler's share, while ClusterNetworkPolicy is on. */
  private tierCompiler: IncrementalTiers | undefined;
  /** The tiers in the table after the last pass: a pass compares the names that differ too. */
  private lastTiers: TierShare | undefined;
  /** This node's own addresses (from the node list, with ClusterNetworkPolicy on): a flow to
   * one of them meets the input hook. */
  private nodeAddrs = new Set<string>();
  private running: Promise<void> = Promise.resolve();
  private pending = false;
  private timer: NodeJS.Timeout | undefined;
  private resync: NodeJS.Timeout | undefined;
  private stopped = false;
  private started = false;
  private readonly table = policyTable();
  /** Pods admitted while the source had no view yet: isolated until it has one. */
  private readonly admittedUnsynced = new Set<string>();
  /** Policies reported as not expressible, by key and what was said, so each is logged once. */
  private readonly reported = new Map<string, string>();

  /** nft counter name → what it counts, for /metrics; and their last values. */
  private counterOf = new Map<string, { policy: string; direction: string; verdict: string }>();
  private counterValues = new Map<string, number>();
  /** When the first change of the pass to come arrived (for the apply histogram). */
  private changedAt = 0;
  private deniedLog: { close(): Promise<void> } | undefined;

  constructor(private readonly deps: PolicyDeps) {
    const m = deps.metrics;
    if (!m) return;
    m.beforeScrape.push(() => this.readCounters());
    m.policyPackets.setEach(() => [...this.counterOf].map(([name, labels]) => ({ labels, value: this.counterValues.get(name) ?? 0 })));
    m.policyProblems.setEach(() => [...this.reported].map(([policy, said]) => ({ labels: { policy }, value: said.split('; ').length })));
    m.policyIsolated.setEach(() => (['ingress', 'egress'] as const).map((direction) => ({ labels: { direction }, value: this.last ? (direction === 'ingress' ? this.last.maps.in4.size + this.last.maps.in6.size : this.last.maps.out4.size + this.last.maps.out6.size) : 0 })));
    m.policySourceState.setEach(() => (['starting', 'synced', 'unreachable'] as const).map((state) => ({ labels: { state }, value: deps.source.state().state === state ? 1 : 0 })));
  }

  /** The table's named counters, read for a scrape. */
  private async readCounters(): Promise<void> {
    if (!this.counterOf.size) return;
    const out = JSON.parse(await nft(undefined, ['-j', 'list', 'counters', 'table', 'inet', this.table])) as { nftables: { counter?: { name: string; packets: number } }[] };
    this.counterValues = new Map(out.nftables.flatMap((o) => (o.counter ? [[o.counter.name, o.counter.packets] as const] : [])));
  }

  /** Reads this node's pods from the records and the table from the kernel, starts the
   * source and applies the first view (once it has one). */
  async start(): Promise<void> {
    this.started = true;
    for (const rec of this.deps.records()) {
      if (rec.state !== 'attached') continue;
      const admit = rec.steps.find((s) => s.do.op === 'policy.admit')?.do as PolicyAdmitAction | undefined;
      if (admit) this.local.set(rec.sandboxId, { namespace: admit.namespace, name: admit.name, ips: admit.ips, seen: 'unknown' });
    }
    this.kernel = await this.read();
    if (this.deps.logDenied) {
      const { DeniedLog } = await import('./policy-denied-log.js');
      this.deniedLog = DeniedLog.open(this.deps.logDenied, this.deps.log, {
        ruleset: () => this.last,
        podAt: (ip) => {
          const pod = this.explained?.podAt(ip);
          return pod && `${pod.namespace}/${pod.name}`;
        },
      });
    }
    const { source } = this.deps;
    source.onChange((change) => {
      if (change.kind === 'all') this.compiler = undefined; // made again from the whole view
      // A ClusterNetworkPolicy or Node: the pass compares the source's lists with its last.
      else if (change.kind !== 'tiers' && this.compiler) this.changes.push(change);
      this.schedule();
    });
    source.start();
    await source.waitSynced?.(FIRST_VIEW_MS);
    this.resync = setInterval(() => {
      this.kernel = undefined; // read again and diffed whole: a hand edit is put right
      this.schedule();
    }, RESYNC_MS);
    this.resync.unref();
    await this.pass();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.resync);
    await this.deps.source.stop();
    await this.running;
    await this.deniedLog?.close();
  }

  /** The action runner's policy steps (DaemonActionRunner.policy). Before start (the
   * start-up repair's releases) only this node's list changes: start reads it from the
   * records that are left. */
  handle = async (a: PolicyAction): Promise<void> => {
    if (!this.started) return;
    if (a.op === 'policy.admit') {
      const seen = await this.deps.source.pod(a.namespace, a.name);
      if (seen === 'unknown') this.deps.log.warn({ pod: `${a.namespace}/${a.name}` }, 'NetworkPolicy: the pod\'s labels are unknown (the API did not answer); isolated until they are');
      const input = { namespace: a.namespace, name: a.name, ips: a.ips, seen };
      this.local.set(a.sandboxId, input);
      if (this.compiler) this.changes.push({ kind: 'local', id: a.sandboxId, input });
      if (!this.deps.source.synced()) this.admittedUnsynced.add(a.sandboxId);
    } else {
      this.admittedUnsynced.delete(a.sandboxId);
      if (!this.local.delete(a.sandboxId)) return;
      if (this.compiler) this.changes.push({ kind: 'local', id: a.sandboxId });
    }
    await this.pass();
  };

  private schedule(): void {
    if (!this.changedAt) this.changedAt = performance.now();
    if (this.stopped || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.pass().catch(() => undefined);
    }, 3);
  }

  /** One pass at a time; changes during a pass get one more. Rejects when this pass's
   * transaction failed (an admit then fails, and its attach rolls back). */
  private pass(): Promise<void> {
    if (this.pending) return this.running;
    this.pending = true;
    const run = this.running.catch(() => undefined).then(async () => {
      this.pending = false;
      const started = this.changedAt || performance.now();
      this.changedAt = 0;
      try {
        await this.apply();
        this.deps.metrics?.policyApplySeconds.observe((performance.now() - started) / 1000, { outcome: 'ok' });
      } catch (err) {
        this.deps.metrics?.policyApplySeconds.observe((performance.now() - started) / 1000, { outcome: 'error' });
        this.kernel = undefined; // what the kernel holds is read again next time
        this.compiler = undefined; // and the share compiled again from the whole view
        this.deps.log.error({ err: (err as Error).message }, 'NetworkPolicy: applying the table failed; the next change or resync tries again');
        throw err;
      }
    });
    this.running = run;
    return run;
  }

  private async apply(): Promise<void> {
    const { source } = this.deps;
    if (!this.kernel) {
      this.kernel = await this.read();
      this.kernelRead = true;
    }
    if (!source.synced()) {
      // Nothing known of the cluster yet: the table stays as it was, except for this node's
      // pods that came or went meanwhile (isolated, fail closed, or taken out).
      const ips = new Set([...this.local.values()].flatMap((l) => l.ips.map(canonical)));
      const fresh = [...this.local.entries()].filter(([id]) => this.admittedUnsynced.has(id)).flatMap(([, l]) => l.ips);
      if (!this.kernel.base && !fresh.length) return; // no table, and nothing to isolate
      const rs = heldWithChanges(this.kernel, (ip) => ips.has(canonical(ip)), fresh);
      const tx = transaction(this.table, this.kernel, rs);
      if (tx) await nft(undefined, ['-f', '-'], tx);
      this.kernel = committed(this.kernel, rs);
      return;
    }
    this.admittedUnsynced.clear();
    // The first pass with a view compiles it whole, and so does one after a failure; the
    // others apply what changed since the last.
    let whole = this.kernelRead;
    if (!this.compiler) {
      const view = source.view();
      this.compiler = new IncrementalCompiler(this.deps.nodeName, this.deps.logDenied);
      this.compiler.load(view);
      for (const [id, l] of this.local) this.compiler.setLocal(id, l);
      this.changes = [];
      this.tierCompiler = undefined; // its parts are the old compiler's pods
      whole = true;
      for (const key of this.reported.keys()) if (!this.compiler.policy(key)) this.reported.delete(key);
      for (const np of view.policies) this.report(`${np.metadata.namespace ?? 'default'}/${np.metadata.name}`);
    }
    const compiler = this.compiler;
    for (const c of this.changes.splice(0)) {
      if (c.kind === 'pod') compiler.setPod(c.key, c.pod);
      else if (c.kind === 'namespace') compiler.setNamespace(c.name, c.namespace);
      else if (c.kind === 'policy') {
        compiler.setPolicy(c.key, c.policy);
        this.report(c.key);
      } else if (c.kind === 'local') compiler.setLocal(c.id, c.input);
    }
    const touched = compiler.flush();
    let rs = compiler.ruleset;
    this.index = undefined;
    this.explained = compiler;
    if (whole || touched.counters.size || this.tiers) this.counterOf = new Map(compiler.counters().map((c) => [c.name, { policy: c.policy, direction: c.direction, verdict: c.verdict }]));
    // ClusterNetworkPolicy: its tiers, kept compiled from pass to pass, added to a copy of the
    // share the compiler keeps (which stays NetworkPolicy's alone). The transaction compares
    // what the compiler touched and the names whose tiers differ from the last pass's: nothing
    // else can differ.
    let share: TierShare | undefined;
    const view = source.view();
    this.tiers = undefined;
    this.nodeAddrs = new Set();
    if (view.clusterNetworkPolicies) {
      const nodes = view.policyNodes ?? [];
      this.index = new ViewIndex({ ...compiler.view(), nodes: Object.fromEntries(nodes.map((n) => [n.name, n.ips])) });
      const tiers = new TierIndex(this.index, view.clusterNetworkPolicies, nodes);
      for (const p of tiers.policies) {
        const said = p.problems.join('; ');
        if (said && this.reported.get(p.key) !== said) this.deps.log.warn({ policy: p.key, problems: p.problems }, 'ClusterNetworkPolicy knit cannot read whole: each rule it cannot read fails closed (an Accept matches nothing, a Deny or Pass denies all)');
        if (said) this.reported.set(p.key, said);
        else this.reported.delete(p.key);
      }
      for (const key of this.reported.keys()) if (key.startsWith('cnp:') && !tiers.policies.some((p) => p.key === key)) this.reported.delete(key);
      this.tierCompiler ??= new IncrementalTiers();
      share = this.tierCompiler.update(tiers, compiler.localShare(), rs, touched);
      rs = addTiers(rs, share);
      this.tiers = tiers;
      this.nodeAddrs = new Set((nodes.find((n) => n.name === this.deps.nodeName)?.ips ?? []).map(canonical));
      for (const p of tiers.policies) {
        for (const direction of ['ingress', 'egress'] as const) {
          for (const [action, verdict] of [['Accept', 'accepted'], ['Deny', 'denied'], ['Pass', 'passed']] as const) {
            const name = tierCounter(p.key, direction, action);
            if (share.counters.has(name)) this.counterOf.set(name, { policy: p.key, direction, verdict });
          }
        }
      }
    } else this.tierCompiler = undefined;
    const only = whole ? undefined : mergeTouched(touched, tierChanges(this.lastTiers, share));
    const tx = transaction(this.table, this.kernel, rs, only);
    if (tx) {
      await nft(undefined, ['-f', '-'], tx);
      this.deps.log.debug({ lines: tx.split('\n').length - 1 }, 'NetworkPolicy table updated');
    }
    this.kernel = committed(this.kernel, rs, only);
    this.kernelRead = false;
    this.lastTiers = share;
    this.last = rs;
    // Only a change that takes something away can deny a flow that was allowed: a pass that
    // only adds allowed elements lists no conntrack table.
    if (tx && /^(delete element|add element inet \S+ (in|out|local)[46] )/m.test(tx)) await this.cutDenied(rs).catch((err: Error) => this.deps.log.warn({ err: err.message }, 'NetworkPolicy: removing conntrack entries of flows now denied failed'));
  }

  /** A policy knit cannot express is logged once per set of problems. */
  private report(key: string): void {
    const p = this.compiler?.policy(key);
    const said = p?.problems.join('; ') ?? '';
    if (said && this.reported.get(key) !== said) this.deps.log.warn({ policy: key, problems: p!.problems }, 'NetworkPolicy knit cannot express: its pods are isolated and none of its rules applied');
    if (said) this.reported.set(key, said);
    else this.reported.delete(key);
  }

  private async read(): Promise<KernelPolicy> {
    try {
      return parseKernel(await nft(undefined, ['-j', '-p', 'list', 'table', 'inet', this.table]));
    } catch (err) {
      if (/No such file or directory/.test((err as Error).message)) return emptyKernel();
      throw err;
    }
  }

  /** Established flows of this node's isolated pods that the table now drops lose their
   * conntrack entries, so their replies stop too (their next original packet is dropped by
   * the table already). */
  private async cutDenied(rs: PolicyRuleset): Promise<void> {
    for (const family of ['ipv4', 'ipv6'] as const) {
      const listed = await conntrack(['-L', '-f', family]);
      for (const line of listed.split('\n')) {
        const flow = parseConntrack(line);
        if (!flow) continue;
        // As the hooks saw it: after any DNAT, so a Service flow is judged on its backend (the
        // reply's source), as the table judges its packets; to this node's own address, by the
        // input hook's maps.
        const pkt = { src: flow.src, dst: flow.replySrc, proto: flow.proto, dport: flow.replySport };
        if ((this.nodeAddrs.has(canonical(pkt.dst)) ? localVerdict : forwardVerdict)(rs, pkt) === 'accept') continue;
        const args = ['-D', '-f', family, '-s', flow.src, '-d', flow.dst, '-p', String(flow.protoName)];
        if (flow.sport !== undefined && flow.dport !== undefined) args.push('--sport', String(flow.sport), '--dport', String(flow.dport));
        await conntrack(args).catch(() => undefined); // gone meanwhile
      }
    }
  }

  /** Where the view comes from and how that is, for NodeStatus. */
  status(): { source: string; state: string; detail: string } {
    return { source: this.deps.source.description, ...this.deps.source.state() };
  }

  /** A config reload's literal lists (networkPolicy.literal). */
  replaceLiteral(literal: NonNullable<NetworkPolicySettings['literal']>): void {
    const src = this.deps.source as { replace?: (l: typeof literal) => void };
    src.replace?.(literal);
  }

  /** ExplainPolicy (`knit policy explain`): the oracle on the view of the last pass. */
  explain = (q: PolicyQuestion): PolicyAnswer => {
    if (this.explained) this.index ??= new ViewIndex(this.explained.view());
    const ix = this.index;
    if (!ix) throw new KnitError('UNAVAILABLE', `no view of the cluster yet (${this.deps.source.description}: ${this.deps.source.state().detail})`);
    const other = (e: PolicyQuestion['from']) => ('ip' in e ? familyOfText(e.ip) : undefined);
    const ipOf = (e: PolicyQuestion['from'], field: 'from' | 'to', family?: IpFamily): string => {
      if ('ip' in e) return e.ip;
      const [namespace, name] = e.pod.split('/');
      const pod = ix.view.pods.find((p) => p.namespace === namespace && p.name === name);
      if (!pod) throw new KnitError('NOT_FOUND', `${field}: no pod ${e.pod} in this node's view of the cluster`, { field });
      const ips = pod.hostNetwork ? pod.ips : pod.ips.filter((ip) => family === undefined || familyOfText(ip) === family);
      if (!ips.length) throw new KnitError('NOT_FOUND', `${field}: pod ${e.pod} has no ${family ? `IPv${family} ` : ''}address yet`, { field });
      return ips[0]!;
    };
    const fromIp = ipOf(q.from, 'from', other(q.to));
    const toIp = ipOf(q.to, 'to', familyOfText(fromIp));
    if (familyOfText(fromIp) !== familyOfText(toIp)) throw KnitError.invalid('to', `${toIp} is not of ${fromIp}'s family`);
    const flow = { src: fromIp, dst: toIp, protocol: q.protocol, ...(q.port !== undefined && { port: q.port }) };
    const v = this.tiers ? evaluateTiered(ix, this.tiers, [], flow) : evaluate(ix, flow);
    return { allowed: v.allowed, fromIp, toIp, egress: v.egress, ingress: v.ingress };
  };

  /** For the tests: the ruleset this node holds now. */
  ruleset(): PolicyRuleset | undefined {
    return this.last;
  }
}

const PROTO_NUMBERS: Record<string, number> = { tcp: 6, udp: 17, sctp: 132, icmp: 1, icmpv6: 58 };

export interface ConntrackFlow {
  protoName: string;
  proto: number;
  /** The original direction's tuple (what `conntrack -D` names). */
  src: string;
  dst: string;
  sport?: number;
  dport?: number;
  /** The reply's source and source port: the original destination after any DNAT. */
  replySrc: string;
  replySport?: number;
}

/** One line of `conntrack -L`: the original direction's tuple, then the reply's. */
export function parseConntrack(line: string): ConntrackFlow | undefined {
  const m = /^(\S+)\s+(\d+)\s/.exec(line);
  if (!m) return undefined;
  const fields = (k: string) => [...line.matchAll(new RegExp(`\\b${k}=(\\S+)`, 'g'))].map((x) => x[1]!);
  const [src, replySrc] = fields('src');
  const [dst] = fields('dst');
  if (!src || !dst || !replySrc) return undefined;
  const [sport, replySport] = fields('sport');
  const [dport] = fields('dport');
  return {
    protoName: m[1]!, proto: PROTO_NUMBERS[m[1]!] ?? Number(m[2]), src, dst, replySrc,
    ...(sport && { sport: Number(sport) }), ...(dport && { dport: Number(dport) }), ...(replySport && { replySport: Number(replySport) }),
  };
}

function conntrack(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(CONNTRACK, args, { maxBuffer: 256 << 20 }, (err, stdout, stderr) => {
      if (!err || /0 flow entries have been (shown|deleted)/.test(stderr)) resolve(stdout);
      else reject(new Error(`conntrack ${args.join(' ')}: ${stderr.trim() || err.message}`));
    });
  });
}
