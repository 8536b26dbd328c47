// The cluster network across the machine's own node and netns nodes (issue #29): a real control
// plane whose kube-controller-manager allocates dual-stack podCIDRs; the machine's node runs its
// kubelet, containerd 2 and a knit whose network takes that Node's podCIDRs (crossNode: routes),
// with its InternalIPs on a veth the test plugs from the host into the fabric bridge; two netns
// nodes each run their own knit, reading Nodes from the API with a ServiceAccount token and
// deploy/rbac.yaml's rights. A Deployment (kubectl apply; the only kubelet is the machine's)
// reaches the pods the netns nodes' knits attached, and they reach it: ping and TCP, IPv4 and
// IPv6, from inside the Deployment's pods through `kubectl exec` (API server → kubelet →
// containerd's stream server, the path kube-cluster.test.ts proves). `ip -j route show proto
// 201` on the host and in each node netns sees the routes; a Node deleted through the API takes
// its route off the host. knit leaves its routes behind when it stops (so a restart interrupts
// no pod): the test removes those in its own ranges, and checks the machine is as it found it.
import test from 'ava';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createNode, startControlPlane, startKubelet, type ControlPlane, type Kubelet } from '../fixtures/kube-cluster.js';
import { BUSYBOX_IMAGE } from '../fixtures/kube-node.js';
import { cgroupPids, kubeletSysctlsAsFound } from '../fixtures/kube-host.js';
import { makeNetns, uniquePrefix } from '../helpers/names.js';
import { cleanupDaemon, CLI, eventually, hostLinks, ipJson, pingFrom, removeLinkQuietly, runcAttachReq, startDaemon, type Daemon } from '../helpers/daemon.js';
import { apiRelay, buildFabric, sh, until, type FabricNode } from '../helpers/cluster-fabric.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const deploy = (f: string) => path.join(root, 'deploy', f);

const P = uniquePrefix('ckl');
const SEG = 198;
// The cluster's pod ranges: every proto 201 route the host gets lies in them.
const CLUSTER_CIDR = '10.198.0.0/16';
const CLUSTER_CIDR6 = 'fd98:198::/56';
// The machine's node on the fabric (192.168.198.0/24, fd6b:198::/64): the host end of a veth
// whose other end is a port of the fabric bridge.
const HOST_LINK = `${P}f`;
const HOST_IP4 = `192.168.${SEG}.10`;
const HOST_IP6 = `fd6b:${SEG}::10`;
const NS = `${P}app`.replace(/-/g, '');
const SERVER_PORT = 18198;

const iptablesKube = () =>
  ['iptables-save', 'ip6tables-save'].flatMap((c) => execFileSync(c, { encoding: 'utf8' }).split('\n').filter((l) => /KUBE-/.test(l)));
/** The host's forwarding switches, global and eth0's (knit must switch only its own devices). */
const FORWARDING = ['ipv4/ip_forward', 'ipv4/conf/all/forwarding', 'ipv4/conf/default/forwarding', 'ipv4/conf/eth0/forwarding', 'ipv6/conf/all/forwarding', 'ipv6/conf/default/forwarding', 'ipv6/conf/eth0/forwarding', 'ipv6/conf/all/force_forwarding', 'ipv6/conf/eth0/force_forwarding'];
const sysctl = (k: string) => (existsSync(`/proc/sys/net/${k}`) ? readFileSync(`/proc/sys/net/${k}`, 'utf8').trim() : 'absent');
const forwarding = () => FORWARDING.map((k) => `${k}=${sysctl(k)}`);
/** Routes knit made (protocol 201) in the host netns, in the test's cluster ranges. */
const hostKnitRoutes = () => [
  ...ipJson(['-4', 'route', 'show', 'root', CLUSTER_CIDR, 'proto', '201']),
  ...ipJson(['-6', 'route', 'show', 'root', CLUSTER_CIDR6, 'proto', '201']),
];
const removeHostKnitRoutes = () => {
  for (const [family, range] of [['-4', CLUSTER_CIDR], ['-6', CLUSTER_CIDR6]]) {
    try {
      execFileSync('ip', [family!, 'route', 'flush', 'root', range!, 'proto', '201'], { stdio: 'ignore' });
    } catch {
      /* none */
    }
  }
};
const mine = (s: string | undefined) => !!s && (s.startsWith(P) || s.includes(`knit-${P}`));
const before = {
  iptables: iptablesKube(),
  sysctls: kubeletSysctlsAsFound(),
  forwarding: forwarding(),
  routes: hostKnitRoutes(),
  links: hostLinks().filter((l) => mine(l.ifname) || mine(l.ifalias)).map((l) => l.ifname),
};

