// `npm run conformance [-- --suite conformance,sig-network,netpol,cnp] [--focus <regex>]`
// (scripts/conformance.mjs builds first): brings up knit's cluster
// (test/fixtures/kube-full-cluster.ts), runs the chosen upstream suites (suites.ts; default
// the first three) with a progress line per spec, writes each suite's JUnit report and
// summary.md into conformance/results/, takes the cluster down, and checks the machine is as it
// was. `cnp` is the network-policy-api conformance suite (cnp.ts): the cluster then has
// ClusterNetworkPolicy on, and its reports and cnp.md go beside summary.md.
// --focus narrows every chosen suite to the specs that also match it (for a look at one spec; for
// cnp, a regex on the tests' short names, e.g. NamedPort);
// --kubeconfig <file> runs against a cluster that is already up (full-up.js's) and leaves it.
// Exit 0 when no spec failed and the machine is as found. README "Kubernetes conformance".
import { execFileSync, spawnSync } from 'node:child_process';
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
import { abortCnp, CHANNELS, cnpMarkdown, runCnpChannel, type CnpRun } from './cnp.js';
import { cnpConformance } from '../fixtures/cnp-conformance.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const SEG = 202;

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const names = (arg('suite') ?? 'conformance,sig-network,netpol').split(',').filter(Boolean);
for (const n of names) if (!(n in SUITES) && n !== 'cnp') throw new Error(`--suite: no suite ${JSON.stringify(n)} (there are ${[...Object.keys(SUITES), 'cnp'].join(', ')})`);
const withCnp = names.includes('cnp');
/** The NetworkPolicy suite's SCTP specs need SCTP ends in its pods; this kernel has none, so
 * the agnhost they run is the e2e one with its SCTP in user space (scripts/build-cnp-conformance.sh,
 * images/agnhost-e2e.tar: TCP and UDP still go to the unmodified agnhost). */
const sctpStandIn = names.includes('netpol');
/** What a report says of that stand-in. */
const SCTP_STAND_IN = [
  'SCTP: this kernel has none (CONFIG_IP_SCTP off), so the SCTP ends of the suite\'s pods (agnhost `connect --protocol=sctp`, porter\'s SERVE_SCTP_PORT_*) run in user space,',
  'pion/sctp over raw IP sockets (scripts/network-policy-api/usctp, agnhost-image.sh); the SCTP packets on the wire and knit\'s nft rules that judge them are real, the endpoints',
  'are not the kernel\'s. Every other agnhost command is the unmodified agnhost.',
];
const focus = arg('focus');
if (focus?.includes('/')) throw new Error(`--focus ${JSON.stringify(focus.slice(0, 40))}: no "/" (the cnp suite passes it to go test's -test.run, where "/" separates levels)`);
const existing = arg('kubeconfig');
const suites: Suite[] = names.filter((n) => n !== 'cnp').map((n) => {
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
  abortCnp();
  void cleanup.run().finally(() => process.exit(130));
});

// The commit knit's image is built from, read before it is: a commit made during the run is not it.
const commit = execFileSync('git', ['-C', root, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim()
  + (execFileSync('git', ['-C', root, 'status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8' }).trim() ? '+changes' : '');
const results: SuiteResult[] = [];
const cnpRuns: CnpRun[] = [];
let failure = '';
const started = Date.now();
try {
  let target: RunTarget;
  const cnp = withCnp || sctpStandIn ? await cnpConformance() : undefined;
  if (existing) {
    const [bins, kube] = [await conformanceBinaries(), await kubeBinaries()];
    target = { e2eTest: bins.e2eTest, ginkgo: bins.ginkgo, kubectl: kube.kubectl, kubeconfig: existing, nodes: 2 };
  } else {
    const cluster = await startFullCluster(scope, {
      prefix: P,
      seg: SEG,
      log: (l) => log(`conformance: ${l}`),
      ...(withCnp && { clusterNetworkPolicies: { crd: cnp!.crds.standard } }),
      // Imported after the suite's own images: the stand-in's name replaces the e2e agnhost.
      images: [...(withCnp ? [cnp!.agnhostImage] : []), ...(sctpStandIn ? [cnp!.agnhostE2eImage] : [])],
    });
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
  if (withCnp && cnp) {
    const cnpStarted = Date.now();
    for (const channel of CHANNELS) {
      log(`conformance: suite cnp: network-policy-api ${cnp.version}, ClusterNetworkPolicy profile, ${channel} channel`);
      const r = await runCnpChannel({ suite: cnp, kubectl: target.kubectl, kubeconfig: target.kubeconfig, commit, ...(focus && { focus }) }, channel, { results: resultsDir, logs }, log);
      cnpRuns.push(r);
      log(`conformance: suite cnp, ${channel}: standard ${JSON.stringify(r.standard)}${r.experimental ? `, experimental ${JSON.stringify(r.experimental)}` : ''}`);
    }
    const cnpHeader = [
      `# knit: network-policy-api ${cnp.version} conformance (ClusterNetworkPolicy profile)`,
      '',
      `Run ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC by \`npm run conformance -- --suite ${names.join(',')}${focus ? ` --focus '${focus}'` : ''}\`, knit ${commit}, Kubernetes ${server}, two nodes,`,
      `networkPolicy.clusterNetworkPolicies on; the suite's \`conformance.test\` built from the Go module proxy (scripts/build-cnp-conformance.sh); ${Math.round((Date.now() - cnpStarted) / 60000)} min.`,
      ...SCTP_STAND_IN,
      'The bar: kube-network-policies\' published report (conformance/reports/v0.2.0 of the module), 22 standard and 6 experimental passed.',
    ].join('\n');
    writeFileSync(path.join(resultsDir, 'cnp.md'), cnpMarkdown(cnpRuns, cnpHeader));
  }
  // knit's own log from each node, beside the suites' output: what a failure looks like from knit's side.
  const knitLog = spawnSync(target.kubectl, ['--kubeconfig', target.kubeconfig, 'logs', '-n', 'knit-system', '-l', 'app.kubernetes.io/name=knit', '--prefix', '--tail=-1', '--max-log-requests=10'], { encoding: 'utf8', maxBuffer: 1 << 28 });
  writeFileSync(path.join(logs, 'knit.log'), knitLog.stdout + knitLog.stderr);
  const header = [
    '# knit: upstream Kubernetes e2e results',
    '',
    `Run ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC by \`npm run conformance -- --suite ${names.join(',')}${focus ? ` --focus '${focus}'` : ''}\`, knit ${commit}, Kubernetes ${server}`,
    `(e2e.test and ginkgo of the same release), two nodes, kube-proxy nftables, CoreDNS; total ${Math.round((Date.now() - started) / 60000)} min with set-up.`,
    ...(sctpStandIn ? SCTP_STAND_IN : []),
  ].join('\n');
  // A cnp-only run leaves the last e2e run's summary as it was.
  if (suites.length) writeFileSync(path.join(resultsDir, 'summary.md'), summaryMarkdown(results, header));
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
  if (cnpRuns.length) console.log(`\n${readFileSync(path.join(resultsDir, 'cnp.md'), 'utf8')}`);
  console.log(`conformance: full output in ${logs}`);
  process.exit(failure || results.some((r) => r.failed.length) || cnpRuns.some((r) => r.tests.some((x) => x.state === 'failed')) ? 1 : 0);
}
