// `knit serve`: the composition root. Loads the config (or the embedded default), opens the
// records, rebuilds IPAM from them, repairs whatever a crash left, sets up the networks' host
// side, and serves the API. Nothing below this file knows how the others are wired.
import path from 'node:path';
import { mkdir } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import pino from 'pino';
import { diffNetworks, loadConfig, watchConfig, type KnitConfig, type NetworkConfig } from '../config/index.js';
import { refuseInsecureDirs } from '../config/permissions.js';
import { makeProcSysWritable } from '../net/proc-sys.js';
import { RecordStore } from '../store/index.js';
import { Ipam } from '../ipam/index.js';
import { DaemonActionRunner } from './action-runner.js';
import { ChainSlots } from '../cni-exec/slots.js';
import { peerCred } from '../net/peercred.js';
import { SandboxManager } from '../core/manager.js';
import type { ManagerHooks } from '../core/ports.js';
import type { Failpoint } from '../core/executor.js';
import { Reaper } from '../core/reaper.js';
import { recover } from '../core/recovery.js';
import { attachedCount } from '../core/node-status.js';
import { ensureNetwork, removeMovedGateways, removeNetwork } from '../core/networks.js';
import { policyTable, setInstance } from '../base/names.js';
import { SANDBOX_RECORD_VERSION, type SandboxRecord } from '../core/record.js';
import type { Extension, SandboxService } from '../base/types.js';
import { startApiServer } from '../api/server.js';
import { callExtension } from '../api/extension-client.js';
import { strategies } from '../../runtimes/index.js';
import type { NetworkSpec } from '../base/strategy.js';
import { ExtensionRegistry } from './extensions.js';
import { KnitMetrics, startMetricsServer } from './metrics.js';
import { failpointsFromEnv } from './failpoints.js';
import { NetnsChecker } from './netns-checker.js';
import { PinnedNetns } from './pinned-netns.js';
import { HandoffTokens, startHandoffServer } from './tap-fd-server.js';
import { publishLinkEvents } from './link-events.js';
import { scheduleGoneNetnsSweeps } from './gone-netns-sweeps.js';
import { startGuestDhcpWhenNeeded } from './guest-dhcp-gate.js';
import { CniFrontend } from '../cni-frontend/handler.js';
import { answer, startCniServer } from '../cni-frontend/server.js';
import { DeleteQueue, FAILED_DIR } from '../cni-frontend/delete-queue.js';
import { installProblems, installRecordPath } from '../cni-frontend/install.js';
import { makePeerGate } from '../api/peer-gate.js';
import type { ClusterController } from './cluster.js';
import type { PolicyController } from './policy.js';

export interface ServeOptions {
  config?: string;
}

/** Keys a running daemon cannot change under its clients' feet: they wait for a restart. */
const RESTART_KEYS = ['socket', 'runDir', 'stateDir', 'handoffSocket', 'cniSocket', 'cniDeleteQueue', 'cniDeleteRetry', 'metricsAddress', 'instance', 'logLevel', 'allowedUids', 'dra', 'secondaryNetworks', 'cniParallelChains'] as const;

/** Linux 6.17+ forwards IPv6 per device (see NetworkSpec.ipv6PerDeviceForwarding). */
const ipv6PerDeviceForwarding = existsSync('/proc/sys/net/ipv6/conf/all/force_forwarding');

export function networkSpecs(networks: NetworkConfig[]): Map<string, NetworkSpec> {
  return new Map(networks.map((n) => [n.name, { ...n, ipv6PerDeviceForwarding }]));
}

/** From SIGTERM to exit at the latest: calls get 2 s of grace, the reaper's last batch the rest. */
const STOP_DEADLINE_MS = 10_000;

/** The latency histograms' labels, one object each, so each series' key is made once. */
const OUTCOME_OK = { outcome: 'ok' };
const OUTCOME_ERROR = { outcome: 'error' };

