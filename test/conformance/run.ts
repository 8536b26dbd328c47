// Runs one upstream e2e suite (suites.ts) against a cluster with the ginkgo CLI and e2e.test,
// as kind's and the CNIs' CI jobs do (--provider=skeleton: a cluster that is just there):
// a progress line per spec as it ends, the e2e framework's JUnit report copied into the results
// dir, ginkgo's JSON report, the full output and the framework's dumps of failed specs'
// namespaces in the log dir, and a result to summarise.
import { spawn } from 'node:child_process';
import { copyFileSync, createWriteStream, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { runE2eTest } from '../fixtures/conformance-binaries.js';
import { skipExpression, type Suite } from './suites.js';

export interface RunTarget {
  e2eTest: string;
  ginkgo: string;
  kubectl: string;
  kubeconfig: string;
  nodes: number;
}

export interface SpecResult {
  name: string;
  state: string;
  seconds: number;
  /** The failure's or the skip's message. */
  message: string;
}

export interface SuiteResult {
  suite: Suite['name'];
  title: string;
  /** Specs the focus and skip select. */
  selected: number;
  passed: SpecResult[];
  failed: SpecResult[];
  /** Selected specs that skipped themselves at run time (e.g. a precondition the cluster lacks). */
  skipped: SpecResult[];
  seconds: number;
  junit: string;
  log: string;
}

/** The e2e.test flags for this cluster. */
export function e2eFlags(target: RunTarget, reportDir: string, suite: Suite): string[] {
  return [
    '--provider=skeleton',
    `--kubeconfig=${target.kubeconfig}`,
    `--kubectl-path=${target.kubectl}`,
    `--num-nodes=${target.nodes}`,
    '--dns-domain=cluster.local',
    `--report-dir=${reportDir}`,
    `--report-prefix=${suite.name}_`,
    '--disable-log-dump',
  ];
}

/** The specs the suite selects: a dry run of e2e.test with its focus and skip. */
export async function selectedSpecs(target: RunTarget, suite: Suite): Promise<string[]> {
  const skip = skipExpression(suite);
  const r = await runE2eTest(target.e2eTest, ['--ginkgo.dry-run', '--ginkgo.no-color', '--ginkgo.v', `--ginkgo.focus=${suite.focus}`, ...(skip ? [`--ginkgo.skip=${skip}`] : [])]);
  if (r.code !== 0) throw new Error(`e2e.test --ginkgo.dry-run exited ${r.code}: ${r.stderr.slice(-1000)}`);
  return specNames(r.stdout);
}

/** Spec names from ginkgo's verbose output: the line after each separator, its labels cut. */
function specNames(out: string): string[] {
  const lines = out.split('\n');
  const names: string[] = [];
  for (let i = 0; i + 1 < lines.length; i++) {
    if (lines[i] === SEPARATOR && lines[i + 1]!.startsWith('[sig-')) names.push(withoutLabels(lines[i + 1]!));
  }
  return names;
}

const SEPARATOR = '------------------------------';
/** "[sig-network] HostPort [It] validates ... [Conformance] [sig-network, Conformance]" → without
 * ginkgo's label list (the last bracket) and the node it ended in ("[It]", "[BeforeEach]"). */
const withoutLabels = (line: string) => line.replace(/ \[[^\]]*\]$/, '').replace(/ \[(It|BeforeEach|AfterEach|JustBeforeEach|JustAfterEach|BeforeAll|AfterAll)\] /, ' ').trim();
/** The line ginkgo -v ends each spec with: "• [12.3 seconds]", "• [FAILED] [12.3 seconds]", "S [SKIPPED] [0.1 seconds]". */
const OUTCOME = /^(?:•|S|P) (?:\[([A-Z]+)\] )?\[([\d.]+) seconds\]$/;

const running = new Set<number>();
/** Ends every suite run in progress, ginkgo and its e2e.test processes (an interrupted run). */
export function abortRuns(): void {
  for (const pid of running) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
}

