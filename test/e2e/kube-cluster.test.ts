// Kubernetes end to end, the way a user runs knit: a real control plane and kubelet built from
// the module proxy (test/fixtures/kube-*.ts), containerd 2 with runc, and `knit install-cni` as
// the kubelet's only CNI config, so every pod the kubelet starts goes kubelet → CRI → knit-cni
// → the knit daemon, on a dual-stack cluster. kubectl applies a Pod, a Deployment of 20 and a Pod
// with a hostPort; their IPv4 and IPv6 addresses are knit's and answer from the node (ping, HTTP); the kubelet and knit restart under
// running pods and nothing is lost; deleting the pods leaves nothing of them (ip -j link, nft
// -j, knit list). One cluster for the file: the tests run in order on it.
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { cleanupDaemon, eventually, hostLinks, pingFrom, startDaemon, CLI, type Daemon } from '../helpers/daemon.js';
import { uniquePrefix } from '../helpers/names.js';
import { fileScope, startControlPlane, startKubelet, type ControlPlane, type Kubelet } from '../fixtures/kube-cluster.js';
import { BUSYBOX_IMAGE } from '../fixtures/kube-node.js';
import { cgroupPids, kubeletSysctlsAsFound } from '../fixtures/kube-host.js';

const P = uniquePrefix('kcl');
const CLUSTER_CIDR = '10.247.0.0/16';
const CLUSTER_CIDR_V6 = 'fd47:247::/56';
// The one node's podCIDRs are the first /24 and /64 of the cluster CIDRs: knit's network serves them.
const SUBNET = '10.247.0.0/24';
const SUBNET6 = 'fd47:247::/64';
const HOST_PORT = 18247;
const NS = `${P}app`.replace(/-/g, '');
const opts = { prefix: P, subnet: SUBNET, subnet6: SUBNET6 };
const scope = fileScope(test);
let d: Daemon;
let cp: ControlPlane;
let node: Kubelet;

const iptablesKube = () =>
  ['iptables-save', 'ip6tables-save'].flatMap((c) => execFileSync(c, { encoding: 'utf8' }).split('\n').filter((l) => /KUBE-/.test(l)));
const sysctls = kubeletSysctlsAsFound;
// Fixed paths only a kubelet or containerd 2 would make (the fixture points everything else at its dirs).
const KUBE_HOST_PATHS = ['/var/lib/kubelet', '/var/log/containers', '/opt/containerd'];
const before = { iptables: iptablesKube(), sysctls: sysctls(), missing: KUBE_HOST_PATHS.filter((p) => !existsSync(p)) };

const knitSandboxes = (): any[] => {
  const l = JSON.parse(execFileSync(process.execPath, [CLI, 'list', '--json', '--socket', d.socket], { encoding: 'utf8' }));
  return Array.isArray(l) ? l : (l.sandboxes ?? []);
};
/** The addresses knit gave the pod, IPv4 first (the order the kubelet publishes podIPs in). */
const knitIpsOf = (pod: any): string[] => {
  const rec = knitSandboxes().find((s) => s.request.pod_name === pod.metadata.name && s.request.pod_namespace === pod.metadata.namespace);
  return (rec?.result.ips ?? []).map((i: any) => i.address.split('/')[0]).sort((a: string, b: string) => Number(a.includes(':')) - Number(b.includes(':')));
};
const podIps = (pod: any): string[] => pod.status.podIPs.map((i: any) => i.ip);
const pods = async (selector: string) => (await cp.getJson('get', 'pods', '-n', NS, '-l', selector)).items as any[];
const httpGet = async (url: string) => {
  const r = await fetch(url, { signal: AbortSignal.timeout(5000) });
  return r.text();
};

/** A busybox pod serving "<pod name>" over HTTP on 8080. */
function podSpec(name: string, extra: object = {}) {
  return {
    terminationGracePeriodSeconds: 1,
    automountServiceAccountToken: false,
    enableServiceLinks: false,
    containers: [
      {
        name: 'web',
        image: BUSYBOX_IMAGE,
        imagePullPolicy: 'Never',
        command: ['sh', '-c', 'mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www'],
        ports: [{ containerPort: 8080 }],
        ...extra,
      },
    ],
  };
}
const apply = (obj: object) => cp.kubectlInput(JSON.stringify(obj), 'apply', '-f', '-');

