// The test cluster's control plane, built from the module proxy (scripts/build-kube.sh): etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler on loopback. What other tests rely
// on is checked the way a user would: kubectl answers, a Node object gets a podCIDR from the
// controller manager, a service-account token from the TokenRequest API works in a kubeconfig
// of its own (what knit is given), the API server can be stopped and started, and teardown
// leaves no process or dir behind.
import test from 'ava';
import { existsSync } from 'node:fs';
import { createNode, fileScope, startControlPlane, type ControlPlane } from '../fixtures/kube-cluster.js';
import { run } from '../fixtures/exec.js';
import { uniquePrefix } from '../helpers/names.js';

const P = uniquePrefix('kcp');
let cp: ControlPlane;
const scope = fileScope(test);

test.before(async () => {
  cp = await startControlPlane(scope, { prefix: P, clusterCidr: '10.246.0.0/16', clusterCidrV6: 'fd46:1::/56', nodeCidrMaskSize: 24, nodeCidrMaskSizeV6: 64 });
});

test.serial('kubectl talks to the API server of the version pinned in scripts/kube/versions.env', async (t) => {
  const v = JSON.parse(await cp.kubectl('version', '-o', 'json'));
  const pinned = (await run('bash', ['-c', 'source scripts/kube/versions.env && echo $KUBERNETES_VERSION'])).stdout.trim();
  t.is(v.serverVersion.gitVersion, pinned);
  t.is(v.clientVersion.gitVersion, pinned);
  t.true(cp.server.startsWith('https://127.0.0.1:'));
});

test.serial('a Node without a kubelet gets dual-stack podCIDRs from the controller manager', async (t) => {
  const n = await createNode(cp, `${P}n1`, { internalIPs: ['10.99.0.2'], labels: { 'knit.dev/test': P.slice(0, -1) } });
  t.is(n.spec.podCIDRs.length, 2);
  t.regex(n.spec.podCIDRs[0], /^10\.246\.\d+\.0\/24$/);
  t.regex(n.spec.podCIDRs[1], /^fd46:1:[0-9a-f:]*\/64$/, 'a /64 of the IPv6 cluster CIDR');
  t.deepEqual(n.status.addresses.find((a: any) => a.type === 'InternalIP'), { type: 'InternalIP', address: '10.99.0.2' });
  const m = await createNode(cp, `${P}n2`, { internalIPs: ['10.99.0.3'] });
  t.not(m.spec.podCIDR, n.spec.podCIDR, 'each node its own range');
});

test.serial('a TokenRequest token in a kubeconfig of its own reads what its RBAC allows and nothing else', async (t) => {
  const token = await cp.serviceAccountToken(`${P}sys`, 'knit');
  t.is(token.split('.').length, 3, 'a JWT');
  const kc = cp.kubeconfigFor(token);
  const as = (...args: string[]) => run(cp.bins.kubectl, [`--kubeconfig=${kc}`, ...args]);
  const denied = await as('get', 'nodes');
  t.not(denied.code, 0);
  t.regex(denied.stderr, /forbidden/i);
  await cp.kubectl('create', 'clusterrole', `${P}nodes`, '--verb=get,list,watch', '--resource=nodes');
  await cp.kubectl('create', 'clusterrolebinding', `${P}nodes`, `--clusterrole=${P}nodes`, `--serviceaccount=${P}sys:knit`);
  const allowed = await as('get', 'nodes', '-o', 'name');
  t.is(allowed.code, 0, allowed.stderr);
  t.true(allowed.stdout.includes(`node/${P}n1`));
});

test.serial('the API server stops and starts again on the same port with the same data', async (t) => {
  await cp.stopApiserver();
  const down = await run(cp.bins.kubectl, [`--kubeconfig=${cp.adminKubeconfig}`, '--request-timeout=3s', 'get', 'nodes']);
  t.not(down.code, 0);
  await cp.startApiserver();
  t.true((await cp.kubectl('get', 'nodes', '-o', 'name')).includes(`node/${P}n1`));
});

// Runs after fileScope's teardown (after hooks run in the order they were registered).
test.serial.after.always('teardown left no process of the cluster and no dir', (t) => {
  if (!cp) return t.pass();
  for (const s of cp.services) t.false(existsSync(`/proc/${s.pid}`), `${s.name} (pid ${s.pid}) still runs`);
  t.false(existsSync(cp.dir), `${cp.dir} still exists`);
});
