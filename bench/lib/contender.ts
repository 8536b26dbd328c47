// The contender interface: one way of attaching a sandbox to a bridge network and detaching it.
// The harness owns the sandboxes' netns (made before the clock starts, removed after) and the
// clock; a contender owns its network (bridge, subnet) and whatever process it runs.

/** What the sandbox is wired as. Everything but 'runc' is knit's and the C floor's only (full run). */
export type Flavor = 'runc' | 'kata-tcfilter' | 'kubevirt-tap';

/** One sandbox, as the harness hands it to a contender. */
export interface Sandbox {
  /** Unique in this bench run, e.g. kb7q2-c-17 (CNI_CONTAINERID / knit sandbox_id). */
  id: string;
  /** The netns name under /run/netns (empty for transport-only contenders). */
  netnsName: string;
  /** /run/netns/<netnsName> (empty for transport-only contenders). */
  netnsPath: string;
  /** Interface name inside the sandbox. */
  ifname: string;
  /**
   * Small integer unique among this contender's sandboxes that are attached at the same time
   * (reused after a detach); contenders that pick addresses or host link names derive them from it.
   */
  slot: number;
}

/** The bridge network a contender attaches to; each contender gets its own. */
export interface BenchNetwork {
  /** Bridge name (may not exist yet: CNI creates its own; others are given one). */
  bridge: string;
  /** e.g. 10.213.0.0/16 */
  subnet: string;
  /** First host address of the subnet, the sandboxes' default gateway (on the bridge). */
  gateway: string;
  prefixLength: number;
  /** Sandbox address for a slot, as CIDR: gateway + 1 + slot. */
  addressFor(slot: number): string;
  /** Host-side link name for a slot, unique in the run and at most 15 bytes. */
  hostLinkFor(slot: number): string;
}

export interface SetupContext {
  network: BenchNetwork;
  /** Scratch directory private to this contender; removed at the end of the run. */
  scratch: string;
  /** Register a child process so the harness kills it (by pid) on exit, even on Ctrl-C. */
  trackPid(pid: number, what: string): void;
  /** Prefix every kernel object of this run carries (links, netns). */
  prefix: string;
  /** This contender's one-character tag: after the prefix in the names of its own objects. */
  tag: string;
}

export interface Contender {
  /** Short key used in results and on the command line: cni, floor-c, floor-ip, grpc, knit. */
  readonly name: string;
  /** Human label for tables and charts. */
  readonly label: string;
  /**
   * 'network' contenders do the kernel work and get a fresh netns per sandbox; 'transport'
   * (the empty-RPC baseline) does none and gets sandboxes without a netns.
   */
  readonly kind: 'network' | 'transport';
  /** Flavors it can attach; every network contender does 'runc'. */
  readonly flavors: readonly Flavor[];
  /** How many attach/detach calls may run at once (churn's concurrency is capped by this). */
  readonly maxConcurrency: number;

  /**
   * Prepare: create the bridge, start the daemon, ... Throwing here skips the contender for the
   * run (the report says why), it does not fail the run.
   */
  setup(ctx: SetupContext): Promise<void>;
  /**
   * Attach the sandbox. The harness times the call (client-observed). A contender that measures
   * itself more exactly (the C floor, in-process) returns its own figure in milliseconds.
   */
  attach(sandbox: Sandbox, flavor: Flavor): Promise<number | void>;
  /** Detach what attach made (same timing rule). */
  detach(sandbox: Sandbox): Promise<number | void>;
  /**
   * Wait (untimed) until work the contender deferred past its reply is finished — knit's
   * detach returns before its reaper deletes the veth — so that work is not charged to the
   * next contender in the round. Not called in churn, where deferred work is part of the rate.
   */
  settle?(): Promise<void>;
  /** Get ready (untimed) for this many calls in flight at once, e.g. start helper processes
   * a contender would otherwise start inside the first timed calls of a burst. */
  prepare?(inFlight: number): Promise<void>;
  /** PID of the long-running daemon whose memory the scale run reports, if any. */
  daemonPid?(): number | undefined;
  /** Stop processes, remove the bridge and what setup made. Must not throw for partial setups. */
  teardown(): Promise<void>;
}
