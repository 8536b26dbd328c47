// ClusterNetworkPolicy from a real Kubernetes API (etcd, kube-apiserver, controller manager,
// scheduler) with the CRD of network-policy-api's release (scripts/build-cnp-conformance.sh):
// knit in a node netns, networkPolicy.clusterNetworkPolicies on, reads ClusterNetworkPolicies,
// Nodes, NetworkPolicies, Namespaces and Pods with a ServiceAccount token that has exactly
// deploy/rbac.yaml's rights. An Admin Deny, an Admin Pass that hands a namespace's traffic to
// a NetworkPolicy, and a Baseline Deny, made and deleted through the API; verdicts by real TCP
// between pods, the tier chains and their counters through nft -j, and `knit policy explain`
// naming the tier and the policy that decide.
import test, { type ExecutionContext } from 'ava';
import { spawnSync } from 'node:child_process';
import { startControlPlane } from '../fixtures/kube-cluster.js';
import { knitApiNode } from '../fixtures/knit-api-node.js';
import { cnpConformance } from '../fixtures/cnp-conformance.js';
import { uniquePrefix, makeNetns } from '../helpers/names.js';
import { CLI, cleanupDaemon, runcAttachReq, startDaemon } from '../helpers/daemon.js';
import { listening, sh, tcpHello, tcpServer, until } from '../helpers/cluster-fabric.js';
import { policyCounters, policyTableJson } from '../helpers/policy-traffic.js';
import { clusterPolicyKey } from '../../src/policy/cluster-policy.js';
import { tierCounter } from '../../src/policy/cluster-policy-nft.js';

/** A control plane with the channel's CRD (none: not installed) and a node netns whose knit
 * reads the API with deploy/'s rights. */
async function apiCluster(t: ExecutionContext, tag: string, crd?: 'standard' | 'experimental') {
  const P = uniquePrefix(tag);
  const cnp = await cnpConformance();
  const cp = await startControlPlane(t, { prefix: P });
  if (crd) {
    await cp.kubectl('apply', '--server-side', '-f', cnp.crds[crd]);
    await cp.waitCrdEstablished('clusternetworkpolicies.policy.networking.k8s.io');
  }
  return { P, cnp, cp, ...(await knitApiNode(t, cp, P)) };
}