export async function serve(opts: ServeOptions): Promise<void> {
  const loaded = await loadConfig(opts.config);
  let config = loaded.config;
  const log = pino({ level: config.logLevel, base: { pid: process.pid } });
  setInstance(config.instance);
  log.info({ config: loaded.source }, 'knit starting');
  // Before anything is made: a directory another user can write would steer a root daemon.
  refuseInsecureDirs(config);
  // Run from the DaemonSet, the runtime hands knit /proc/sys read-only; it writes the node's
  // network sysctls (src/net/proc-sys.ts). Elsewhere this changes nothing.
  try {
    if (makeProcSysWritable()) log.info('remounted /proc/sys read-write in knit\'s own mount namespace (a container runtime mounted it read-only)');
  } catch (e) {
    log.warn({ err: (e as Error).message }, '/proc/sys is read-only and knit cannot remount it: sysctl changes (forwarding, route_localnet) will fail');
  }

  await mkdir(config.runDir, { recursive: true, mode: 0o700 });
  await mkdir(config.stateDir, { recursive: true, mode: 0o700 });
  const storeProblem = (p: { file: string; reason: string }) => log.warn(p, 'record store');
  const records = await RecordStore.open<SandboxRecord>(path.join(config.runDir, 'sandboxes'), undefined, {
    onProblem: storeProblem,
    formatVersion: SANDBOX_RECORD_VERSION,
    summarize: (doc) => (doc as SandboxRecord).state,
  });
  const extensionStore = await RecordStore.open<Extension>(path.join(config.stateDir, 'extensions'), undefined, { onProblem: storeProblem });

  const { beforeCniAdd, draPrepareFailpoint, ...planFailpoints } = failpointsFromEnv(process.env, log);
  const runner = new DaemonActionRunner({
    log: ({ plugin, command, sandboxId, stderr }) => log.warn({ sandboxId, plugin, command, stderr }, 'CNI plugin stderr'),
    beforeAdd: beforeCniAdd,
    slots: new ChainSlots(config.cniParallelChains),
  });
  const metrics = new KnitMetrics();
  // The DRA driver first, when configured (its modules load only then): the kubelet's sockets
  // answer while the sandboxes are repaired and the cluster view is read, which after a kill -9
  // on a node with pods, or with the API slow to list, take seconds (bench/README.md, "The DRA
  // driver: memory and restart"). Its Unprepare waits for the sandbox service (wrap, below).
  const draStarting = config.dra ? startDraDriver(config, runner, log, metrics, draPrepareFailpoint) : undefined;
  draStarting?.catch(() => undefined); // awaited below; a failure fails the start there
  // A network that spans the cluster takes its subnet from the node list: the controller (and,
  // without a literal list, src/kube) exists only then, so `knit serve` alone loads neither.
  let cluster: ClusterController | undefined;
  const ipam = new Ipam([]);
  if (config.cluster) {
    const { ClusterController: Controller, clusterNodeName, openNodeSource } = await import('./cluster.js');
    const nodeName = clusterNodeName(config.cluster);
    cluster = new Controller({
      config: () => config,
      runner,
      log,
      metrics,
      source: await openNodeSource(config.cluster, log),
      nodeName,
      held: (network, family) => ipam.holdings().some((h) => h.network === network && h.family === family),
      onNetworks: (networks) => useNetworks(networks),
      ipv6PerDeviceForwarding,
      cacheFile: path.join(config.runDir, 'cluster-nodes.json'),
    });
    await cluster.begin();
    log.info({ node: nodeName, nodes: (await cluster.status()).source }, 'cluster view');
  }
  /** The networks as IPAM and the strategies see them: node subnets filled in. */
  const usable = (c: KnitConfig) => (cluster ? cluster.networksFor(c) : c.networks);
  ipam.reconfigure(usable(config));
  const reaper = new Reaper(runner, (err) => log.warn({ err: err.message }, 'reaper'));
  /** What works otherwise than a network asks, though it serves (NodeStatus's message says it). */
  let networkCautions: string[] = [];
  /** Sets up the host side of networks; answers the ones that are not ready, with why. */
  const setUpNetworks = async (networks: KnitConfig['networks']) => {
    const notReady = new Map<string, string>();
    const cautions: string[] = [];
    for (const net of networks) {
      await ensureNetwork(runner, net).then((said) => {
        for (const caution of said) log.warn({ network: net.name, caution }, 'network works otherwise than configured');
        cautions.push(...said.map((c) => `network ${net.name}: ${c}`));
      }, (err: Error) => {
        notReady.set(net.name, err.message);
        log.error({ network: net.name, err: err.message }, 'network not ready');
      });
    }
    networkCautions = cautions;
    return notReady;
  };
  let unready = await setUpNetworks(usable(config));
  let specs = networkSpecs(usable(config));
  /** A node subnet learned or changed: the bridge first, then the pools, then the switch. */
  const useNetworks = async (networks: NetworkConfig[]) => {
    const before = specs;
    const nextUnready = await setUpNetworks(networks);
    ipam.reconfigure(networks);
    specs = networkSpecs(networks);
    unready = nextUnready;
    for (const net of networks) {
      const old = before.get(net.name);
      if (old) await removeMovedGateways(runner, old, net);
    }
  };

  // NetworkPolicy, only when configured: its modules (and the API client) load only then. The
  // controller takes the start-up repair's releases, and starts on the records that are left.
  const policy = config.networkPolicy ? await openPolicy(config, runner, records, log, cluster, metrics) : undefined;
  if (!config.networkPolicy) {
    // Turned off: knit's own policy table goes (nothing of anyone else's).
    await runner.runHostAction(undefined, { op: 'nft.delete', family: 'inet', table: policyTable(), ignoreMissing: true }).catch((err: Error) => log.warn({ err: err.message }, 'cannot remove the NetworkPolicy table'));
  }
  const repaired = await recover(records, ipam, runner, reaper);
  log.info({ ...repaired, kept: repaired.kept.length }, 'start-up repair done');
  // Routes to the other nodes: adopted as found, only differences changed.
  await cluster?.reconcileNow();
  await policy?.start();
  // A call that succeeds is counted (the histograms) and streamed (`knit watch`), and logged
  // only at debug: an info line per attach and per detach cost each call ~0.1 ms and a pool hop
  // for the write (bench/README.md, "Issue 27's per-call targets"). Failures stay at warn.
  const hooks: ManagerHooks = {
    ...planFailpoints,
    onAttach: (sandboxId, ms, err) => {
      metrics.attachSeconds.observe(ms / 1000, err ? OUTCOME_ERROR : OUTCOME_OK);
      if (err) {
        metrics.errors.inc({ rpc: 'attach', code: err.code });
        log.warn({ sandboxId, ms, code: err.code, err: err.message }, 'attach failed');
      } else log.debug({ sandboxId, ms }, 'attached');
    },
    onDetach: (sandboxId, ms, err) => {
      metrics.detachSeconds.observe(ms / 1000, err ? OUTCOME_ERROR : OUTCOME_OK);
      if (err) {
        metrics.errors.inc({ rpc: 'detach', code: err.code });
        log.warn({ sandboxId, ms, code: err.code, err: err.message }, 'detach failed');
      } else log.debug({ sandboxId, ms }, 'detached');
    },
    onGoneNetnsSweep: (trigger) => metrics.goneNetnsSweeps.inc({ trigger }),
    onReaped: (sandboxId, netns, trigger, err) => {
      if (err) log.warn({ sandboxId, netns: netns.path, trigger, code: err.code, err: err.message }, 'sandbox with a gone netns: detach failed; the next sweep tries again');
      else {
        metrics.sandboxesReaped.inc({ reason: 'netns-gone' });
        log.warn({ sandboxId, netns: netns.path, trigger }, 'sandbox detached: its network namespace is gone');
      }
    },
  };
  const tokens = new HandoffTokens(config.handoffSocket);
  const extensions = new ExtensionRegistry(extensionStore, callExtension, () => config.requiredExtensions, (f) => log.warn(f, 'extension call failed'));
  let cniDeletes: DeleteQueue | undefined; // made once the CNI frontend exists, below
  const conditions = async () => {
    const failed = cniDeletes?.failedFiles() ?? [];
    return [...networkCautions, ...(failed.length ? [`CNI delete queue: ${failed.length} queued DEL(s) gave up (${path.join(config.cniDeleteQueue, FAILED_DIR)})`] : [])];
  };
  const manager = new SandboxManager({
    networks: () => specs,
    defaultNetwork: () => config.defaultNetwork,
    unreadyNetworks: () => (cluster ? new Map([...unready, ...cluster.notReady()]) : unready),
    records,
    ipam,
    runner,
    netns: new NetnsChecker(),
    strategies,
    extensions,
    reaper,
    handoff: tokens,
    hooks,
    sysfsRoot: () => config.sysfsRoot,
    danDir: () => config.kata.danDir,
    pathExists: existsSync,
    conditions,
    ...(cluster && { cluster }),
    ...(policy && { policy: { enforces: (network: string) => config.networkPolicy?.networks.includes(network) ?? false, status: () => policy.status() } }),
  });
  metrics.sandboxes.set({}, () => attachedCount(records));
  // The pools IPAM has now: a config reload adds and removes networks.
  const pools = () => ipam.networks().flatMap((network) => ipam.usage(network).map((p) => ({ p, labels: { network, family: String(p.family) } })));
  metrics.poolUsed.setEach(() => pools().map(({ p, labels }) => ({ labels, value: p.used })));
  metrics.poolSize.setEach(() => pools().map(({ p, labels }) => ({ labels, value: p.size })));

  const dra = await draStarting;
  const service: SandboxService = dra ? dra.wrap(manager) : manager;

  // Sandboxes whose netns went while knit was down: their addresses are free before the API answers.
  await manager.reapGoneNetns('start-up').catch((err: Error) => log.warn({ err: err.message }, 'gone-netns sweep failed'));
  const goneSweeps = scheduleGoneNetnsSweeps({ sweep: (trigger) => manager.reapGoneNetns(trigger), intervalSeconds: () => config.goneNetnsSweepSeconds, log });
  const stopLinkEvents = publishLinkEvents(manager, records, log, goneSweeps.prompt);
  const guestDhcp = startGuestDhcpWhenNeeded({
    records, watch: (l) => manager.watch(l), networks: () => specs, defaultNetwork: () => config.defaultNetwork, log,
    netnsFileGone: goneSweeps.promptFileGone,
    observe: (o, frames) => metrics.dhcpFrames.inc({ result: o.result, detail: 'kind' in o ? o.kind : o.reason }, frames),
  });
  metrics.dhcpResponders.set({}, () => guestDhcp.size());
  const pinned = await PinnedNetns.open(config.runDir, storeProblem);
  // Queued DELs first: once the API answers, what the shim queued while knit was down is done.
  const installRecord = installRecordPath(config.stateDir);
  // knit in Multus's place, only when configured: its modules (and the API client) load only then.
  const secondary = config.secondaryNetworks ? await startSecondary(() => config, () => specs, service, records, log) : undefined;
  const cniFrontend = new CniFrontend(service, { installProblems: () => installProblems(installRecord), ...(secondary && { secondary: secondary.frontend }) });
  cniDeletes = new DeleteQueue({
    dir: config.cniDeleteQueue,
    run: (request) => answer(cniFrontend, request),
    log,
    ...config.cniDeleteRetry,
    onFailed: () => metrics.cniDeletesFailed.inc(),
  });
  const drained = await cniDeletes.drain();
  metrics.cniDeletesFailedPending.set({}, () => cniDeletes?.failedFiles().length ?? 0);
  if (drained.done || drained.failed) log.info(drained, 'queued CNI deletes carried out');
  const cni = await startCniServer({
    socketPath: config.cniSocket,
    frontend: cniFrontend,
    allow: makePeerGate({ allowedUids: config.allowedUids, peerCred: (fd) => peerCred(fd), logger: log, socketPath: config.cniSocket }),
    log,
  });
  const api = await startApiServer({
    socketPath: config.socket,
    service,
    allowedUids: config.allowedUids,
    logger: log,
    peerCred: (fd) => peerCred(fd),
    defaultNetnsDir: config.netnsDir,
    createNetns: (p) => pinned.create(p),
    deleteNetns: (idOrPath) => pinned.delete(idOrPath),
    claimNetns: (p, id) => pinned.claim(p, id),
    isPinned: (p) => pinned.isPinned(p),
    ...(policy && { explainPolicy: policy.explain }),
  });
  const handoff = await startHandoffServer({
    socketPath: config.handoffSocket, tokens, records, runOps: (ns, ops) => runner.runOps(ns, ops), allowedUids: config.allowedUids, log,
  });
  const metricsServer = config.metricsAddress
    ? await startMetricsServer(config.metricsAddress, metrics, () => manager.nodeStatus())
    : undefined;

  const stopWatch = opts.config
    ? watchConfig(opts.config, async (next) => {
        refuseInsecureDirs(next); // a reload must not bring in what start-up refuses
        // New bridges first, then the pools (which refuse, keeping the old config, if a held
        // address would not fit), then the switch: attaches meanwhile see the old config whole.
        // The node list of a literal map follows the file; the rest of "cluster" (where the
        // list comes from, this node's name) waits for a restart.
        const { nodes: _nodes, ...clusterRest } = next.cluster ?? {};
        const { nodes: _old, ...clusterOld } = config.cluster ?? {};
        if (JSON.stringify(clusterRest) !== JSON.stringify(clusterOld)) log.warn({ key: 'cluster' }, 'cluster settings other than cluster.nodes take effect at the next restart');
        cluster?.replaceNodes(next.cluster?.nodes);
        // The literal policy view follows the file; the rest of networkPolicy waits for a restart.
        const { literal: lit, ...policyRest } = next.networkPolicy ?? {};
        const { literal: _lit, ...policyOld } = config.networkPolicy ?? {};
        if (JSON.stringify(policyRest) !== JSON.stringify(policyOld) || !!lit !== !!_lit) log.warn({ key: 'networkPolicy' }, 'networkPolicy settings other than networkPolicy.literal take effect at the next restart');
        else if (lit) policy?.replaceLiteral(lit);
        const nextNetworks = usable(next);
        const nextUnready = await setUpNetworks(nextNetworks);
        ipam.reconfigure(nextNetworks);
        const changes = diffNetworks(config.networks, next.networks);
        const needRestart = RESTART_KEYS.filter((k) => JSON.stringify(config[k]) !== JSON.stringify(next[k]));
        if (needRestart.length) log.warn({ networks: changes, keys: needRestart }, 'config reloaded; these keys take effect at the next restart');
        else log.info({ config: opts.config, networks: changes }, 'config reloaded');
        const dropped = config.networks.filter((old) => changes.removed.includes(old.name));
        config = next;
        specs = networkSpecs(nextNetworks);
        unready = nextUnready;
        cluster?.schedule();
        // Unused by now (reconfigure refused otherwise): the bridges knit made for them go.
        for (const net of dropped) await removeNetwork(runner, net).catch((err: Error) => log.warn({ network: net.name, err: err.message }, 'cannot remove the bridge of a dropped network'));
      }, (err) => log.error({ err: err.message }, 'config reload rejected; keeping the running config'))
    : () => undefined;

  log.info({ socket: config.socket, networks: config.networks.map((n) => n.name), metrics: config.metricsAddress ?? 'off' }, 'knit ready');

  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      log.info({ signal }, 'knit stopping');
      resolve();
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  // Each server below ends its connections after a grace period; should anything else hang,
  // the process still exits, leaving the sandboxes attached as a stop always does.
  setTimeout(() => {
    log.error({ deadlineMs: STOP_DEADLINE_MS }, 'knit did not stop in time; exiting anyway');
    process.exit(1);
  }, STOP_DEADLINE_MS).unref();
  stopWatch();
  // The cross-node routes, VTEP and masquerade table stay: a restart must not interrupt traffic.
  await cluster?.stop();
  // The policy table stays: a restart must not open what it closes.
  await policy?.stop();
  cniDeletes.stop();
  stopLinkEvents();
  guestDhcp.close();
  goneSweeps.stop();
  await api.close();
  await dra?.close();
  await handoff.close();
  await cni.close();
  await secondary?.close();
  metricsServer?.close();
  await reaper.reapNow();
  reaper.stop();
  runner.close();
  log.info({}, 'knit stopped');
}