test.before(async () => {
  d = await startDaemon(opts);
  scope.teardown(() => cleanupDaemon(d, opts)); // registered first: runs last, after the kubelet's pods are gone
  const cniBin = path.join(d.dir, 'cni-bin');
  const cniConf = path.join(d.dir, 'net.d');
  execFileSync(process.execPath, [CLI, 'install-cni', '--bin-dir', cniBin, '--conf-dir', cniConf, '--config', d.configPath, '--network', `${P}net`, '--cni-network', `${P}cni`]);
  cp = await startControlPlane(scope, { prefix: P, clusterCidr: CLUSTER_CIDR, clusterCidrV6: CLUSTER_CIDR_V6 });
  node = await startKubelet(scope, cp, { prefix: P, cniConfDir: cniConf, cniBinDir: cniBin });
  await cp.kubectl('create', 'namespace', NS);
});

test.serial('the kubelet registers a Ready Node whose podCIDRs are knit\'s subnets, and adds no KUBE- iptables chains', async (t) => {
  const n = await cp.getJson('get', 'node', node.nodeName);
  t.deepEqual(n.spec.podCIDRs, [SUBNET, SUBNET6]);
  t.true(n.status.conditions.some((c: any) => c.type === 'Ready' && c.status === 'True'));
  t.regex(n.status.nodeInfo.containerRuntimeVersion, /^containerd:\/\/v?2\./);
  t.deepEqual(n.status.addresses.filter((a: any) => a.type === 'InternalIP'), [{ type: 'InternalIP', address: node.nodeIP }]);
  t.deepEqual(iptablesKube(), before.iptables);
});

test.serial('kubectl apply a Pod: it runs through knit-cni, its IPv4 and IPv6 addresses are knit\'s and answer ping and HTTP from the node', async (t) => {
  await apply({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'solo', namespace: NS, labels: { app: 'solo' } }, spec: podSpec('solo') });
  await cp.kubectl('wait', '-n', NS, '--for=condition=Ready', 'pod/solo', '--timeout=120s');
  const [pod] = await pods('app=solo');
  t.is(pod.status.phase, 'Running');
  const ip = pod.status.podIP;
  const [, ip6] = podIps(pod);
  t.deepEqual(podIps(pod), knitIpsOf(pod), 'the pod IPs the kubelet publishes are the ones knit gave');
  t.true(ip.startsWith('10.247.0.'));
  t.true(ip6!.startsWith('fd47:247::'));
  const rec = knitSandboxes().find((s) => s.request.pod_name === 'solo');
  t.is(rec.request.pod_uid, pod.metadata.uid, 'the CRI passed the pod\'s identity to knit');
  const host = hostLinks().filter((l) => l.ifalias?.includes(`sandbox=${rec.request.sandbox_id};`));
  t.is(host.length, 1);
  t.is(host[0]!.master, `${P}br`);
  t.true([1, 2, 3].some(() => pingFrom(undefined, ip)), `ping ${ip}`);
  t.is((await httpGet(`http://${ip}:8080/`)).trim(), 'solo');
  t.is((await httpGet(`http://[${ip6}]:8080/`)).trim(), 'solo', 'over IPv6 too');
  // Inside the pod (kubectl exec: API server → kubelet → containerd's stream server): eth0 holds it.
  t.regex(await cp.kubectl('exec', '-n', NS, 'solo', '--', 'ip', '-4', '-o', 'addr', 'show', 'dev', 'eth0'), new RegExp(` inet ${ip.replace(/\./g, '\\.')}/`));
});

test.serial('a Deployment of 20: every replica runs on its own knit IP and answers from the node', async (t) => {
  await apply({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'web', namespace: NS },
    spec: { replicas: 20, selector: { matchLabels: { app: 'web' } }, template: { metadata: { labels: { app: 'web' } }, spec: podSpec('web') } },
  });
  await cp.kubectl('rollout', 'status', '-n', NS, 'deployment/web', '--timeout=600s');
  const web = await pods('app=web');
  t.is(web.length, 20);
  const ips = web.map((p) => p.status.podIP);
  t.is(new Set(ips).size, 20, 'distinct IPs');
  t.deepEqual(web.map(podIps), web.map(knitIpsOf), 'each the IPs knit gave that pod');
  for (const p of web) t.is((await httpGet(`http://${p.status.podIP}:8080/`)).trim(), p.metadata.name);
  t.true(ips.every((ip) => [1, 2].some(() => pingFrom(undefined, ip))), 'every pod answers ping');
});