test('ClusterNetworkPolicy from the API: an Admin Deny over a NetworkPolicy, an Admin Pass handing a namespace to it, a Baseline Deny for the pods it leaves; deleted through the API, the verdicts follow; explain names the tier and the policy', async (t) => {
  t.timeout(600_000);
  const { P, cp, node, kubeconfig } = await apiCluster(t, 'cpa', 'standard');

  // Namespaces x (team=x: servers a and s, client b) and y (team=y: clients c and d).
  const x = `${P}x`.replace(/-/g, '');
  const y = `${P}y`.replace(/-/g, '');
  const pod = (ns: string, name: string) => ({
    apiVersion: 'v1', kind: 'Pod', metadata: { namespace: ns, name, labels: { app: name } },
    spec: { containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10.1' }] },
  });
  const items = [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: x, labels: { team: 'x' } } },
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: y, labels: { team: 'y' } } },
    pod(x, 'a'), pod(x, 's'), pod(x, 'b'), pod(y, 'c'), pod(y, 'd'),
  ];
  await cp.kubectlInput(JSON.stringify({ apiVersion: 'v1', kind: 'List', items }), 'apply', '-f', '-');
  t.teardown(() => cp.kubectl('delete', 'ns', x, y, '--wait=false').then(() => undefined, () => undefined));
  const cnpOf = (name: string, tier: string, priority: number, action: string, from: object) => ({
    apiVersion: 'policy.networking.k8s.io/v1beta1', kind: 'ClusterNetworkPolicy', metadata: { name: `${P}${name}` },
    spec: { tier, priority, subject: { namespaces: { matchLabels: { team: 'x' } } }, ingress: [{ name: `${name}-rule`, action, from: [from] }] },
  });
  const denyD = cnpOf('deny-d', 'Admin', 10, 'Deny', { pods: { namespaceSelector: { matchLabels: { team: 'y' } }, podSelector: { matchLabels: { app: 'd' } } } });
  const passY = cnpOf('pass-y', 'Admin', 20, 'Pass', { namespaces: { matchLabels: { team: 'y' } } });
  const baseline = cnpOf('baseline', 'Baseline', 0, 'Deny', { namespaces: {} });
  const np = {
    apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { namespace: x, name: 'a-from-y' },
    spec: { podSelector: { matchLabels: { app: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'y' } } }] }] },
  };
  await cp.kubectlInput(JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [denyD, passY, baseline, np] }), 'apply', '-f', '-');
  t.teardown(() => cp.kubectl('delete', 'clusternetworkpolicies', '--ignore-not-found', `${P}deny-d`, `${P}pass-y`, `${P}baseline`).then(() => undefined, () => undefined));

  const o = { prefix: P.replace(/-/g, ''), subnet: '10.247.11.0/24', netns: node, config: { networkPolicy: { kubeconfig, clusterNetworkPolicies: true } } };
  const d = await startDaemon(o);
  const started = Date.now();
  t.teardown(() => cleanupDaemon(d, o));
  const table = `knit-${o.prefix}-policy`;
  const attach = async (ns: string, name: string) => {
    const n = makeNetns(t, P, `${ns === x ? 'x' : 'y'}${name}`);
    const r = (await d.call('Attach', runcAttachReq(`${P}${ns}-${name}`, n.path, { podNamespace: ns, podName: name }))).result;
    return { ns: n.name, ip: r.ips[0].address.split('/')[0] as string };
  };
  const pods = { a: await attach(x, 'a'), s: await attach(x, 's'), b: await attach(x, 'b'), c: await attach(y, 'c'), d: await attach(y, 'd') };
  for (const server of [pods.a, pods.s]) await listening(tcpServer(t, server.ns, 8080));
  const reaches = (from: { ns: string }, to: { ip: string }) => tcpHello(from.ns, to.ip, 8080) !== '';

  const counters = () => policyCounters(node, table);
  const deniedByD = tierCounter(clusterPolicyKey(`${P}deny-d`), 'ingress', 'Deny');
  const before = counters()[deniedByD];
  t.is(before, 0, 'nft -j: the Admin Deny\'s counter is in the table, at 0');
  t.false(reaches(pods.d, pods.a), 'y/d → x/a: denied by the Admin Deny, though the NetworkPolicy allows namespace y');
  t.true(counters()[deniedByD]! > 0, 'nft -j: the Admin Deny\'s counter counted the refused SYNs');
  t.true(reaches(pods.c, pods.a), 'y/c → x/a: passed by the Admin Pass to the NetworkPolicy, which allows it');
  t.true(counters()[tierCounter(clusterPolicyKey(`${P}pass-y`), 'ingress', 'Pass')]! > 0, 'nft -j: the Pass counted');
  t.false(reaches(pods.b, pods.a), 'x/b → x/a: the NetworkPolicy isolates x/a and does not allow x');
  t.false(reaches(pods.c, pods.s), 'y/c → x/s: passed, no NetworkPolicy selects x/s, the Baseline Deny');
  t.false(reaches(pods.b, pods.s), 'x/b → x/s: the Baseline Deny');
  const tj = policyTableJson(node, table);
  t.regex(tj.maps.in4![pods.a.ip]!, /^ai4_/, 'nft -j: x/a is judged by its Admin tier chain first');
  t.regex(tj.maps.in4![pods.s.ip]!, /^ai4_/, 'and x/s');
  t.true(tj.chains.some((c) => /^bi4_/.test(c)), 'a Baseline tier chain is in the table');

  const explain = (from: string, to: string) => {
    const r = spawnSync(process.execPath, [CLI, 'policy', 'explain', '--from', from, '--to', to, '--port', '8080/TCP', '--socket', d.socket], { encoding: 'utf8', env: { ...process.env, KNIT_SOCKET: '' } });
    t.is(r.status, 0, r.stderr);
    return r.stdout;
  };
  t.regex(explain(`${y}/d`, `${x}/a`), new RegExp(`: DENIED$[\\s\\S]*denied by cnp:${P}deny-d ingress\\[0\\] \\(deny-d-rule\\), Admin tier`, 'm'));
  t.regex(explain(`${y}/c`, `${x}/a`), new RegExp(`: ALLOWED$[\\s\\S]*a-from-y[\\s\\S]*passed on by cnp:${P}pass-y Admin`, 'm'));
  t.regex(explain(`${y}/c`, `${x}/s`), new RegExp(`: DENIED$[\\s\\S]*denied by cnp:${P}baseline ingress\\[0\\] \\(baseline-rule\\), Baseline tier`, 'm'));

  // Deleted through the API, one at a time: the verdicts follow.
  await cp.kubectl('delete', 'clusternetworkpolicy', `${P}baseline`);
  await until(async () => reaches(pods.b, pods.s), 'x/b reaches x/s once the Baseline Deny is gone', 30_000);
  t.true(reaches(pods.c, pods.s), 'and y/c, passed on to nothing');
  t.false(reaches(pods.d, pods.a), 'y/d → x/a still denied by the Admin tier');
  await cp.kubectl('delete', 'clusternetworkpolicy', `${P}deny-d`);
  await until(async () => reaches(pods.d, pods.a), 'y/d reaches x/a once the Admin Deny is gone (the NetworkPolicy allows y)', 30_000);
  t.false(reaches(pods.b, pods.a), 'x/b → x/a: still the NetworkPolicy');
  t.regex(explain(`${y}/d`, `${x}/a`), /: ALLOWED$/m);
  await cp.kubectl('delete', 'clusternetworkpolicy', `${P}pass-y`);
  await until(async () => !policyTableJson(node, table).chains.some((c) => /^[ab][ie][46]_/.test(c)), 'no tier chain left once no ClusterNetworkPolicy is', 30_000);
  t.true(reaches(pods.c, pods.a), 'y/c → x/a: the NetworkPolicy alone');
  t.false(d.logs.some((l) => /applying the table failed/.test(l)), 'every transaction went through');
  // Five watches (pods, namespaces, networkpolicies, clusternetworkpolicies, nodes) each hold a
  // connection for as long as they stream: none may wait behind the others, which would see
  // nothing and fail at the 30 s deadline of a call's answer.
  const ran = Date.now() - started;
  if (ran < 40_000) await new Promise((r) => setTimeout(r, 40_000 - ran));
  t.deepEqual(d.logs.filter((l) => /Kubernetes API unreachable/.test(l)), [], 'no watch starved');
});

