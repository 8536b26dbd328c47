// Command-line options of `npm run bench -- [options]`.

export interface BenchOptions {
  full: boolean;
  warmup: number;
  iterations: number;
  /** Contender names to run (default: all). */
  only?: string[];
  churnSeconds: number;
  churnConcurrency: number[];
  scaleLevels: number[];
  scaleSamples: number;
  variantIterations: number;
  /** Sandboxes per burst: the full run's burst phase, or a quick run's when given (0: none). */
  burst: number;
  /** The quick run has a burst phase only when --burst is given. */
  burstGiven: boolean;
  /** Bursts per contender, every contender's in a rotated order each round; the walls reported
   * are the medians (one burst is one sample, at the mercy of whatever else the machine did). */
  burstRounds: number;
  /** Attach/detach cycles per daemon contender in the soak phase: 3,000 in a full run unless
   * given; a quick run has a soak only when given. 0: none. */
  soakCycles?: number;
  soakConcurrency: number;
  /** Pods in the boot phase: 110 in a full run unless given; a quick run has one only when given. 0: none. */
  bootPods?: number;
  outDir?: string;
  /** Sweep a previous run's leftovers by prefix and exit. */
  cleanup?: string;
  /** Re-render latest.md/svg from a results JSON and exit (no measuring). */
  report?: string;
  help: boolean;
}

export const USAGE = `usage: npm run bench -- [options]

  --full                 also churn, scale (10/100/1000 attached) and the VM runtimes
  --iterations N         measured rounds of the latency run (default 100)
  --warmup N             warm-up rounds, discarded (default 10)
  --only a,b             contenders to run: knit, knit-c, knit-cni, knit-shim, knit-v8default, knit-alt (KNIT_BENCH_ALT_ROOT: another checkout's build; only when named), cni, floor-c, floor-ip, grpc, grpc-c, grpc-addon, grpc-addon-v8default, grpc-cni (default all)
  --churn-seconds S      churn time per contender and concurrency (default 5)
  --churn-concurrency L  concurrency levels tried in churn (default 1,4)
  --scale L              scale levels (default 10,100,1000)
  --scale-samples N      attaches measured per contender at each scale level (default 20)
  --variant-iterations N attaches per VM flavor (default 30)
  --burst N              sandboxes attached at once, then detached at once (full run: default 100, 0 skips; a quick run only when given)
  --burst-rounds R       bursts per contender, alternated; walls are the medians (default 1)
  --soak N               attach/detach cycles per daemon contender while its RSS is sampled (full run: default 3000, 0 skips; a quick run soaks only when given)
  --soak-concurrency C   calls in flight during the soak (default 4)
  --boot N               pods whose CNI ADDs come at once while knit's daemon starts, then through the bridge plugin (full run: default 110, 0 skips; a quick run only when given)
  --out DIR              results directory (default bench/results)
  --cleanup kbXXX        remove the netns and links a killed run left behind, then exit
  --report FILE.json     rewrite latest.json/md/svg from an earlier run's JSON, then exit
`;

function int(flag: string, v: string | undefined, min: number): number {
  const n = Number(v);
  if (v === undefined || !Number.isInteger(n) || n < min) throw new Error(`${flag}: want an integer ≥ ${min}, got ${v ?? 'nothing'}`);
  return n;
}

function intList(flag: string, v: string | undefined, min: number): number[] {
  if (!v) throw new Error(`${flag}: want a comma-separated list of integers`);
  return v.split(',').map((x) => int(flag, x.trim(), min));
}

export function parseArgs(argv: readonly string[]): BenchOptions {
  const o: BenchOptions = {
    full: false,
    warmup: 10,
    iterations: 100,
    churnSeconds: 5,
    churnConcurrency: [1, 4],
    scaleLevels: [10, 100, 1000],
    scaleSamples: 20,
    variantIterations: 30,
    burst: 100,
    burstGiven: false,
    burstRounds: 1,
    soakConcurrency: 4,
    help: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = () => argv[++i];
    switch (flag) {
      case '--full': o.full = true; break;
      case '--iterations': o.iterations = int(flag, value(), 1); break;
      case '--warmup': o.warmup = int(flag, value(), 0); break;
      case '--only': o.only = (value() ?? '').split(',').filter(Boolean); break;
      case '--churn-seconds': o.churnSeconds = int(flag, value(), 1); break;
      case '--churn-concurrency': o.churnConcurrency = intList(flag, value(), 1); break;
      case '--scale': o.scaleLevels = intList(flag, value(), 1); break;
      case '--scale-samples': o.scaleSamples = int(flag, value(), 1); break;
      case '--variant-iterations': o.variantIterations = int(flag, value(), 1); break;
      case '--burst': o.burst = int(flag, value(), 0); o.burstGiven = true; break;
      case '--burst-rounds': o.burstRounds = int(flag, value(), 1); break;
      case '--soak': o.soakCycles = int(flag, value(), 0); break;
      case '--soak-concurrency': o.soakConcurrency = int(flag, value(), 1); break;
      case '--boot': o.bootPods = int(flag, value(), 0); break;
      case '--out': o.outDir = value(); break;
      case '--cleanup': o.cleanup = value(); break;
      case '--report': o.report = value(); break;
      case '-h': case '--help': o.help = true; break;
      default: throw new Error(`unknown option ${flag}\n\n${USAGE}`);
    }
  }
  if (o.scaleLevels.some((l) => l > 60000)) throw new Error('--scale: at most 60000 sandboxes per contender (one /16 each)');
  return o;
}