// What the teardown check looks at once the test is over.
let cp: ControlPlane | undefined;
let node: Kubelet | undefined;
const daemons: Daemon[] = [];

/** An HTTP server in ns on SERVER_PORT answering "from <client address>" (no NAT on the way). */
function whoServer(t: { teardown(fn: () => void): void }, ns: string): Promise<void> {
  const code = `require('http').createServer((q,s)=>s.end('from '+q.socket.remoteAddress.replace(/^::ffff:/,''))).listen(${SERVER_PORT},'::',()=>console.log('up'))`;
  const child = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  return new Promise((resolve) => child.stdout!.once('data', () => resolve()));
}

const url = (ip: string, port: number) => `http://${ip.includes(':') ? `[${ip}]` : ip}:${port}/`;
/** curl from a netns pod: an independent client. */
const curlFrom = (ns: string, ip: string, port: number) => {
  try {
    return sh(ns, 'curl', '-sg', '--max-time', '5', url(ip, port)).trim();
  } catch {
    return '';
  }
};
const v4 = (ips: string[]) => ips.find((i) => !i.includes(':'))!;
const v6 = (ips: string[]) => ips.find((i) => i.includes(':'))!;

test.serial('the machine\'s kubelet node and two netns nodes, knit on each with podCIDRs from the API: a Deployment\'s pods and the netns nodes\' pods reach each other both ways, IPv4 and IPv6', async (t) => {
  t.timeout(900_000);
  cp = await startControlPlane(t, { prefix: P, clusterCidr: CLUSTER_CIDR, clusterCidrV6: CLUSTER_CIDR6, nodeCidrMaskSize: 24, nodeCidrMaskSizeV6: 64 });
  await cp.kubectl('apply', '-f', deploy('namespace.yaml'), '-f', deploy('serviceaccount.yaml'), '-f', deploy('rbac.yaml'));
  const c = cp;
  t.teardown(() => c.kubectl('delete', '--ignore-not-found', '-f', deploy('rbac.yaml')).then(() => undefined, () => undefined));
  const kubeconfig = cp.kubeconfigFor((await cp.kubectl('create', 'token', 'knit', '-n', 'knit-system', '--duration=3600s')).trim());

  // The fabric with two netns nodes (and buildFabric's router, its far node and the outside,
  // unused here), and the machine plugged into it.
  const f = buildFabric(t, P, SEG, 2);
  const [n1, n2] = f.nodes as [FabricNode, FabricNode];
  t.teardown(() => removeLinkQuietly(HOST_LINK));
  execFileSync('ip', ['link', 'add', HOST_LINK, 'type', 'veth', 'peer', 'name', 'host', 'netns', f.bridgeNs]);
  execFileSync('ip', ['-n', f.bridgeNs, 'link', 'set', 'host', 'master', 'fab', 'up']);
  execFileSync('ip', ['addr', 'add', `${HOST_IP4}/24`, 'dev', HOST_LINK]);
  execFileSync('ip', ['-6', 'addr', 'add', `${HOST_IP6}/64`, 'dev', HOST_LINK, 'nodad']);
  execFileSync('ip', ['link', 'set', HOST_LINK, 'up']);

  const dir = mkdtempSync(path.join(os.tmpdir(), `knit-${P}relay-`));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const sock = path.join(dir, 'api.sock');
  const port = Number(new URL(cp.server).port);
  await apiRelay(t, port, sock);
  for (const n of [n1, n2]) await apiRelay(t, port, sock, n.ns);
  const nodeName = (n: FabricNode) => `${P}${n.name}`;
  for (const n of [n1, n2]) await createNode(cp, nodeName(n), { internalIPs: [n.ip4, n.ip6] });

  // The machine's knit: its network takes the kubelet Node's podCIDRs; no masquerade (that would
  // switch on forwarding on eth0, the default route's link, which is not the test's).
  const hostNode = `${P}node`;
  const net = (bridge: string, extra: object = {}) => ({ name: `${P}net`, mode: 'bridge', bridge, ipv4: { subnet: 'node' }, ipv6: { subnet: 'node' }, crossNode: 'routes', ...extra });
  // Registered before the daemon's teardown, so it runs after knit stopped: knit keeps its
  // routes across a stop; these are the test's to remove (protocol 201, the test's ranges).
  t.teardown(removeHostKnitRoutes);
  const hostOpts = { prefix: P, subnet: '10.198.255.0/24' }; // subnet unused: config.networks replaces the default network
  const hd = await startDaemon({ ...hostOpts, config: { networks: [net(`${P}br`, { masquerade: false })], cluster: { nodeName: hostNode, kubeconfig } } });
  daemons.push(hd);
  t.teardown(() => cleanupDaemon(hd, hostOpts)); // before the kubelet's: runs after its pods are gone
  const cniBin = path.join(hd.dir, 'cni-bin');
  const cniConf = path.join(hd.dir, 'net.d');
  execFileSync(process.execPath, [CLI, 'install-cni', '--bin-dir', cniBin, '--conf-dir', cniConf, '--config', hd.configPath, '--network', `${P}net`, '--cni-network', `${P}cni`]);
  node = await startKubelet(t, cp, { prefix: P, nodeName: hostNode, cniConfDir: cniConf, cniBinDir: cniBin, nodeIP: HOST_IP4, nodeIP6: HOST_IP6 });
  const hostNodeObj = await cp.getJson('get', 'node', hostNode);
  t.deepEqual(hostNodeObj.status.addresses.filter((a: any) => a.type === 'InternalIP').map((a: any) => a.address), [HOST_IP4, HOST_IP6], 'the kubelet\'s Node has its fabric addresses');

  // A knit in each netns node.
  const nodeDaemons = new Map<FabricNode, Daemon>();
  for (const n of [n1, n2]) {
    const o = { prefix: `${P}${n.name}`.replace(/-/g, ''), subnet: n.pod4, netns: n.ns };
    const d = await startDaemon({ ...o, config: { networks: [net('cbr0')], cluster: { nodeName: nodeName(n), kubeconfig } } });
    daemons.push(d);
    nodeDaemons.set(n, d);
    t.teardown(() => cleanupDaemon(d, o));
  }

  // The podCIDRs kube-controller-manager gave, and what knit serves on the machine.
  const podCidrs = async (name: string) => (await cp!.getJson('get', 'node', name)).spec.podCIDRs as string[];
  const [h4, h6] = await podCidrs(hostNode);
  const [p1v4, p1v6] = await podCidrs(nodeName(n1));
  const [p2v4, p2v6] = await podCidrs(nodeName(n2));
  await until(async () => (await hd.call('NodeStatus', {})).ready, 'the machine\'s knit ready with its Node\'s podCIDRs', 60_000);
  /** The machine's knit's own account (NodeStatus): its subnets and, per peer, via and in place. */
  const hostView = async () => {
    const n = (await hd.call('NodeStatus', {})).networks.find((x: any) => x.name === `${P}net`);
    return { subnets: n.node_subnets, peers: n.peers.map((x: any) => [x.node, x.via, x.in_place, x.problem ?? '']) };
  };

  // The independent observer: each node routes every other node's podCIDRs via its fabric address.
  const has = (routes: any[], dst: string, gateway: string) => routes.some((r) => r.dst === dst && r.gateway === gateway);
  const routesIn = (ns?: string) => [...ipJson(['-4', 'route', 'show', 'proto', '201'], ns), ...ipJson(['-6', 'route', 'show', 'proto', '201'], ns)];
  await eventually(() => {
    const r = routesIn();
    return has(r, p1v4, n1.ip4) && has(r, p1v6, n1.ip6) && has(r, p2v4, n2.ip4) && has(r, p2v6, n2.ip6);
  }, 'the host routes both netns nodes\' podCIDRs', 30_000);
  t.deepEqual(
    hostKnitRoutes().map((r) => `${r.type === 'blackhole' ? 'blackhole ' : ''}${r.dst}${r.gateway ? ` via ${r.gateway} dev ${r.dev}` : ''}`).sort(),
    [`blackhole ${h4}`, `blackhole ${h6}`, `${p1v4} via ${n1.ip4} dev ${HOST_LINK}`, `${p1v6} via ${n1.ip6} dev ${HOST_LINK}`, `${p2v4} via ${n2.ip4} dev ${HOST_LINK}`, `${p2v6} via ${n2.ip6} dev ${HOST_LINK}`].sort(),
    'the host holds exactly: its own block (blackhole behind the bridge) and a route per peer podCIDR, via the fabric veth',
  );
  t.deepEqual(await hostView(), { subnets: [h4, h6], peers: [[nodeName(n1), n1.ip4, true, ''], [nodeName(n2), n2.ip4, true, '']] }, 'knit says the same: its Node\'s podCIDRs, both peers routed');
  for (const [n, other] of [[n1, n2], [n2, n1]] as const) {
    const [o4, o6] = await podCidrs(nodeName(other));
    await eventually(() => {
      const r = routesIn(n.ns);
      return has(r, h4, HOST_IP4) && has(r, h6, HOST_IP6) && has(r, o4!, other.ip4) && has(r, o6!, other.ip6);
    }, `${n.name} routes the machine's and ${other.name}'s podCIDRs`, 30_000);
  }

  // Forwarding on the host: on knit's bridge and the fabric veth only; the global switches and
  // eth0's as found.
  t.is(sysctl(`ipv4/conf/${HOST_LINK}/forwarding`), '1');
  t.is(sysctl(`ipv4/conf/${P}br/forwarding`), '1');
  if (existsSync('/proc/sys/net/ipv6/conf/all/force_forwarding')) {
    t.is(sysctl(`ipv6/conf/${HOST_LINK}/force_forwarding`), '1');
    t.is(sysctl(`ipv6/conf/${P}br/force_forwarding`), '1');
  }
  t.deepEqual(forwarding(), before.forwarding, 'global and eth0 forwarding switches untouched');

  // A pod on each netns node, attached by that node's knit, serving "from <client>".
  const netnsPods: { node: FabricNode; ns: string; ips: string[] }[] = [];
  for (const n of [n1, n2]) {
    const ns = makeNetns(t, P, `p${n.name}`);
    const r = (await nodeDaemons.get(n)!.call('Attach', runcAttachReq(`${P}${n.name}-pod`, ns.path))).result;
    const ips = r.ips.map((i: any) => i.address.split('/')[0]);
    netnsPods.push({ node: n, ns: ns.name, ips });
    sh(ns.name, 'ip', 'link', 'set', 'lo', 'up');
    await whoServer(t, ns.name);
  }
  t.true(v4(netnsPods[0]!.ips).startsWith(p1v4!.replace(/0\/24$/, '')), 'node 1\'s pod has an address of node 1\'s podCIDR');
  t.true(v4(netnsPods[1]!.ips).startsWith(p2v4!.replace(/0\/24$/, '')), 'node 2\'s pod has an address of node 2\'s podCIDR');

  // The Deployment: every replica lands on the machine's node (its only kubelet), addressed by knit.
  await cp.kubectl('create', 'namespace', NS);
  const replicas = 3;
  await cp.kubectlInput(JSON.stringify({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'web', namespace: NS },
    spec: {
      replicas,
      selector: { matchLabels: { app: 'web' } },
      template: {
        metadata: { labels: { app: 'web' } },
        spec: {
          terminationGracePeriodSeconds: 1,
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          containers: [{ name: 'web', image: BUSYBOX_IMAGE, imagePullPolicy: 'Never', command: ['sh', '-c', 'mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www'], ports: [{ containerPort: 8080 }] }],
        },
      },
    },
  }), 'apply', '-f', '-');
  await cp.kubectl('rollout', 'status', '-n', NS, 'deployment/web', '--timeout=300s');
  const web = (await cp.getJson('get', 'pods', '-n', NS, '-l', 'app=web')).items as any[];
  t.is(web.length, replicas);
  t.deepEqual(web.map((p) => p.spec.nodeName), web.map(() => hostNode), 'on the machine\'s node');
  for (const p of web) {
    const ips = p.status.podIPs.map((i: any) => i.ip);
    t.true(v4(ips).startsWith(h4!.replace(/0\/24$/, '')) && v6(ips).startsWith(h6!.replace(/\/64$/, '')), `${p.metadata.name}'s IPs ${ips} are in the machine's podCIDRs`);
  }

  /** A command in the pod (kubectl exec): its output, or what failed. */
  const exec = async (pod: any, ...cmd: string[]) => cp!.kubectl('exec', '-n', NS, pod.metadata.name, '--', ...cmd).then((out) => out.trim(), (e: Error) => `failed: ${e.message}`);
  for (const p of web) {
    const ips: string[] = p.status.podIPs.map((i: any) => i.ip);
    for (const target of netnsPods) {
      for (const [family, pick] of [['IPv4', v4], ['IPv6', v6]] as const) {
        const to = pick(target.ips);
        const from = pick(ips);
        const what = `${p.metadata.name} (${from}) → ${target.node.name}'s pod (${to})`;
        // The first packet may wait for neighbour resolution on three links: a few tries.
        let pinged = false;
        for (let i = 0; i < 3 && !pinged; i++) pinged = !(await exec(p, 'ping', '-c', '1', '-W', '2', to)).startsWith('failed: ');
        t.true(pinged, `ping ${what}`);
        t.is(await exec(p, 'timeout', '5', 'wget', '-q', '-O', '-', url(to, SERVER_PORT)), `from ${from}`, `TCP ${what}, unNATed (${family})`);
        const back = `${target.node.name}'s pod (${to}) → ${p.metadata.name} (${from})`;
        t.true([1, 2, 3].some(() => pingFrom(target.ns, from)), `ping ${back}`);
        t.is(curlFrom(target.ns, from, 8080), p.metadata.name, `TCP ${back} (${family})`);
      }
    }
  }

  // A netns node's Node deleted through the API: its routes leave the host (and node 1).
  await cp.kubectl('delete', 'node', nodeName(n2));
  await eventually(() => !routesIn().some((r) => r.dst === p2v4 || r.dst === p2v6), 'the deleted Node\'s routes gone from the host', 30_000);
  await eventually(() => !routesIn(n1.ns).some((r) => r.dst === p2v4 || r.dst === p2v6), 'the deleted Node\'s routes gone from node 1', 30_000);
  t.true(has(routesIn(), p1v4!, n1.ip4) && has(routesIn(), p1v6!, n1.ip6), 'node 1\'s routes stay on the host');
  t.deepEqual((await hostView()).peers, [[nodeName(n1), n1.ip4, true, '']], 'knit no longer lists the deleted node');
  t.true(curlFrom(netnsPods[0]!.ns, v4(web[0].status.podIPs.map((i: any) => i.ip)), 8080) === web[0].metadata.name, 'node 1\'s pod still reaches the Deployment');
});