/** knit in Multus's place: the NADs' source, the CNI frontend's side, and the hot-plug of a
 * running pod whose networks annotation changes. */
async function startSecondary(config: () => KnitConfig, specs: () => Map<string, NetworkSpec>, service: SandboxService, records: RecordStore<SandboxRecord>, log: pino.Logger) {
  const [{ startSecondaryNetworks, delUnrecordedAttachments }, { PodNetworksFrontend }, { PodHotplug }] = await Promise.all([
    import('./secondary-networks.js'), import('../cni-frontend/secondary.js'), import('../cni-frontend/pod-hotplug.js'),
  ]);
  const part = log.child({ part: 'secondary-networks' });
  // What a reboot left: the NADs' chains of pods knit no longer records (runDir is a tmpfs).
  await delUnrecordedAttachments(config().secondaryNetworks!, records.values(), part);
  const networks = await startSecondaryNetworks({
    settings: () => config().secondaryNetworks!,
    knitNetwork: (name) => specs().get(name),
    log: part,
    userAgent: 'knit/secondary-networks',
  });
  const hotplug = new PodHotplug(service, networks.port, part);
  networks.onPodNetworks((pod, annotations) => void hotplug.reconcile(pod, annotations));
  return { frontend: new PodNetworksFrontend(service, networks.port), close: () => networks.close() };
}

