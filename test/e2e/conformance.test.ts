// knit installed as users install it, on a cluster as users run one (test/fixtures/
// kube-full-cluster.ts): two kubelets in node namespaces of their own, kube-proxy in nftables
// mode, CoreDNS, and knit from its image through `kubectl apply` of deploy/. Services work the
// way users expect on a bridge network: a pod reaches a Service whose pod is on its own bridge
// (the reply goes back through conntrack only because knit has its bridge hand bridged IPv4 to
// the IP hooks; the node's global bridge-nf-call-iptables is 0) and on the other node, a pod
// reaches itself through its own Service (hairpin), names resolve through CoreDNS, a NodePort
// answers on both nodes, and ClientIP session affinity sticks. Then Kubernetes' own
// [sig-network] Conformance specs run against it (e2e.test and ginkgo of the cluster's release,
// test/conformance/): every one must pass, none skipped; a failure names the specs and their
// messages. The teardown check compares the machine with what it was before: no process, netns,
// mount, link or route of the cluster's left (the machine-wide state, which other test files
// change meanwhile, is compared by `npm run conformance`, which runs alone). It runs the longer suites.
import test from 'ava';
import { fileScope } from '../fixtures/kube-cluster.js';
import { snapshotMachine, startFullCluster, KNIT_BRIDGE, type FullCluster } from '../fixtures/kube-full-cluster.js';
import { uniquePrefix } from '../helpers/names.js';
import { must } from '../fixtures/exec.js';
import { NODE_PRIVATE_DIRS } from '../fixtures/node-ns.js';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runSuite, selectedSpecs } from '../conformance/run.js';
import { SUITES } from '../conformance/suites.js';

const P = uniquePrefix('kfc');
const SEG = 204;
const NS = 'smoke';
// Only what carries this test's names: other test files change the machine-wide state meanwhile.
const before = snapshotMachine(P, SEG, 'own');
const scope = fileScope(test);
let c: FullCluster;

const agnhost = () => c.bins.image('agnhost');
/** An agnhost pod on `node`: netexec serving HTTP on 8080 (/hostname, /clientip). */
const server = (name: string, node: string) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: NS, labels: { app: name, pair: 'yes' } },
  spec: {
    nodeName: node,
    terminationGracePeriodSeconds: 1,
    containers: [{ name: 'web', image: agnhost(), args: ['netexec', '--http-port=8080'], ports: [{ containerPort: 8080 }], readinessProbe: { httpGet: { path: '/healthz', port: 8080 } } }],
  },
});
const service = (name: string, selector: Record<string, string>, extra: object = {}) => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name, namespace: NS },
  spec: { selector, ports: [{ port: 80, targetPort: 8080 }], ...extra },
});
const apply = (obj: object) => c.cp.kubectlInput(JSON.stringify(obj), 'apply', '-f', '-');
/** A command in a pod; its output, or `failed: ...`. */
const exec = (pod: string, ...cmd: string[]) => c.cp.kubectl('exec', '-n', NS, pod, '--', ...cmd).then((o) => o.trim(), (e: Error) => `failed: ${e.message.split('\n')[0]}`);
const curl = (pod: string, url: string) => exec(pod, 'curl', '-sS', '--max-time', '5', url);
const clusterIP = async (svc: string) => (await c.cp.getJson('get', 'service', '-n', NS, svc)).spec.clusterIP as string;
const podIP = async (pod: string) => (await c.cp.getJson('get', 'pod', '-n', NS, pod)).status.podIP as string;

test.before(async (t) => {
  t.timeout(1_800_000); // bring-up: knit's image, two nodes, the DaemonSet, CoreDNS
  c = await startFullCluster(scope, { prefix: P, seg: SEG });
});