// After the test's teardown: the machine as it was.
test.serial.after.always('teardown left the machine as it was: processes, cgroups, sysctls, iptables, nft tables, links, routes', (t) => {
  if (!cp) return t.pass();
  for (const s of [...cp.services, ...(node ? [node.kubelet(), node.containerd] : [])]) t.false(existsSync(`/proc/${s.pid}`), `${s.name} (pid ${s.pid}) still runs`);
  for (const d of daemons) t.false(existsSync(`/proc/${d.child.pid}`), `knit (pid ${d.child.pid}) still runs`);
  t.deepEqual(cgroupPids(`${P}kube`), []);
  t.false(existsSync(`/sys/fs/cgroup/pids/${P}kube`), 'cgroup root removed');
  t.deepEqual(kubeletSysctlsAsFound(), before.sysctls);
  t.deepEqual(forwarding(), before.forwarding, 'forwarding switches as found');
  t.deepEqual(iptablesKube(), before.iptables);
  const tables = JSON.parse(execFileSync('/usr/sbin/nft', ['-j', 'list', 'tables'], { encoding: 'utf8' })).nftables.filter((x: any) => x.table && x.table.name.includes(P));
  t.deepEqual(tables, [], 'no nft table of the test');
  t.deepEqual(hostLinks().filter((l) => mine(l.ifname) || mine(l.ifalias)).map((l) => l.ifname), before.links, 'no link of the test');
  t.deepEqual(hostKnitRoutes(), before.routes, 'no protocol 201 route in the test\'s ranges');
  t.deepEqual(execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' }).split('\n').filter((l) => l.startsWith(P)), [], 'no netns of the test');
  if (process.env.KNIT_KEEP_KUBE_DIR) return;
  if (node) t.false(existsSync(node.dir), `${node.dir} removed`);
  t.false(existsSync(cp.dir), `${cp.dir} removed`);
});