test.serial('a Pod with a hostPort answers on the node\'s 127.0.0.1 through knit\'s host-port table', async (t) => {
  await apply({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'hp', namespace: NS, labels: { app: 'hp' } },
    spec: podSpec('hp', { ports: [{ containerPort: 8080, hostPort: HOST_PORT, protocol: 'TCP' }] }),
  });
  await cp.kubectl('wait', '-n', NS, '--for=condition=Ready', 'pod/hp', '--timeout=120s');
  const rec = knitSandboxes().find((s) => s.request.pod_name === 'hp');
  t.deepEqual(rec.request.port_mappings.map((m: any) => [m.protocol, Number(m.container_port), Number(m.host_port)]), [['TCP', 8080, HOST_PORT]]);
  t.is((await httpGet(`http://127.0.0.1:${HOST_PORT}/`)).trim(), 'hp');
});

test.serial('the kubelet restarted, then knit restarted, under running pods: same sandboxes, same IPs, traffic flows', async (t) => {
  const snapshot = async () => (await pods('app in (solo,web,hp)')).map((p) => [p.metadata.name, p.status.podIP, p.status.containerStatuses[0].restartCount]).sort();
  const sandboxIds = () => knitSandboxes().map((s) => s.request.sandbox_id).sort();
  const pods0 = await snapshot();
  const ids0 = sandboxIds();
  t.is(ids0.length, 22);
  await node.stop();
  await node.start();
  await node.waitReady();
  await d.stop();
  d = await d.restart();
  t.deepEqual(sandboxIds(), ids0, 'knit kept every record');
  // Let the kubelet resync (its PLEG relists every second): nothing must have been recreated.
  await new Promise((r) => setTimeout(r, 5000));
  t.deepEqual(await snapshot(), pods0, 'same pods, same IPs, no container restarted');
  t.deepEqual(sandboxIds(), ids0, 'no sandbox made or removed');
  const sandboxes = JSON.parse(await node.crictl('pods', '-o', 'json')).items.filter((s: any) => s.state === 'SANDBOX_READY');
  t.is(sandboxes.length, 22);
  for (const [name, ip] of pods0) t.is((await httpGet(`http://${ip}:8080/`)).trim(), name);
  t.is((await httpGet(`http://127.0.0.1:${HOST_PORT}/`)).trim(), 'hp');
});

test.serial('pods deleted: knit detached every one, no link, nft table or record of them is left', async (t) => {
  const ids = knitSandboxes().map((s) => s.request.sandbox_id);
  await cp.kubectl('delete', '-n', NS, 'deployment/web', 'pod/solo', 'pod/hp', '--wait=true', '--timeout=180s');
  // The Deployment's pods go through the garbage collector: wait until the kubelet confirmed each gone.
  await cp.kubectl('wait', '-n', NS, '--for=delete', 'pod', '-l', 'app in (solo,web,hp)', '--timeout=180s');
  t.is((await pods('app in (solo,web,hp)')).length, 0);
  await eventually(() => knitSandboxes().length === 0, 'knit records gone', 120_000);
  await eventually(() => hostLinks().every((l) => !ids.some((id) => l.ifalias?.includes(`sandbox=${id};`))), 'host links gone', 30_000);
  const tables = JSON.parse(execFileSync('/usr/sbin/nft', ['-j', 'list', 'tables'], { encoding: 'utf8' })).nftables.filter((x: any) => x.table?.name.startsWith(`hostports-knit-${P}`));
  t.deepEqual(tables, []);
  const node0 = await d.call('NodeStatus', {});
  t.is(Number(node0.networks.find((n: any) => n.name === `${P}net`).pools[0].used), 0, 'no address held');
});

// After fileScope's teardown (after hooks run in registration order): the machine as it was.
test.serial.after.always('teardown left the machine as it was: processes, cgroups, sysctls, iptables', (t) => {
  if (!node) return t.pass();
  for (const s of [...cp.services, node.kubelet(), node.containerd]) t.false(existsSync(`/proc/${s.pid}`), `${s.name} (pid ${s.pid}) still runs`);
  t.deepEqual(cgroupPids(`${P}kube`), []);
  t.false(existsSync(`/sys/fs/cgroup/pids/${P}kube`), 'cgroup root removed');
  t.deepEqual(sysctls(), before.sysctls);
  t.deepEqual(iptablesKube(), before.iptables);
  t.deepEqual(before.missing.filter((p) => existsSync(p)), [], 'host paths the kubelet or containerd made are gone');
  if (process.env.KNIT_KEEP_KUBE_DIR) return;
  t.false(existsSync(node.dir), `${node.dir} removed`);
  t.false(existsSync(cp.dir), `${cp.dir} removed`);
});
