// A pod reaches itself through its Service on a network that does not mention hairpin: the
// default is on. The Service is what kube-proxy's nftables mode makes of one: a DNAT from a
// virtual IP to the pod, and a masquerade of the flows whose source is the endpoint itself
// (its "mark-for-masquerade"), in a table of the test's own in the daemon's netns. The bridge
// passes its traffic to netfilter by its own switch (the netns-wide sysctls are 0 here), so
// the DNAT happens as the frame crosses the bridge and must go back out the port it came in
// by: only a port in hairpin mode sends it. Observed with `bridge -j link` and a real TCP
// connect; on a network with hairpin: false the same connect times out.
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { startDaemon, cleanupDaemon, podFactory, type Daemon } from '../helpers/daemon.js';
import { traffic } from '../helpers/host-port-traffic.js';
import { uniquePrefix, removeNetns } from '../helpers/names.js';

const P = uniquePrefix('hpsv');
const HOST = `${P}h`;
const OFF = `${P}nohp`;
const TABLE = `${P.replace('-', '_')}svc`; // nft names take no "-"
const PORT = 8080;
const VIP = { on: '10.219.100.1', off: '10.219.100.2' };
const opts = {
  prefix: P,
  subnet: '10.219.1.0/24',
  netns: HOST,
  extraNetworks: [{ name: OFF, mode: 'bridge', bridge: `${P}obr`, hairpin: false, ipv4: { subnet: '10.219.2.0/24' } }],
};
let d: Daemon | undefined;
const { pod, netnsNames, ids } = podFactory(P);
const io = traffic(P);

const inHost = (argv: string[], input?: string) => execFileSync('ip', ['netns', 'exec', HOST, ...argv], { encoding: 'utf8', ...(input !== undefined && { input }) });

/** The Service as kube-proxy (nftables mode) writes it: a VIP DNAT'd to one endpoint, and the
 * endpoint's own flows to it marked and masqueraded (k8s pkg/proxy/nftables/proxier.go). */
function service(vip: string, endpoint: string) {
  inHost(['nft', '-f', '-'], `table ip ${TABLE} {
  chain pre {
    type nat hook prerouting priority dstnat; policy accept;
    ip daddr ${vip} tcp dport 80 ip saddr ${endpoint} meta mark set 0x4000
    ip daddr ${vip} tcp dport 80 dnat to ${endpoint}:${PORT}
  }
  chain post {
    type nat hook postrouting priority srcnat; policy accept;
    meta mark & 0x4000 == 0x4000 masquerade
  }
}
`);
}

/** Hairpin mode of a bridge port as `bridge -j -d link` reports it. */
function hairpin(port: string): boolean {
  const [p] = JSON.parse(inHost(['bridge', '-j', '-d', 'link', 'show', 'dev', port]) || '[]');
  return p?.hairpin === true;
}

async function attach(n: number, network?: string) {
  const p = pod(n);
  const { result } = await d!.call('Attach', {
    sandbox_id: p.id, netns_path: p.path, runtime: 'RUNC', interfaces: [{ name: 'eth0', ...(network && { network }) }],
  });
  await io.serve(p.ns, PORT);
  return { ...p, ip: result.ips[0].address.split('/')[0], port: result.interfaces.find((i: any) => !i.sandbox).name as string, gateway: result.ips[0].gateway as string };
}

test.before(async () => {
  removeNetns(HOST);
  execFileSync('ip', ['netns', 'add', HOST]);
  inHost(['ip', 'link', 'set', 'lo', 'up']);
  // Not relied on: only the bridges' own switches (knit's) hand their traffic to netfilter.
  inHost(['sysctl', '-qw', 'net.bridge.bridge-nf-call-iptables=0', 'net.bridge.bridge-nf-call-ip6tables=0']);
  // As on a Kubernetes node (kube-proxy needs it): a DNAT'd frame is routed before it is bridged.
  inHost(['sysctl', '-qw', 'net.ipv4.ip_forward=1']);
  d = await startDaemon(opts);
});

test.after.always(async () => {
  io.close();
  await cleanupDaemon(d, opts, ids);
  for (const n of netnsNames) removeNetns(n);
  removeNetns(HOST); // the bridges, the Service table and the host ends go with it
});

test.serial('on the default network a pod reaches itself through its Service, and another pod reaches it too', async (t) => {
  const self = await attach(1);
  const other = await attach(2);
  service(VIP.on, self.ip);
  t.teardown(() => inHost(['nft', 'delete', 'table', 'ip', TABLE]));
  t.true(hairpin(self.port), 'bridge link: hairpin on, though the network does not mention it');
  t.is(io.ask(self.ns, 'tcp', VIP.on, 80), `pod saw ${self.gateway}`, 'the pod reached itself, masqueraded to the bridge address');
  t.is(io.ask(other.ns, 'tcp', VIP.on, 80), `pod saw ${other.ip}`, 'another pod on the bridge reaches the Service (the reply is un-DNAT\'d)');
});

test.serial('on a network with hairpin: false the same connect to its own Service times out', async (t) => {
  const self = await attach(3, OFF);
  const other = await attach(4, OFF);
  service(VIP.off, self.ip);
  t.teardown(() => inHost(['nft', 'delete', 'table', 'ip', TABLE]));
  t.false(hairpin(self.port), 'bridge link: hairpin off');
  t.is(io.ask(other.ns, 'tcp', VIP.off, 80), `pod saw ${other.ip}`, 'the Service itself works');
  t.regex(io.ask(self.ns, 'tcp', VIP.off, 80), /^ERR (TimeoutError|timeout)$/, 'the pod cannot reach itself');
});
