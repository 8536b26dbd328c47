// The shape of bench/results/<timestamp>.json. Samples are milliseconds, raw (the report
// derives percentiles), so a later reader can recompute anything.

export interface ContenderInfo {
  name: string;
  label: string;
  kind: 'network' | 'transport';
  /** Why it did not take part at all (setup or probe check failed, not wired yet). */
  skipped?: string;
  /** Phases it left early after repeated failures: "churn: dropped after 5 failed calls; last: ...". */
  dropped?: string[];
  /** Its daemon's resident memory (KiB, /proc VmRSS), for contenders that run one: right after
   * setup and its probe attach, and after the latency run. */
  rssKiB?: { idle?: number; afterLatency?: number };
}

/** Resident memory of one contender's daemon over attach/detach cycles (the soak phase). */
export interface SoakResult {
  contender: string;
  concurrency: number;
  /** Cycles done at each sample (the first is 0, before any cycle). */
  cycles: number[];
  /** VmRSS and its anonymous part (heap, malloc) at each sample, KiB. */
  rssKiB: number[];
  rssAnonKiB: number[];
  seconds: number;
  errors: string[];
}

export interface LatencySamples {
  attach: number[];
  detach: number[];
  /** Detach call start until the devices are gone from the kernel (bench/lib/gone.ts). */
  gone?: number[];
  /** Failed calls, one message each (a contender with too many is dropped). */
  errors: string[];
}

export interface ChurnResult {
  contender: string;
  concurrency: number;
  seconds: number;
  /** Completed attach+detach cycles. */
  cycles: number;
  errors: string[];
  attach: number[];
  detach: number[];
}

export interface ScalePoint {
  contender: string;
  /** Sandboxes of this contender already attached while the samples were taken. */
  level: number;
  attach: number[];
  detach: number[];
  /** Daemon VmRSS (KiB) after filling to this level, for contenders with a daemon. */
  rssKiB?: number;
  errors: string[];
}

export interface VariantResult {
  contender: string;
  flavor: string;
  attach: number[];
  detach: number[];
  /** As LatencySamples.gone. */
  gone?: number[];
  skipped?: string;
}

export interface BurstResult {
  contender: string;
  /** Sandboxes attached (then detached) at once. */
  size: number;
  /** Each call's time from the start of its burst (ms). */
  attach: number[];
  detach: number[];
  /** The median over the rounds (--burst-rounds), each round's below. */
  attachWallMs: number;
  detachWallMs: number;
  attachWalls?: number[];
  detachWalls?: number[];
  /** Detach burst start until every sandbox's devices were gone from the kernel. */
  goneWallMs?: number;
  errors: string[];
}

export interface BenchResults {
  version: 1;
  run: {
    prefix: string;
    mode: 'quick' | 'full';
    startedAt: string;
    finishedAt: string;
    host: { kernel: string; cpus: number; cpuModel: string; node: string; loadavg: number[] };
    options: Record<string, unknown>;
  };
  contenders: ContenderInfo[];
  /** The alternating attach/detach run (flavor runc), after warm-up. */
  latency: Record<string, LatencySamples>;
  churn?: ChurnResult[];
  scale?: { levels: number[]; points: ScalePoint[] };
  variants?: VariantResult[];
  burst?: BurstResult[];
  soak?: SoakResult[];
  boot?: BootResult[];
}

/** A node's boot (the boot phase): `pods` CNI ADDs at once, for knit-cni with its daemon
 * started at the same moment, and for the bridge plugin. */
export interface BootResult {
  contender: string;
  pods: number;
  /** From the start until every pod had its network. */
  wallMs: number;
  /** Each successful ADD exec, alone (ms). */
  addMs: number[];
  /** Each pod from the start until its ADD succeeded, retries included (ms). */
  podMs: number[];
  /** ADDs answered "try again later" (CNI code 11) before the daemon was ready, then retried. */
  retries: number;
  /** knit only: from the start until the daemon's CNI socket took a call. */
  daemonReadyMs?: number;
  errors: string[];
}