test.serial('knit runs as deploy/ makes it: one DaemonSet pod per node from its image, knit-cni and its conflist in the node\'s CNI dirs (not the machine\'s), each node routing the other\'s podCIDR', async (t) => {
  const pods = (await c.cp.getJson('get', 'pods', '-n', 'knit-system', '-l', 'app.kubernetes.io/name=knit')).items as any[];
  t.deepEqual(pods.map((p) => p.spec.nodeName).sort(), c.nodes.map((n) => n.name).sort(), 'one knit pod per node');
  for (const p of pods) {
    t.is(p.status.phase, 'Running');
    t.deepEqual(p.spec.containers.map((x: any) => x.image), ['localhost/knit:0.1.0']);
  }
  for (const n of c.nodes) {
    // The conflist's plugin is knit-cni, installed under its CNI type name, `knit`.
    const conflists = (await n.ns.exec('ls', '/etc/cni/net.d')).split('\n').filter((f) => f.endsWith('.conflist'));
    t.is(conflists.length, 1, `${n.name}: one conflist in its /etc/cni/net.d`);
    const types = JSON.parse(await n.ns.exec('cat', `/etc/cni/net.d/${conflists[0]}`)).plugins.map((p: any) => p.type);
    t.deepEqual(types, ['knit'], `${n.name}: the conflist runs knit-cni alone`);
    t.true((await n.ns.exec('ls', '/opt/cni/bin')).split('\n').includes('knit'), `${n.name}: knit-cni (type knit) in its /opt/cni/bin`);
    const other = c.nodes.find((x) => x !== n)!;
    const routes = JSON.parse(await must('ip', ['-n', n.ns.netns, '-j', 'route', 'show', 'proto', '201']));
    t.true(routes.some((r: any) => r.dst === other.podCIDR && r.gateway === other.ip), `${n.name} routes ${other.podCIDR} via ${other.ip}`);
    const ready = (await c.cp.getJson('get', 'node', n.name)).status.conditions.find((x: any) => x.type === 'Ready');
    t.is(ready.status, 'True', `${n.name} Ready`);
  }
  // The node's fixed paths are file systems of its own, not the machine's (compared by device
  // and inode: other tests may make and remove the machine's meanwhile).
  const where = (d: string) => must('stat', ['-c', '%d:%i', d]).then((o) => o.trim(), () => 'absent');
  for (const n of c.nodes) {
    for (const d of NODE_PRIVATE_DIRS) t.not(await n.ns.exec('stat', '-c', '%d:%i', d).then((o) => o.trim()), await where(d), `${n.name}: its ${d} is its own`);
  }
});