/** Runs the suite; `progress` gets a line per finished spec. */
export async function runSuite(target: RunTarget, suite: Suite, dirs: { results: string; logs: string }, progress: (line: string) => void): Promise<SuiteResult> {
  mkdirSync(dirs.results, { recursive: true });
  mkdirSync(dirs.logs, { recursive: true });
  const total = (await selectedSpecs(target, suite)).length;
  const skip = skipExpression(suite);
  const json = `${suite.name}.json`;
  const logFile = path.join(dirs.logs, `${suite.name}.log`);
  const argv = [
    `--procs=${suite.procs}`,
    '--no-color',
    '-v',
    '--timeout=4h',
    `--focus=${suite.focus}`,
    ...(skip ? [`--skip=${skip}`] : []),
    `--output-dir=${dirs.logs}`,
    `--json-report=${json}`,
    target.e2eTest,
    '--',
    ...e2eFlags(target, dirs.logs, suite),
  ];
  const started = Date.now();
  const out = createWriteStream(logFile);
  // A process group of its own: ginkgo and its e2e.test processes end together (abortRuns).
  // The e2e framework leaves a kubeconfig dir (test-kuberc*) in $TMPDIR for every spec that
  // execs through kubectl: a private one, removed with the run, keeps them off the machine's /tmp.
  const tmp = mkdtempSync(path.join(dirs.logs, 'tmp-'));
  const child = spawn(target.ginkgo, argv, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, KUBECONFIG: target.kubeconfig, TMPDIR: tmp }, detached: true });
  running.add(child.pid!);
  child.stderr.pipe(out, { end: false });
  // Each spec's block starts with a separator; its name line and its outcome line come in
  // either order (a serial run prints the name first, a parallel one the whole block when done).
  let name = '';
  let outcome: RegExpExecArray | null = null;
  let done = 0;
  let lineInBlock = 0;
  const width = String(total).length;
  createInterface({ input: child.stdout }).on('line', (line) => {
    out.write(`${line}\n`);
    if (line === SEPARATOR) {
      name = '';
      outcome = null;
      lineInBlock = 0;
      return;
    }
    lineInBlock++;
    if (lineInBlock <= 2 && !name && line.startsWith('[sig-')) name = withoutLabels(line);
    outcome ??= OUTCOME.exec(line);
    if (name && outcome) {
      done++;
      const state = (outcome[1] ?? 'PASSED').toLowerCase();
      progress(`${suite.name} [${String(done).padStart(width)}/${total}] ${state.padEnd(7)} ${Number(outcome[2]).toFixed(1).padStart(6)} s  ${name}`);
      name = '';
      outcome = null;
      lineInBlock = 99;
    }
  });
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  running.delete(child.pid!);
  rmSync(tmp, { recursive: true, force: true });
  out.end();
  const junit = path.join(dirs.results, `junit_${suite.name}.xml`);
  try {
    copyFileSync(path.join(dirs.logs, `junit_${suite.name}_01.xml`), junit);
  } catch {
    /* ginkgo wrote no report: the JSON check below says why */
  }
  const seconds = (Date.now() - started) / 1000;
  let report: any[];
  try {
    report = JSON.parse(readFileSync(path.join(dirs.logs, json), 'utf8'));
  } catch (e) {
    throw new Error(`ginkgo exited ${code} and wrote no JSON report (${(e as Error).message}); its output: ${logFile}`);
  }
  const specs: SpecResult[] = report
    .flatMap((r) => r.SpecReports ?? [])
    .filter((s: any) => s.LeafNodeType === 'It')
    .map((s: any) => ({
      name: [...(s.ContainerHierarchyTexts ?? []), s.LeafNodeText].join(' '),
      state: s.State as string,
      seconds: (s.RunTime ?? 0) / 1e9,
      message: (s.Failure?.Message ?? '').trim(),
    }));
  // A spec the focus or skip filters out is "skipped" with no message and no run time; one that
  // skipped itself (e2eskipper) says why.
  const ran = specs.filter((s) => s.state !== 'skipped' || s.message !== '');
  return {
    suite: suite.name,
    title: suite.title,
    selected: total,
    passed: ran.filter((s) => s.state === 'passed'),
    failed: ran.filter((s) => s.state !== 'passed' && s.state !== 'skipped'),
    skipped: ran.filter((s) => s.state === 'skipped'),
    seconds,
    junit,
    log: logFile,
  };
}

/** "2 min 5 s"; rounded to the second first, so 179.6 s is "3 min 0 s", never "2 min 60 s". */
export function minutes(seconds: number): string {
  const s = Math.round(seconds);
  return `${Math.floor(s / 60)} min ${s % 60} s`;
}

/** The summary table (Markdown) of some suites' results, with each failure and skip named. */
export function summaryMarkdown(results: SuiteResult[], header: string): string {
  const rows = results.map((r) => `| ${r.title} | ${r.selected} | ${r.passed.length} | ${r.failed.length} | ${r.skipped.length} | ${minutes(r.seconds)} |`);
  const details = results.flatMap((r) => [
    ...(r.failed.length ? [``, `Failed in ${r.suite}:`, ...r.failed.map((s) => `- ${s.name} (${s.state}): ${s.message.split('\n')[0]!.slice(0, 300)}`)] : []),
    ...(r.skipped.length ? [``, `Skipped at run time in ${r.suite}:`, ...r.skipped.map((s) => `- ${s.name}: ${s.message.split('\n')[0]!.slice(0, 300)}`)] : []),
  ]);
  return [header, '', '| suite | specs run | passed | failed | skipped | duration |', '|---|---|---|---|---|---|', ...rows, ...details, ''].join('\n');
}
