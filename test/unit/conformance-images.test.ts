// The conformance run's images (scripts/conformance/images.sh, built by
// scripts/build-conformance.sh) against what the suite itself names: every image built for the
// e2e specs carries a name `e2e.test --list-images` prints, character for character (the kubelet
// would pull anything else, and no registry is reachable); every image it prints is either built
// or left out for a stated reason (test/conformance/images.ts); the cluster's own images match
// the versions they stand for (CoreDNS's in its manifest and versions.env).
import test from 'ava';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { conformanceBinaries, COREDNS_MANIFEST, runE2eTest } from '../fixtures/conformance-binaries.js';
import { NOT_BUILT } from '../conformance/images.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const versions = Object.fromEntries(
  readFileSync(path.join(root, 'scripts', 'kube', 'versions.env'), 'utf8')
    .split('\n')
    .filter((l) => /^[A-Z_]+=/.test(l))
    .map((l) => l.split('=') as [string, string]),
);

test('every e2e image built is named as e2e.test --list-images names it, and every image it lists is built or left out for a reason', async (t) => {
  t.timeout(3_600_000); // a cold cache builds e2e.test first
  const bins = await conformanceBinaries();
  const listed = (await runE2eTest(bins.e2eTest, ['--list-images'])).stdout.split('\n').map((l) => l.trim()).filter(Boolean);
  const built = bins.images.filter((i) => i.kind === 'e2e').map((i) => i.name);
  t.deepEqual(built.filter((n) => !listed.includes(n)), [], 'built e2e images that e2e.test does not name');
  const unexplained = listed.filter((n) => !built.includes(n) && !NOT_BUILT.some((x) => x.pattern.test(n)));
  t.deepEqual(unexplained, [], 'images e2e.test names that are neither built nor left out with a reason');
  const needlessReasons = NOT_BUILT.filter((x) => !listed.some((n) => x.pattern.test(n)));
  t.deepEqual(needlessReasons.map((x) => x.reason), [], 'reasons that match no listed image');
  t.deepEqual(built.filter((n) => NOT_BUILT.some((x) => x.pattern.test(n))), [], 'built images also listed as left out');
});

test('the cluster\'s own images: CoreDNS at versions.env\'s COREDNS_VERSION, the one its manifest runs; the sandbox image is the suite\'s pause', async (t) => {
  t.timeout(3_600_000);
  const bins = await conformanceBinaries();
  const coredns = `registry.k8s.io/coredns/coredns:${versions.COREDNS_VERSION}`;
  t.deepEqual(bins.images.filter((i) => i.kind === 'addon').map((i) => i.name), [coredns]);
  const docs = parseAllDocuments(readFileSync(COREDNS_MANIFEST, 'utf8')).map((d) => d.toJS());
  const deployment = docs.find((d) => d.kind === 'Deployment');
  t.deepEqual(deployment.spec.template.spec.containers.map((c: any) => c.image), [coredns]);
  const listed = (await runE2eTest(bins.e2eTest, ['--list-images'])).stdout;
  t.true(listed.split('\n').includes(bins.image('pause')), `${bins.image('pause')} is the suite's pause image`);
});