test.serial('Services: a pod reaches a Service on its own bridge and on the other node unNATed, itself through its own Service (hairpin), names through CoreDNS, a NodePort on both nodes, and ClientIP affinity sticks', async (t) => {
  const [n1, n2] = c.nodes as [FullCluster['nodes'][0], FullCluster['nodes'][0]];
  await c.cp.kubectl('create', 'namespace', NS);
  await apply(server('web-1', n1.name));
  await apply(server('web-2', n2.name));
  await apply({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'client', namespace: NS }, spec: { nodeName: n1.name, terminationGracePeriodSeconds: 1, containers: [{ name: 'c', image: agnhost() }] } });
  await apply(service('web-1', { app: 'web-1' }));
  await apply(service('web-2', { app: 'web-2' }, { type: 'NodePort' }));
  await apply(service('pair', { pair: 'yes' }, { sessionAffinity: 'ClientIP' }));
  await c.cp.kubectl('wait', '-n', NS, '--for=condition=Ready', 'pod', '--all', '--timeout=180s');

  // The observers on the nodes: kube-proxy's table, and bridged IPv4 handed to the IP hooks by
  // knit's bridge alone (the node's global switch is off).
  for (const n of c.nodes) {
    const tables = JSON.parse(await must('ip', ['netns', 'exec', n.ns.netns, 'nft', '-j', 'list', 'tables'])).nftables.filter((x: any) => x.table).map((x: any) => `${x.table.family} ${x.table.name}`);
    t.true(tables.includes('ip kube-proxy'), `${n.name}: kube-proxy's nftables table`);
    t.is((await n.ns.exec('cat', '/proc/sys/net/bridge/bridge-nf-call-iptables')).trim(), '0', `${n.name}: the global bridge-nf-call-iptables is off`);
    t.is((await n.ns.exec('cat', `/sys/class/net/${KNIT_BRIDGE}/bridge/nf_call_iptables`)).trim(), '1', `${n.name}: ${KNIT_BRIDGE} hands bridged IPv4 to the IP hooks`);
  }

  const [ip1, ip2, ipPair] = [await clusterIP('web-1'), await clusterIP('web-2'), await clusterIP('pair')];
  const clientIP = await podIP('client');
  // The first connections may race kube-proxy's sync of the new Services: retry a little.
  const eventually = async (what: () => Promise<string>, want: string, label: string) => {
    let got = '';
    for (let i = 0; i < 20 && got !== want; i++) {
      got = await what();
      if (got !== want) await new Promise((r) => setTimeout(r, 500));
    }
    t.is(got, want, label);
  };
  await eventually(() => curl('client', `http://${ip1}/hostname`), 'web-1', 'client → ClusterIP → web-1 on the same bridge');
  await eventually(async () => (await curl('client', `http://${ip1}/clientip`)).split(':')[0]!, clientIP, 'web-1 sees the client\'s own address (no SNAT on the bridge)');
  await eventually(() => curl('client', `http://${ip2}/hostname`), 'web-2', 'client → ClusterIP → web-2 on the other node');
  await eventually(async () => (await curl('client', `http://${ip2}/clientip`)).split(':')[0]!, clientIP, 'web-2 sees the client\'s own address across nodes');
  await eventually(() => curl('web-1', `http://${ip1}/hostname`), 'web-1', 'web-1 → its own Service → itself (hairpin)');

  await eventually(async () => ((await exec('client', 'nslookup', `web-2.${NS}.svc.cluster.local`)).match(/^Name:\s*\S+\nAddress:\s*(\S+)/m)?.[1] ?? ''), ip2, 'CoreDNS: web-2\'s name → its ClusterIP');
  await eventually(() => curl('client', `http://web-2.${NS}/hostname`), 'web-2', 'by name, through the search path');

  const nodePort = (await c.cp.getJson('get', 'service', '-n', NS, 'web-2')).spec.ports[0].nodePort as number;
  for (const n of c.nodes) {
    const fromMachine = async () => (await fetch(`http://${n.ip}:${nodePort}/hostname`, { signal: AbortSignal.timeout(5000) }).then((r) => r.text(), (e: Error) => `failed: ${e.message}`)).trim();
    await eventually(fromMachine, 'web-2', `the machine → ${n.name}'s NodePort → web-2`);
    await eventually(() => curl('client', `http://${n.ip}:${nodePort}/hostname`), 'web-2', `client → ${n.name}'s NodePort → web-2`);
  }

  const answers = new Set<string>();
  for (let i = 0; i < 10; i++) answers.add(await curl('client', `http://${ipPair}/hostname`));
  t.is(answers.size, 1, `ClientIP affinity: one backend for all 10 requests (${[...answers]})`);
  t.true(['web-1', 'web-2'].includes([...answers][0]!), 'and it is one of the pair');
});

test.serial('Kubernetes\' [sig-network] Conformance specs all pass, none skipped', async (t) => {
  t.timeout(3_600_000);
  await c.cp.kubectl('delete', 'namespace', NS, '--wait=true', '--timeout=120s').catch(() => undefined);
  const dir = mkdtempSync(path.join(os.tmpdir(), `knit-${P}conformance-`));
  t.teardown(() => (process.env.KNIT_KEEP_KUBE_DIR ? undefined : rmSync(dir, { recursive: true, force: true })));
  const target = { e2eTest: c.bins.e2eTest, ginkgo: c.bins.ginkgo, kubectl: c.cp.bins.kubectl, kubeconfig: c.cp.adminKubeconfig, nodes: c.nodes.length };
  const suite = SUITES.conformance;
  const expected = await selectedSpecs(target, suite);
  const r = await runSuite(target, suite, { results: dir, logs: dir }, (line) => process.stderr.write(`${line}\n`));
  t.deepEqual(r.failed.map((s) => `${s.name}: ${s.message.split('\n')[0]}`), [], `failed specs (full output: ${r.log}, kept with KNIT_KEEP_KUBE_DIR)`);
  t.deepEqual(r.skipped.map((s) => `${s.name}: ${s.message.split('\n')[0]}`), [], 'skipped specs');
  t.deepEqual(r.passed.map((s) => s.name).sort(), expected.sort(), 'every selected spec passed');
});

// After fileScope's teardown (registered first, so it runs first).
test.serial.after.always('teardown left the machine as it was: no process, netns, mount, link or route of the cluster\'s', (t) => {
  t.deepEqual(snapshotMachine(P, SEG, 'own'), before);
});
