// One NetworkPolicy whatever the runtime wired: a Kata pod (tcfilter: eth0's ingress redirected
// to a tap) and a KubeVirt pod (masquerade: the pod netns NATs to the guest), both selected by
// the policy that allows only namespace y, on one bridge with runc pods, with the netns-wide
// bridge-nf-call sysctls at 0. No guest runs: tcpdump on each pod's eth0 (a packet socket sees
// frames before tc takes them) shows what arrives; knit's nft counters show what it dropped.
import test from 'ava';
import { spawn } from 'node:child_process';
import { startDaemon, cleanupDaemon, eventually, runcAttachReq, ipJson, type Daemon } from '../helpers/daemon.js';
import { uniquePrefix, makeNetns } from '../helpers/names.js';
import { sh } from '../helpers/cluster-fabric.js';
import { udpFlood, policyCounters } from '../helpers/policy-traffic.js';

test('Kata tcfilter and KubeVirt masquerade pods: the allowed namespace reaches their eth0, the denied pod\'s flood never does', async (t) => {
  t.timeout(180_000);
  const P = uniquePrefix('plv');
  const node = makeNetns(t, P, 'node').name;
  sh(node, 'sysctl', '-qw', 'net.bridge.bridge-nf-call-iptables=0', 'net.bridge.bridge-nf-call-ip6tables=0');
  sh(node, 'ip', 'link', 'set', 'lo', 'up');
  const literal = {
    namespaces: { x: { labels: { team: 'x' } }, y: { labels: { team: 'y' } } },
    pods: [{ namespace: 'x', name: 'kata', labels: { vm: 'yes' } }, { namespace: 'x', name: 'kv', labels: { vm: 'yes' } }, { namespace: 'x', name: 'b', labels: {} }, { namespace: 'y', name: 'c', labels: {} }],
    policies: [{ metadata: { namespace: 'x', name: 'vms-from-y' }, spec: { podSelector: { matchLabels: { vm: 'yes' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'y' } } }], ports: [{ port: 9000, protocol: 'UDP' }] }] } }],
  };
  const o = { prefix: P.replace(/-/g, ''), subnet: '10.247.7.0/24', netns: node, config: { networkPolicy: { literal } } };
  const d: Daemon = await startDaemon(o);
  t.teardown(() => cleanupDaemon(d, o));
  const table = `knit-${o.prefix}-policy`;
  const attach = async (ns: string, name: string, extra: object = {}) => {
    const netns = makeNetns(t, P, `${ns}${name}`);
    const r = (await d.call('Attach', runcAttachReq(`${P}${ns}-${name}`, netns.path, { podNamespace: ns, podName: name, extra }))).result;
    return { ns: netns.name, ip: r.ips[0].address.split('/')[0] as string };
  };
  const b = await attach('x', 'b');
  const c = await attach('y', 'c');
  const vms = {
    kata: await attach('x', 'kata', { runtime: 'KATA', interfaces: [{ name: 'eth0', binding: { mode: 'tcfilter' } }] }),
    kubevirt: await attach('x', 'kv', { runtime: 'KUBEVIRT', interfaces: [{ name: 'eth0', binding: { binding: 'masquerade' } }] }),
  };
  for (const [runtime, vm] of Object.entries(vms)) {
    // No guest answers ARP for a Kata pod's address: the senders know its MAC, as they would.
    const mac = ipJson(['link', 'show', 'eth0'], vm.ns)[0].address;
    for (const p of [b, c]) sh(p.ns, 'ip', 'neigh', 'replace', vm.ip, 'lladdr', mac, 'dev', 'eth0', 'nud', 'permanent');
    // What arrives at the pod's eth0, before tc or the pod's own NAT see it.
    const dump = spawn('ip', ['netns', 'exec', vm.ns, 'tcpdump', '-l', '-n', '-i', 'eth0', 'udp dst port 9000'], { stdio: ['ignore', 'pipe', 'pipe'] });
    t.teardown(() => void dump.kill('SIGKILL'));
    let seen = '';
    dump.stdout.on('data', (x) => (seen += x));
    const from = (ip: string) => seen.split('\n').filter((l) => l.includes(` IP ${ip}.`)).length;
    await new Promise<void>((resolve) => dump.stderr.on('data', (x) => String(x).includes('listening on') && resolve())); // its socket is open
    // The denied pod floods until knit's drop counter has counted its packets, then the
    // allowed one until its packets are seen at the pod's eth0.
    const denied = () => policyCounters(node, table)[Object.keys(policyCounters(node, table)).find((k) => k.startsWith('di_'))!] ?? 0;
    const before = denied();
    const fromB = udpFlood(b.ns, vm.ip, 9000);
    await eventually(() => denied() > before + 50, `knit dropping x/b's flood to the ${runtime} pod`, 60_000);
    await fromB.stop();
    const fromC = udpFlood(c.ns, vm.ip, 9000);
    await eventually(() => from(c.ip) > 50, `y/c's datagrams at the ${runtime} pod's eth0`, 60_000);
    await fromC.stop();
    t.is(from(b.ip), 0, `${runtime}: not one of x/b's datagrams reached eth0`);
    t.true(from(c.ip) > 50, `${runtime}: y/c's did`);
    dump.kill('SIGKILL');
  }
});
