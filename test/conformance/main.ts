// `npm run conformance [-- --suite conformance,sig-network,netpol] [--focus <regex>]`
// (scripts/conformance.mjs builds first): brings up knit's cluster
// (test/fixtures/kube-full-cluster.ts), runs the chosen upstream suites (suites.ts; default
// all three) with a progress line per spec, writes each suite's JUnit report and summary.md into
// conformance/results/, takes the cluster down, and checks the machine is as it was.
// --focus narrows every chosen suite to the specs that also match it (for a look at one spec);
// --kubeconfig <file> runs against a cluster that is already up (full-up.js's) and leaves it.
// Exit 0 when no spec failed and the machine is as found. README "Kubernetes conformance".
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { fileURLToPath } from 'node:url';
import { uniquePrefix } from '../helpers/names.js';
import { Cleanup } from '../fixtures/cleanup.js';
import { snapshotMachine, startFullCluster } from '../fixtures/kube-full-cluster.js';
import { abortRuns, runSuite, summaryMarkdown, type RunTarget, type SuiteResult } from './run.js';
import { conformanceBinaries } from '../fixtures/conformance-binaries.js';
import { kubeBinaries } from '../fixtures/kube-binaries.js';
import { SUITES, type Suite } from './suites.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const SEG = 202;

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const names = (arg('suite') ?? 'conformance,sig-network,netpol').split(',').filter(Boolean);
for (const n of names) if (!(n in SUITES)) throw new Error(`--suite: no suite ${JSON.stringify(n)} (there are ${Object.keys(SUITES).join(', ')})`);
const focus = arg('focus');
const existing = arg('kubeconfig');
const suites: Suite[] = names.map((n) => {
  const s = SUITES[n as Suite['name']];
  return focus ? { ...s, focus: `(${s.focus}).*(${focus})|(${focus}).*(${s.focus})` } : s;
});

const resultsDir = path.join(root, 'conformance', 'results');
const P = uniquePrefix('cnf');
const before = snapshotMachine(P, SEG);
const cleanup = new Cleanup();
const scope = { teardown: (fn: () => unknown) => cleanup.defer('conformance', fn) };
const logs = mkdtempSync(path.join(os.tmpdir(), 'knit-conformance-logs-'));
const log = (line: string) => console.log(line);
let interrupted = false;
process.on('SIGINT', () => {
  interrupted = true;
  console.log('conformance: interrupted; tearing down');
  abortRuns();
  void cleanup.run().finally(() => process.exit(130));
});

const results: SuiteResult[] = [];
let failure = '';
const started = Date.now();
try {
  let target: RunTarget;
  if (existing) {
    const [bins, kube] = [await conformanceBinaries(), await kubeBinaries()];
    target = { e2eTest: bins.e2eTest, ginkgo: bins.ginkgo, kubectl: kube.kubectl, kubeconfig: existing, nodes: 2 };
  } else {
    const cluster = await startFullCluster(scope, { prefix: P, seg: SEG, log: (l) => log(`conformance: ${l}`) });
    target = { e2eTest: cluster.bins.e2eTest, ginkgo: cluster.bins.ginkgo, kubectl: cluster.cp.bins.kubectl, kubeconfig: cluster.cp.adminKubeconfig, nodes: cluster.nodes.length };
  }
  const kubectlVersion = execFileSync(target.kubectl, ['version', '--kubeconfig', target.kubeconfig, '-o', 'json'], { encoding: 'utf8' });
  mkdirSync(resultsDir, { recursive: true });
  for (const s of suites) {
    rmSync(path.join(resultsDir, `junit_${s.name}.xml`), { force: true });
    log(`conformance: suite ${s.name}: ${s.title}`);
    const r = await runSuite(target, s, { results: resultsDir, logs }, log);
    results.push(r);
    log(`conformance: suite ${s.name}: ${r.passed.length} passed, ${r.failed.length} failed, ${r.skipped.length} skipped of ${r.selected} in ${Math.round(r.seconds)} s`);
  }
  const server = JSON.parse(kubectlVersion).serverVersion?.gitVersion ?? '?';
  const commit = execFileSync('git', ['-C', root, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  const header = [
    '# knit: upstream Kubernetes e2e results',
    '',
    `Run ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC by \`npm run conformance -- --suite ${names.join(',')}${focus ? ` --focus '${focus}'` : ''}\`, knit ${commit}, Kubernetes ${server}`,
    `(e2e.test and ginkgo of the same release), two nodes, kube-proxy nftables, CoreDNS; total ${Math.round((Date.now() - started) / 60000)} min with set-up.`,
  ].join('\n');
  writeFileSync(path.join(resultsDir, 'summary.md'), summaryMarkdown(results, header));
} catch (e) {
  failure = (e as Error).stack ?? String(e);
  console.error(`conformance: ${failure}`);
}
if (!interrupted) {
  await cleanup.run().catch((e: Error) => {
    failure ||= e.message;
    console.error(`conformance: teardown: ${e.message}`);
  });
  const after = snapshotMachine(P, SEG);
  if (!isDeepStrictEqual(before, after)) {
    failure ||= 'the machine is not as it was';
    console.error(`conformance: the machine is not as it was:\nbefore ${JSON.stringify(before, null, 1)}\nafter ${JSON.stringify(after, null, 1)}`);
  }
  if (results.length) console.log(`\n${readFileSync(path.join(resultsDir, 'summary.md'), 'utf8')}`);
  console.log(`conformance: full output in ${logs}`);
  process.exit(failure || results.some((r) => r.failed.length) ? 1 : 0);
}