test('ClusterNetworkPolicy on, its CRD not installed: knit enforces NetworkPolicy, knit status and the log name the missing CRD; once the CRD and a ClusterNetworkPolicy come, it is enforced', async (t) => {
  t.timeout(600_000);
  const { P, cnp, cp, node, kubeconfig } = await apiCluster(t, 'cpn');
  const x = `${P}x`.replace(/-/g, '');
  const pod = (name: string) => ({ apiVersion: 'v1', kind: 'Pod', metadata: { namespace: x, name, labels: { app: name } }, spec: { containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10.1' }] } });
  const np = { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { namespace: x, name: 'a-closed' }, spec: { podSelector: { matchLabels: { app: 'a' } }, policyTypes: ['Ingress'] } };
  await cp.kubectlInput(JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: x } }, pod('a'), pod('s'), pod('b'), np] }), 'apply', '-f', '-');
  t.teardown(() => cp.kubectl('delete', 'ns', x, '--wait=false').then(() => undefined, () => undefined));

  const o = { prefix: P.replace(/-/g, ''), subnet: '10.247.12.0/24', netns: node, config: { networkPolicy: { kubeconfig, clusterNetworkPolicies: true } } };
  const d = await startDaemon(o);
  t.teardown(() => cleanupDaemon(d, o));
  const attach = async (name: string) => {
    const n = makeNetns(t, P, name);
    const r = (await d.call('Attach', runcAttachReq(`${P}${name}`, n.path, { podNamespace: x, podName: name }))).result;
    return { ns: n.name, ip: r.ips[0].address.split('/')[0] as string };
  };
  const pods = { a: await attach('a'), s: await attach('s'), b: await attach('b') };
  for (const server of [pods.a, pods.s]) await listening(tcpServer(t, server.ns, 8080));
  const reaches = (from: { ns: string }, to: { ip: string }) => tcpHello(from.ns, to.ip, 8080) !== '';

  t.false(reaches(pods.b, pods.a), 'x/b → x/a: the NetworkPolicy isolates x/a, though no ClusterNetworkPolicy can be read');
  t.true(reaches(pods.b, pods.s), 'x/b → x/s: nothing selects x/s');
  const status = spawnSync(process.execPath, [CLI, 'status', '--socket', d.socket], { encoding: 'utf8', env: { ...process.env, KNIT_SOCKET: '' } });
  t.is(status.status, 0, status.stderr);
  t.regex(status.stdout, /network policy: view from kubeconfig .* \(synced: .*clusternetworkpolicies: .*answers 404, not served: the ClusterNetworkPolicy CRD \(clusternetworkpolicies\.policy\.networking\.k8s\.io, v1beta1\) is not installed/, 'knit status names the missing CRD');
  t.true(d.logs.some((l) => /not served by the Kubernetes API/.test(l) && /ClusterNetworkPolicy CRD/.test(l)), 'and so does the log, once');

  await cp.kubectl('apply', '--server-side', '-f', cnp.crds.standard);
  await cp.waitCrdEstablished('clusternetworkpolicies.policy.networking.k8s.io');
  const deny = {
    apiVersion: 'policy.networking.k8s.io/v1beta1', kind: 'ClusterNetworkPolicy', metadata: { name: `${P}deny-b` },
    spec: { tier: 'Admin', priority: 10, subject: { pods: { namespaceSelector: {}, podSelector: { matchLabels: { app: 's' } } } }, ingress: [{ action: 'Deny', from: [{ pods: { namespaceSelector: {}, podSelector: { matchLabels: { app: 'b' } } } }] }] },
  };
  await cp.kubectlInput(JSON.stringify(deny), 'apply', '-f', '-');
  // The informer lists again after its backoff (at most 30 s): no restart.
  await until(async () => !reaches(pods.b, pods.s), 'x/b → x/s denied by the Admin Deny once the CRD is in', 90_000);
  t.false(reaches(pods.b, pods.a), 'x/b → x/a still isolated');
  const after = spawnSync(process.execPath, [CLI, 'status', '--socket', d.socket], { encoding: 'utf8', env: { ...process.env, KNIT_SOCKET: '' } });
  t.notRegex(after.stdout, /not served/, 'knit status no longer says the CRD is missing');
  t.regex(after.stdout, /network policy: view from .* \(synced: 1 policies, 3 pods\)/);
});

