// NetworkPolicy from a real Kubernetes API (etcd, kube-apiserver, controller manager,
// scheduler): knit in a node netns reads Pods, Namespaces and NetworkPolicies with a
// ServiceAccount token that has exactly deploy/rbac.yaml's rights. Pods are Pod objects made
// with kubectl and attached to knit over gRPC by namespace and name (as the CNI ADD does).
// Policies, labels and namespaces change through the API and the verdicts follow (TCP, polled);
// the API server stops: the rules stay across a knit restart (nft monitor), a pod added
// meanwhile is isolated (fail closed) until the API is back.
import test from 'ava';
import { spawn } from 'node:child_process';
import { startControlPlane } from '../fixtures/kube-cluster.js';
import { knitApiNode } from '../fixtures/knit-api-node.js';
import { uniquePrefix, makeNetns } from '../helpers/names.js';
import { cleanupDaemon, runcAttachReq, startDaemon, type Daemon } from '../helpers/daemon.js';
import { listening, sh, tcpHello, tcpServer, until } from '../helpers/cluster-fabric.js';

test('NetworkPolicy from the API: a named port, a policy, a namespace label and a pod label changed through the API; the API down keeps the rules and isolates a new pod until it is back', async (t) => {
  t.timeout(600_000);
  const P = uniquePrefix('pla');
  const cp = await startControlPlane(t, { prefix: P });
  const { node, kubeconfig } = await knitApiNode(t, cp, P);

  // The cluster's objects: namespaces x (team=x) and y (team=y), pods with labels and x/a's
  // named container port.
  const x = `${P}x`.replace(/-/g, '');
  const y = `${P}y`.replace(/-/g, '');
  const pod = (ns: string, name: string, labels: Record<string, string>, ports: object[] = []) => ({
    apiVersion: 'v1', kind: 'Pod', metadata: { namespace: ns, name, labels },
    spec: { containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10.1', ports }] },
  });
  const items = [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: x, labels: { team: 'x' } } },
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: y, labels: { team: 'y' } } },
    pod(x, 'a', { app: 'a' }, [{ name: 'http', containerPort: 8080 }]),
    pod(x, 'b', { app: 'b' }),
    pod(y, 'c', { app: 'c' }),
  ];
  await cp.kubectlInput(JSON.stringify({ apiVersion: 'v1', kind: 'List', items }), 'apply', '-f', '-');
  t.teardown(() => cp.kubectl('delete', 'ns', x, y, '--wait=false').then(() => undefined, () => undefined));
  const policy = (from: object) => JSON.stringify({
    apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { namespace: x, name: 'a-in' },
    spec: { podSelector: { matchLabels: { app: 'a' } }, ingress: [{ from: [from], ports: [{ port: 'http' }] }] },
  });
  await cp.kubectlInput(policy({ namespaceSelector: { matchLabels: { team: 'y' } } }), 'apply', '-f', '-');

  const o = { prefix: P.replace(/-/g, ''), subnet: '10.247.9.0/24', netns: node, config: { networkPolicy: { kubeconfig } } };
  let d: Daemon = await startDaemon(o);
  t.teardown(() => cleanupDaemon(d, o));
  const table = `knit-${o.prefix}-policy`;
  const attach = async (ns: string, name: string) => {
    const n = makeNetns(t, P, `${ns.slice(-1)}${name}`);
    const r = (await d.call('Attach', runcAttachReq(`${P}${ns}-${name}`, n.path, { podNamespace: ns, podName: name }))).result;
    return { ns: n.name, ip: r.ips[0].address.split('/')[0] as string };
  };
  const a = await attach(x, 'a');
  const b = await attach(x, 'b');
  const c = await attach(y, 'c');
  const srv = tcpServer(t, a.ns, 8080);
  await listening(srv);
  const reaches = (from: { ns: string }) => tcpHello(from.ns, a.ip, 8080) !== '';

  t.true(reaches(c), 'y/c → x/a on its named port http (8080): allowed');
  t.false(reaches(b), 'x/b → x/a: denied');

  // The policy changes through the API: from pods app=b in its own namespace.
  await cp.kubectlInput(policy({ podSelector: { matchLabels: { app: 'b' } } }), 'apply', '-f', '-');
  await until(async () => reaches(b), 'x/b allowed once the policy names it', 30_000);
  t.false(reaches(c), 'and y/c no longer');
  // A pod label: b loses app=b.
  await cp.kubectl('label', 'pod', '-n', x, 'b', 'app=other', '--overwrite');
  await until(async () => !reaches(b), 'x/b denied once its label changed', 30_000);
  await cp.kubectl('label', 'pod', '-n', x, 'b', 'app=b', '--overwrite');
  await until(async () => reaches(b), 'x/b allowed again', 30_000);
  // A namespace label: the policy by namespace again, then y loses team=y.
  await cp.kubectlInput(policy({ namespaceSelector: { matchLabels: { team: 'y' } } }), 'apply', '-f', '-');
  await until(async () => reaches(c), 'y/c allowed by its namespace', 30_000);
  await cp.kubectl('label', 'ns', y, 'team=z', '--overwrite');
  await until(async () => !reaches(c), 'y/c denied once its namespace is relabelled', 30_000);
  await cp.kubectl('label', 'ns', y, 'team=y', '--overwrite');
  await until(async () => reaches(c), 'y/c allowed again', 30_000);

  // The API server stops. knit restarts without it: nft monitor sees no change to the table,
  // and the verdicts stay.
  await cp.stopApiserver();
  const monitor = spawn('ip', ['netns', 'exec', node, '/usr/sbin/nft', 'monitor', 'ruleset'], { stdio: ['ignore', 'pipe', 'ignore'] });
  t.teardown(() => void monitor.kill('SIGKILL'));
  let changes = '';
  monitor.stdout.on('data', (s) => (changes += s));
  d.child.kill('SIGKILL');
  await d.exited;
  d = await d.restart();
  t.true(reaches(c), 'y/c still allowed with the API down, after a kill -9 and restart');
  t.false(reaches(b), 'x/b still denied');
  monitor.kill('SIGKILL');
  t.is(changes.split('\n').filter((l) => l.includes(table)).join('\n'), '', 'nft monitor: the restarted knit changed nothing');
  // A pod of x arrives while the API is down: its labels cannot be read, and x has policies:
  // it is isolated (fail closed) until the API answers.
  const late = await attach(x, 'd');
  const lateSrv = tcpServer(t, late.ns, 8080);
  await listening(lateSrv);
  t.is(tcpHello(b.ns, late.ip, 8080), '', 'x/d, admitted with the API down, is isolated');
  await cp.kubectlInput(JSON.stringify(pod(x, 'd', { app: 'd' })), 'apply', '-f', '-').catch(() => undefined); // the API is down: fails
  await cp.startApiserver();
  await cp.kubectlInput(JSON.stringify(pod(x, 'd', { app: 'd' })), 'apply', '-f', '-');
  await until(async () => tcpHello(b.ns, late.ip, 8080) !== '', 'x/d reachable once the API says no policy selects it', 120_000);
  t.true(reaches(c), 'y/c still allowed');

  // The policy is deleted: x/a is open to all.
  await cp.kubectl('delete', 'networkpolicy', '-n', x, 'a-in');
  await until(async () => reaches(b), 'x/b reaches x/a once the policy is gone', 30_000);
});
