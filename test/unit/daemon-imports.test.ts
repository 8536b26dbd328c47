// What `knit serve` loads before it needs it: the packages its static import graph reaches,
// from the compiled entry points (what node actually loads). A node pays for every module it
// loads for as long as the daemon runs (bench/README.md, "Memory"), so a package a node may
// never use is imported where the feature that needs it starts (`await import(...)` inside
// it; docs/architecture.md, "What a node loads"), never at the top of a module `serve` reaches.
import test from 'ava';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const build = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The packages serve's static imports reach (relative imports followed, dynamic ones not);
 * `seen` collects the files. */
function staticPackages(entry: string, seen = new Set<string>()): Set<string> {
  const packages = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file) || !existsSync(file)) return;
    seen.add(file);
    const js = readFileSync(file, 'utf8');
    // `import x from '…'`, `import { … } from '…'` (possibly over lines), `export … from '…'`, `import '…'`
    for (const m of js.matchAll(/^(?:import|export)\s(?:[^;'"]*?\sfrom\s)?\s*['"]([^'"]+)['"]/gm)) {
      const spec = m[1]!;
      if (spec.startsWith('.')) visit(path.resolve(path.dirname(file), spec));
      else if (!spec.startsWith('node:')) packages.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);
    }
  };
  visit(entry);
  return packages;
}

test('knit serve loads only its API, validation and logging packages up front', (t) => {
  const loaded = staticPackages(path.join(build, 'src', 'daemon', 'serve.js'));
  t.deepEqual([...loaded].sort(), ['@grpc/grpc-js', '@grpc/proto-loader', 'pino', 'zod']);
  for (const lazy of ['yaml', 'prom-client', '@kubernetes/client-node']) t.false(loaded.has(lazy), lazy);
});

test('knit serve loads the KubeVirt guests\' DHCP responders only when a guest needs one', (t) => {
  const files = new Set<string>();
  staticPackages(path.join(build, 'src', 'daemon', 'serve.js'), files);
  const rel = [...files].map((f) => path.relative(build, f));
  t.true(rel.includes('src/daemon/guest-dhcp-gate.js'), 'the check follows serve\'s imports');
  t.deepEqual(rel.filter((f) => f.startsWith('src/dhcp/') || f === 'src/daemon/guest-dhcp.js'), []);
});

test('knit serve loads the device path (SR-IOV, RDMA, VFIO) only when a device is first used', (t) => {
  const files = new Set<string>();
  staticPackages(path.join(build, 'src', 'daemon', 'serve.js'), files);
  const rel = [...files].map((f) => path.relative(build, f));
  const gate = 'runtimes/with-devices/gate.js';
  t.true(rel.includes(gate), 'the check follows serve\'s imports to the gate');
  t.deepEqual(rel.filter((f) => f.startsWith('src/devices/') || (f.startsWith('runtimes/with-devices/') && f !== gate)), []);
});

test('the API client (src/kube) loads yaml only for a kubeconfig in YAML: the DRA driver\'s and the cluster view\'s in-cluster or JSON access never loads it', (t) => {
  t.false(staticPackages(path.join(build, 'src', 'kube', 'index.js')).has('yaml'));
});

test('the knit command loads the daemon only for serve', (t) => {
  const cli = staticPackages(path.join(build, 'src', 'cli', 'main.js'));
  t.false(cli.has('pino'), 'pino is the daemon\'s');
  t.false(cli.has('yaml'));
});

test('knit loads zod through its v3 entry only: the package root also loads 40-odd locales, the JSON Schema generator and the compiler (+5.6 MiB against +2.0, bench/README.md "Memory")', (t) => {
  const files = new Set<string>();
  staticPackages(path.join(build, 'src', 'daemon', 'serve.js'), files);
  staticPackages(path.join(build, 'src', 'cli', 'main.js'), files);
  const zodImports = new Set<string>();
  for (const file of files) {
    for (const m of readFileSync(file, 'utf8').matchAll(/(?:from\s|import\s*\(?)\s*['"](zod(?:\/[^'"]*)?)['"]/g)) zodImports.add(m[1]!);
  }
  t.deepEqual([...zodImports], ['zod/v3']);
});

test('knit serve loads NetworkPolicy (src/policy, the controller, its informers) only when the config turns it on', (t) => {
  const files = new Set<string>();
  staticPackages(path.join(build, 'src', 'daemon', 'serve.js'), files);
  const rel = [...files].map((f) => path.relative(build, f));
  t.true(rel.includes('src/daemon/action-runner.js'), 'the check follows serve\'s imports');
  t.deepEqual(rel.filter((f) => f.startsWith('src/policy/') || f === 'src/daemon/policy.js' || f === 'src/daemon/kube-policy.js'), []);
});

test('NetworkPolicy from the API loads the ClusterNetworkPolicy and Node informers only with clusterNetworkPolicies on', (t) => {
  const files = new Set<string>();
  staticPackages(path.join(build, 'src', 'daemon', 'policy.js'), files);
  staticPackages(path.join(build, 'src', 'daemon', 'kube-policy.js'), files);
  const rel = [...files].map((f) => path.relative(build, f));
  t.true(rel.includes('src/daemon/kube-policy.js'));
  t.false(rel.includes('src/daemon/kube-cluster-policy.js'));
  t.regex(readFileSync(path.join(build, 'src', 'daemon', 'kube-policy.js'), 'utf8'), /clusterPolicies \? await \(await import\('\.\/kube-cluster-policy\.js'\)\)/);
});

test('knit serve loads the secondary networks (Multus\'s part: informers, network-status writer) only with a secondaryNetworks block', (t) => {
  const files = new Set<string>();
  staticPackages(path.join(build, 'src', 'daemon', 'serve.js'), files);
  const rel = [...files].map((f) => path.relative(build, f));
  t.true(rel.includes('src/cni-frontend/handler.js'), 'the check follows serve\'s imports to the CNI frontend');
  const lazy = ['src/daemon/secondary-networks.js', 'src/daemon/network-status-writer.js', 'src/cni-frontend/secondary.js', 'src/cni-frontend/pod-hotplug.js', 'src/cni-frontend/pod-networks.js', 'src/cni-frontend/pod-attach.js'];
  // src/netattach/go-json.js (Go's case-insensitive key match) serves knit-cni's runtimeConfig too.
  t.deepEqual(rel.filter((f) => lazy.includes(f) || f.startsWith('src/kube/') || (f.startsWith('src/netattach/') && f !== 'src/netattach/go-json.js')), []);
  t.regex(readFileSync(path.join(build, 'src', 'daemon', 'serve.js'), 'utf8'), /config\.secondaryNetworks \? await startSecondary\(/);
});

