// The network-policy-api conformance suite (sigs.k8s.io/network-policy-api's `conformance`
// package, built by scripts/build-cnp-conformance.sh) against knit's cluster, as `npm run
// conformance -- --suite cnp` runs it: its ClusterNetworkPolicy profile with the standard
// channel's CRD and standard features, then with the experimental channel's CRD and every
// experimental feature (named ports, nodes peers). Each run writes the suite's own report (the
// YAML the project's conformance/reports hold) and the go test output; cnp.md sums both up.
import { spawn } from 'node:child_process';
import { createWriteStream, existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { parse } from 'yaml';
import type { CnpConformance } from '../fixtures/cnp-conformance.js';
import { waitCrdEstablished } from '../fixtures/crd.js';
import { must } from '../fixtures/exec.js';
import { minutes } from './run.js';

export type Channel = 'standard' | 'experimental';
export const CHANNELS: readonly Channel[] = ['standard', 'experimental'];
/** The experimental features of the ClusterNetworkPolicy profile (conformance/utils/suite/features.go). */
const EXPERIMENTAL_FEATURES = ['ClusterNetworkPolicyNamedPorts', 'ClusterNetworkPolicyEgressNodePeers'];

export interface CnpTarget {
  suite: CnpConformance;
  kubectl: string;
  kubeconfig: string;
  /** knit's commit, for the report's implementation version. */
  commit: string;
  /** Only the tests whose short names match (go test's -test.run below the profile test). */
  focus?: string;
}

export interface CnpTest {
  name: string;
  state: 'passed' | 'failed' | 'skipped';
  seconds: number;
  /** The pokes that did not answer as expected (each retried until the suite gave up or they did). */
  failedPokes?: string[];
}

export interface CnpRun {
  channel: Channel;
  /** The --focus the run had, if any. */
  focus?: string;
  tests: CnpTest[];
  /** The profile's statistics as the suite's report states them. */
  standard?: Statistics;
  experimental?: Statistics;
  seconds: number;
  report: string;
  log: string;
}

interface Statistics {
  passed: number;
  failed: number;
  skipped: number;
}

/** Why a test failed, from its failed pokes. */
function whyFailed(t: CnpTest): string {
  const pokes = t.failedPokes ?? [];
  return pokes.length ? `failed pokes: ${pokes.join(', ')}` : 'no poke failed: see the log';
}

/** `=== RUN   TestConformanceProfiles/CNPAdminTierGress`: a test begins. */
const RUN = /^=== RUN\s+TestConformanceProfiles\/([^\s/]+)$/;
/** `helper.go:71: FAILED Command was [/agnhost connect --timeout=3s --protocol=tcp 10.0.0.4:80]` */
const POKE = /FAILED Command was \[\/agnhost connect \S+ --protocol=(\w+) (\S+)\]/;

/** The failed pokes of each test in go test's output. */
export function failedPokes(output: string): Map<string, string[]> {
  const pokes = new Map<string, string[]>();
  let test = '';
  for (const line of output.split('\n')) {
    const run = RUN.exec(line);
    if (run) test = run[1]!;
    const poke = POKE.exec(line);
    if (poke && test) pokes.set(test, [...new Set([...(pokes.get(test) ?? []), `${poke[1]} ${poke[2]}`])]);
  }
  return pokes;
}

/** `--- PASS: TestConformanceProfiles/CNPAdminTierGress (12.34s)`: a test of the suite (its
 * own subtests, one level down, are its cases). */
const RESULT = /^\s*--- (PASS|FAIL|SKIP): TestConformanceProfiles\/([^\s/]+) \(([\d.]+)s\)$/;

let child: ReturnType<typeof spawn> | undefined;
/** Ends a run in progress (an interrupted `npm run conformance`). */
export function abortCnp(): void {
  if (child?.pid) {
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
}

/** Applies the channel's CRD and runs the profile; `progress` gets a line per finished test. */
export async function runCnpChannel(target: CnpTarget, channel: Channel, dirs: { results: string; logs: string }, progress: (line: string) => void): Promise<CnpRun> {
  const env = { ...process.env, KUBECONFIG: target.kubeconfig };
  await must(target.kubectl, ['apply', '--server-side', '--force-conflicts', '-f', target.suite.crds[channel]], { env });
  await waitCrdEstablished((args) => must(target.kubectl, args, { env }), 'clusternetworkpolicies.policy.networking.k8s.io');
  if (channel === 'experimental') await servesNamedPorts(target.kubectl, env);
  const report = path.join(dirs.results, `cnp-${channel}.yaml`);
  const logFile = path.join(dirs.logs, `cnp-${channel}.log`);
  const argv = [
    // In parentheses: go test splits -run at a bare `|` into whole alternative paths.
    '-test.run', `^TestConformanceProfiles$${target.focus ? `/(${target.focus})` : ''}`,
    '-test.v',
    '-test.timeout', '60m',
    '--conformance-profiles=ClusterNetworkPolicy',
    ...(channel === 'experimental' ? [`--supported-features=${EXPERIMENTAL_FEATURES.join(',')}`] : []),
    // The standard run leaves its namespaces and pods for the experimental one.
    `--cleanup-base-resources=${channel === 'experimental'}`,
    '--organization=knit',
    '--project=knit',
    '--url=unpublished',
    `--version=${target.commit}`,
    '--contact=knit maintainers',
    `--additional-info=npm run conformance -- --suite cnp (test/conformance/cnp.ts), ${channel} channel, on this repository's two-node test cluster`,
    `--report-output=${report}`,
  ];
  const started = Date.now();
  const out = createWriteStream(logFile);
  // Its working dir holds nothing it reads: the manifests are embedded in the binary.
  child = spawn(target.suite.conformanceTest, argv, { cwd: dirs.logs, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  child.stderr!.pipe(out, { end: false });
  const tests: CnpTest[] = [];
  createInterface({ input: child.stdout! }).on('line', (line) => {
    out.write(`${line}\n`);
    const m = RESULT.exec(line);
    if (!m) return;
    const state = m[1] === 'PASS' ? 'passed' : m[1] === 'FAIL' ? 'failed' : 'skipped';
    tests.push({ name: m[2]!, state, seconds: Number(m[3]) });
    progress(`cnp ${channel} ${state.padEnd(7)} ${Number(m[3]).toFixed(1).padStart(6)} s  ${m[2]}`);
  });
  await new Promise<number | null>((resolve) => child!.once('close', resolve));
  child = undefined;
  out.end();
  if (!existsSync(report)) throw new Error(`the ${channel} run wrote no report (${report}); its output: ${logFile}`);
  const pokes = failedPokes(readFileSync(logFile, 'utf8'));
  for (const x of tests) if (x.state === 'failed') x.failedPokes = pokes.get(x.name) ?? [];
  const text = readFileSync(report, 'utf8');
  return { channel, ...(target.focus && { focus: target.focus }), tests, ...statistics(text), seconds: (Date.now() - started) / 1000, report, log: logFile };
}

/** Waits until the API server prunes by the experimental schema: it takes a CRD's new schema a
 * moment after the CRD changed, and until then drops destinationNamedPort from what it stores
 * (the suite's first named-port test failed so, its rule read as one without protocols). */
async function servesNamedPorts(kubectl: string, env: NodeJS.ProcessEnv): Promise<void> {
  const probe = JSON.stringify({
    apiVersion: 'policy.networking.k8s.io/v1beta1', kind: 'ClusterNetworkPolicy', metadata: { name: 'knit-schema-probe' },
    spec: { tier: 'Admin', priority: 1, subject: { namespaces: {} }, ingress: [{ action: 'Deny', from: [{ namespaces: {} }], protocols: [{ destinationNamedPort: 'web' }] }] },
  });
  for (let i = 0; i < 60; i++) {
    const out = await must(kubectl, ['create', '--dry-run=server', '-o', 'json', '-f', '-'], { env, input: probe });
    if (out.includes('destinationNamedPort')) return;
    await new Promise((r) => setTimeout(r, 1000));
  }
  throw new Error('the API server still prunes destinationNamedPort a minute after the experimental CRD was applied');
}

/** The ClusterNetworkPolicy profile's standard and experimental statistics from the suite's
 * report (confv1a1.ConformanceReport as YAML). */
export function statistics(report: string): Pick<CnpRun, 'standard' | 'experimental'> {
  const profile = (parse(report)?.profiles ?? []).find((p: { name?: string }) => p.name === 'ClusterNetworkPolicy') ?? {};
  const of = (s: { statistics?: { Passed?: number; Failed?: number; Skipped?: number } } | undefined): Statistics | undefined =>
    s?.statistics && { passed: s.statistics.Passed ?? 0, failed: s.statistics.Failed ?? 0, skipped: s.statistics.Skipped ?? 0 };
  const standard = of(profile.standard);
  const experimental = of(profile.experimental);
  return { ...(standard && { standard }), ...(experimental && { experimental }) };
}

const EXPERIMENTAL_TEST = /NamedPort|NodePeers/;

/** cnp.md: both runs' counts against the bar, each failure with its reason if known. */
export function cnpMarkdown(runs: CnpRun[], header: string): string {
  const stat = (s: Statistics | undefined) => (s ? `${s.passed} | ${s.failed} | ${s.skipped}` : '– | – | –');
  // The suite's report counts the tests a focus left out as passed: a focused run counts its own.
  const counts = (r: CnpRun, kind: 'standard' | 'experimental'): Statistics | undefined => {
    if (!r.focus) return r[kind];
    const ran = r.tests.filter((t) => EXPERIMENTAL_TEST.test(t.name) === (kind === 'experimental'));
    const n = (state: CnpTest['state']) => ran.filter((t) => t.state === state).length;
    return { passed: n('passed'), failed: n('failed'), skipped: n('skipped') };
  };
  const rows = runs.flatMap((r) => [
    `| ${r.channel} CRD | standard | ${stat(counts(r, 'standard'))} | ${minutes(r.seconds)} |`,
    ...(r.channel === 'experimental' ? [`| ${r.channel} CRD | experimental | ${stat(counts(r, 'experimental'))} | |`] : []),
  ]);
  const failures = runs.flatMap((r) => {
    const failed = r.tests.filter((t) => t.state === 'failed');
    if (!failed.length) return [];
    return ['', `Failed in the ${r.channel} run:`, ...failed.map((t) => `- ${t.name}${EXPERIMENTAL_TEST.test(t.name) ? ' (experimental)' : ''}: ${whyFailed(t)}`)];
  });
  return [
    header,
    '',
    '| CRD | tests | passed | failed | skipped | duration |',
    '|---|---|---|---|---|---|',
    ...rows,
    ...(runs.some((r) => r.focus) ? ['', `Focused: only the tests that ran are counted (${[...new Set(runs.flatMap((r) => r.tests.map((t) => t.name)))].join(', ')}); the suite's own reports count the rest as passed.`] : []),
    ...failures,
    '',
    'The suite\'s own reports: `cnp-standard.yaml`, `cnp-experimental.yaml` (beside this file).',
    '',
  ].join('\n');
}