async function startDraDriver(config: KnitConfig, runner: DaemonActionRunner, log: pino.Logger, metrics: KnitMetrics, prepareFailpoint?: Failpoint) {
  const settings = config.dra!;
  const [{ startDra }, { kubeApi }] = await Promise.all([import('../dra/index.js'), import('./kube-api.js')]);
  return startDra({
    settings,
    runDir: config.runDir,
    sysfsRoot: config.sysfsRoot,
    runner,
    api: await kubeApi(settings.kubeconfig),
    log: log.child({ part: 'dra' }),
    onRegistration: (registered) => metrics.draRegistrations.inc({ registered: String(registered) }),
    ...(prepareFailpoint && { prepareFailpoint }),
  });
}

async function openPolicy(config: KnitConfig, runner: DaemonActionRunner, records: RecordStore<SandboxRecord>, log: pino.Logger, cluster: ClusterController | undefined, metrics: KnitMetrics): Promise<PolicyController> {
  const { PolicyController: Controller, openPolicySource } = await import('./policy.js');
  const { clusterNodeName } = await import('./cluster.js');
  const settings = config.networkPolicy!;
  const controller = new Controller({
    source: await openPolicySource(settings, config.cluster, log),
    log: log.child({ part: 'network-policy' }),
    nodeName: cluster ? (await cluster.status()).node : clusterNodeName(config.cluster ?? { clusterCIDRs: [], serviceCIDRs: [] }),
    records: () => records.values(),
    metrics,
    ...(settings.logDenied && { logDenied: settings.logDenied }),
  });
  runner.policy = controller.handle;
  return controller;
}
