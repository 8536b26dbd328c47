// NetworkPolicy across two nodes (docs/network-policy.md): each node a netns with its own knit
// (test/helpers/cluster-fabric.ts), crossNode routes, the policies and every pod given in the
// config's literal lists. Egress is judged on the source's node, ingress on the destination's;
// a pod of another node is a peer by the address the list gives it. Observed with TCP.
import test from 'ava';
import { makeNetns } from '../helpers/names.js';
import { uniquePrefix } from '../helpers/names.js';
import { runcAttachReq } from '../helpers/daemon.js';
import { buildSegment, clusterDaemons, listening, sh, tcpHello, tcpServer } from '../helpers/cluster-fabric.js';

test('two nodes: ingress judged on the destination\'s node, egress on the source\'s, peers on the other node by their addresses', async (t) => {
  t.timeout(180_000);
  const P = uniquePrefix('plx');
  const f = buildSegment(t, P, 248, 2);
  const [n1, n2] = f.nodes;
  for (const n of f.nodes) sh(n.ns, 'sysctl', '-qw', 'net.bridge.bridge-nf-call-iptables=0', 'net.bridge.bridge-nf-call-ip6tables=0');
  const ip = { a: '10.248.1.10', b: '10.248.2.11', c: '10.248.2.10' };
  const literal = {
    namespaces: { x: { labels: { team: 'x' } }, y: { labels: { team: 'y' } } },
    pods: [
      { namespace: 'x', name: 'a', labels: { app: 'a' }, ips: [ip.a], node: 'n1' },
      { namespace: 'x', name: 'b', labels: { app: 'b' }, ips: [ip.b], node: 'n2' },
      { namespace: 'y', name: 'c', labels: { app: 'c' }, ips: [ip.c], node: 'n2' },
    ],
    policies: [
      { metadata: { namespace: 'x', name: 'a-from-y' }, spec: { podSelector: { matchLabels: { app: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'y' } } }], ports: [{ port: 8080 }] }] } },
      { metadata: { namespace: 'y', name: 'c-to-a' }, spec: { podSelector: { matchLabels: { app: 'c' } }, policyTypes: ['Egress'], egress: [{ to: [{ namespaceSelector: {}, podSelector: { matchLabels: { app: 'a' } } }], ports: [{ port: 8080 }] }] } },
    ],
  };
  const net = { name: `${P}net`, mode: 'bridge', bridge: 'cbr0', ipv4: { subnet: 'node' }, crossNode: 'routes' };
  const cd = clusterDaemons(t, f);
  for (const node of f.nodes) await cd.start(node, net, { networkPolicy: { literal } });
  const attach = async (node: typeof n1, ns: string, name: string, addr: string) => {
    const netns = makeNetns(t, P, `${ns}${name}`);
    await cd.daemons.get(node.name)!.call('Attach', runcAttachReq(`${P}${ns}-${name}`, netns.path, { podNamespace: ns, podName: name, extra: { interfaces: [{ name: 'eth0', ips: [`${addr}/24`] }] } }));
    return netns.name;
  };
  const a = await attach(n1, 'x', 'a', ip.a);
  const b = await attach(n2, 'x', 'b', ip.b);
  const c = await attach(n2, 'y', 'c', ip.c);
  for (const [ns, port] of [[a, 8080], [a, 8081], [b, 8080], [c, 8080]] as const) await listening(tcpServer(t, ns, port));

  t.is(tcpHello(c, ip.a, 8080), `from ${ip.c}`, 'y/c (n2) → x/a (n1):8080: its egress allows it on n2, a\'s ingress on n1');
  t.is(tcpHello(b, ip.a, 8080), '', 'x/b (n2) → x/a (n1): denied by a\'s ingress, on n1');
  t.is(tcpHello(c, ip.a, 8081), '', 'y/c → x/a:8081: neither side allows it');
  t.is(tcpHello(c, ip.b, 8080), '', 'y/c → x/b on the same node: denied by c\'s egress');
  t.is(tcpHello(a, ip.c, 8080), `from ${ip.a}`, 'x/a → y/c: nothing isolates that way');
  t.is(tcpHello(b, ip.c, 8080), `from ${ip.b}`, 'x/b → y/c on one node: allowed (c\'s ingress is not isolated)');
  // Each node holds only its own pods in its maps.
  const maps = (ns: string, inst: string) => JSON.parse(sh(ns, '/usr/sbin/nft', '-j', 'list', 'table', 'inet', `knit-${inst}-policy`)).nftables.filter((o: any) => o.map).map((o: any) => [o.map.name, (o.map.elem ?? []).map((e: any) => e[0])]);
  t.deepEqual(Object.fromEntries(maps(n1.ns, `${P}n1`.replace(/-/g, ''))), { in4: [ip.a], in6: [], out4: [], out6: [], local4: [], local6: [] });
  t.deepEqual(Object.fromEntries(maps(n2.ns, `${P}n2`.replace(/-/g, ''))), { in4: [], in6: [], out4: [ip.c], out6: [], local4: [], local6: [] });
});