test('the CRD upgraded from the standard to the experimental channel under a running knit, then an Admin egress rule patched to a destinationNamedPort as the suite patches it: knit reads it whole (the destination pod\'s own number for the name is accepted, its other ports fall to the next rule\'s Deny)', async (t) => {
  t.timeout(600_000);
  const { P, cnp, cp, node, kubeconfig } = await apiCluster(t, 'cpp', 'standard');
  const x = `${P}x`.replace(/-/g, '');
  const y = `${P}y`.replace(/-/g, '');
  const container = (ports: object[] = []) => ({ name: 'c', image: 'registry.k8s.io/pause:3.10.1', ports });
  const items = [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: x } },
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: y } },
    { apiVersion: 'v1', kind: 'Pod', metadata: { namespace: x, name: 'a' }, spec: { containers: [container()] } },
    { apiVersion: 'v1', kind: 'Pod', metadata: { namespace: y, name: 'w' }, spec: { containers: [container([{ containerPort: 8080, protocol: 'TCP', name: 'web' }])] } },
  ];
  await cp.kubectlInput(JSON.stringify({ apiVersion: 'v1', kind: 'List', items }), 'apply', '-f', '-');
  t.teardown(() => cp.kubectl('delete', 'ns', x, y, '--wait=false').then(() => undefined, () => undefined));
  const ns = (name: string) => ({ namespaces: { matchLabels: { 'kubernetes.io/metadata.name': name } } });
  const policy = {
    apiVersion: 'policy.networking.k8s.io/v1beta1', kind: 'ClusterNetworkPolicy', metadata: { name: `${P}egress` },
    spec: { tier: 'Admin', priority: 6, subject: ns(x), egress: [
      { name: 'to-y-9999', action: 'Accept', to: [ns(y)], protocols: [{ tcp: { destinationPort: { number: 9999 } } }] },
      { name: 'deny-y', action: 'Deny', to: [ns(y)] },
    ] },
  };
  await cp.kubectlInput(JSON.stringify(policy), 'apply', '-f', '-');
  t.teardown(() => cp.kubectl('delete', 'clusternetworkpolicies', '--ignore-not-found', `${P}egress`).then(() => undefined, () => undefined));

  const o = { prefix: P.replace(/-/g, ''), subnet: '10.247.16.0/24', netns: node, config: { networkPolicy: { kubeconfig, clusterNetworkPolicies: true } } };
  const d = await startDaemon(o);
  t.teardown(() => cleanupDaemon(d, o));
  const attach = async (namespace: string, name: string) => {
    const n = makeNetns(t, P, `${namespace === x ? 'x' : 'y'}${name}`);
    const r = (await d.call('Attach', runcAttachReq(`${P}${namespace}-${name}`, n.path, { podNamespace: namespace, podName: name }))).result;
    return { ns: n.name, ip: r.ips[0].address.split('/')[0] as string };
  };
  const a = await attach(x, 'a');
  const w = await attach(y, 'w');
  for (const port of [8080, 8081]) await listening(tcpServer(t, w.ns, port));
  t.is(tcpHello(a.ns, w.ip, 8080), '', 'before the patch: x/a → y/w:8080 denied (the Accept names 9999)');

  // The operator moves to the experimental channel. knit's watch began on the API server's
  // storage for the standard schema, which prunes by it what it reads from etcd.
  await cp.kubectl('apply', '--server-side', '--force-conflicts', '-f', cnp.crds.experimental);
  await cp.waitCrdEstablished('clusternetworkpolicies.policy.networking.k8s.io');
  const probe = { ...policy, metadata: { name: `${P}probe` }, spec: { ...policy.spec, egress: [{ name: 'p', action: 'Accept', to: [ns(y)], protocols: [{ destinationNamedPort: 'web' }] }] } };
  await until(async () => (await cp.kubectlInput(JSON.stringify(probe), 'create', '--dry-run=server', '-o', 'json', '-f', '-')).includes('destinationNamedPort'), 'the API server keeps destinationNamedPort (the new schema in force)', 60_000);

  // The suite's patch: the first rule's protocols become the named port alone (a merge patch
  // replaces the egress list whole).
  const patched = structuredClone(policy.spec.egress);
  patched[0]!.protocols = [{ destinationNamedPort: 'web' } as never];
  await cp.kubectl('patch', 'clusternetworkpolicy', `${P}egress`, '--type=merge', '-p', JSON.stringify({ spec: { egress: patched } }));
  const stored = JSON.parse(await cp.kubectl('get', 'clusternetworkpolicy', `${P}egress`, '-o', 'json'));
  t.deepEqual(stored.spec.egress[0].protocols, [{ destinationNamedPort: 'web' }], 'the API server kept the named port (experimental schema)');
  await until(async () => tcpHello(a.ns, w.ip, 8080) !== '', 'x/a → y/w:8080 accepted: web is 8080 on y/w', 60_000);
  t.is(tcpHello(a.ns, w.ip, 8081), '', 'x/a → y/w:8081: not web, the Deny');
  // The old watch may have handed knit the patch pruned first (logged as a rule it cannot read);
  // the relists after the CRD change are what must have set it right.
  t.true(d.logs.some((l) => /the ClusterNetworkPolicy CRD changed/.test(l)), 'knit saw the CRD change and listed again');
});
