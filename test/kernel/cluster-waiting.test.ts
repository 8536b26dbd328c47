// A network that takes the node's subnet serves before it knows it: NodeStatus, /readyz and an
// Attach say what it waits for, and it becomes usable when the node list (here a config reload
// of cluster.nodes) gives the node its podCIDR. With no way to the API at all (no kubeconfig, no
// ServiceAccount), knit still starts and says so.
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { uniquePrefix, makeNetns } from '../helpers/names.js';
import { cleanupDaemon, eventually, freePort, runcAttachReq, startDaemon, type Daemon } from '../helpers/daemon.js';

test('waiting for the node\'s podCIDR: not ready, naming the node and field; ready once the list has it', async (t) => {
  const P = uniquePrefix('clw');
  const ns = makeNetns(t, P, 'node');
  execFileSync('ip', ['-n', ns.name, 'link', 'set', 'lo', 'up']);
  const port = await freePort();
  let d: Daemon | undefined;
  t.teardown(() => cleanupDaemon(d, { prefix: P.replace(/-/g, '') }));
  d = await startDaemon({
    prefix: P.replace(/-/g, ''), subnet: '10.0.0.0/24', netns: ns.name,
    config: {
      metricsAddress: `127.0.0.1:${port}`,
      cluster: { nodeName: 'w1', nodes: { w1: { podCIDRs: [], internalIPs: ['192.0.2.1'] } } },
      networks: [{ name: 'pods', mode: 'routed', ipv4: { subnet: 'node' }, crossNode: 'routes' }],
    },
  });
  const s = await d.call('NodeStatus', {});
  t.false(s.ready);
  t.regex(s.message, /network pods: waiting for its subnet: Node "w1" has no IPv4 entry in spec\.podCIDRs \(it has \[\]\)/);
  const pod = makeNetns(t, P, 'pod');
  const err = await t.throwsAsync(d.call('Attach', runcAttachReq(`${P}sb`, pod.path)));
  t.is((err as any).code, 14, 'UNAVAILABLE: try again later');
  t.regex(err!.message, /network pods is not ready: waiting for its subnet/);
  const readyz = () => execIn(ns.name, `require('http').get('http://127.0.0.1:${port}/readyz',(r)=>{let b='';r.on('data',(d)=>b+=d);r.on('end',()=>console.log(r.statusCode+' '+b))})`);
  t.regex(readyz(), /^503 not ready: .*Node "w1" has no IPv4 entry/);

  const cfg = JSON.parse(readFileSync(d.configPath, 'utf8'));
  cfg.cluster.nodes.w1.podCIDRs = ['10.77.1.0/24'];
  writeFileSync(d.configPath, JSON.stringify(cfg));
  await eventually(() => /^200/.test(readyz()), 'ready once the node has its podCIDR', 10_000);
  const r = (await d.call('Attach', runcAttachReq(`${P}sb`, pod.path))).result;
  t.is(r.ips[0].address, '10.77.1.2/32');

  // The podCIDR changes under the pod: kept, and reported; once the pod is gone, moved.
  cfg.cluster.nodes.w1.podCIDRs = ['10.77.2.0/24'];
  writeFileSync(d.configPath, JSON.stringify(cfg));
  await eventually(() => /^503 .*changed its IPv4 entry from 10\.77\.1\.0\/24 to 10\.77\.2\.0\/24 while pods hold addresses/.test(readyz()), 'the change reported', 10_000);
  t.regex(execIn(ns.name, `require('http').get('http://127.0.0.1:${port}/metrics',(r)=>{let b='';r.on('data',(d)=>b+=d);r.on('end',()=>console.log(b))})`), /^knit_cluster_subnet_conflicts 1$/m);
  t.truthy(ipJsonIn(ns.name, ['route', 'show', '10.77.1.2']).length, 'the pod keeps its address and route');
  await d.call('Detach', { sandbox_id: `${P}sb` });
  await eventually(() => /^200/.test(readyz()), 'moved once the pod is gone', 10_000);
  const pod2 = makeNetns(t, P, 'pod2');
  t.is((await d.call('Attach', runcAttachReq(`${P}sb2`, pod2.path))).result.ips[0].address, '10.77.2.2/32');
  t.truthy(ipJsonIn(ns.name, ['route', 'show', 'proto', '201']).find((x: any) => x.dst === '10.77.2.0/24' && x.type === 'blackhole'), 'the new block announced');
  t.falsy(ipJsonIn(ns.name, ['route', 'show', 'proto', '201']).find((x: any) => x.dst === '10.77.1.0/24'), 'the old one gone');
});

test('no kubeconfig and no ServiceAccount: knit serves, its cluster network not ready, saying why', async (t) => {
  const P = uniquePrefix('cln');
  const ns = makeNetns(t, P, 'node');
  let d: Daemon | undefined;
  t.teardown(() => cleanupDaemon(d, { prefix: P.replace(/-/g, '') }));
  d = await startDaemon({
    prefix: P.replace(/-/g, ''), subnet: '10.0.0.0/24', netns: ns.name,
    config: { cluster: { nodeName: 'w1' }, networks: [{ name: 'pods', mode: 'bridge', bridge: `${P.replace(/-/g, '')}b`, ipv4: { subnet: 'node' }, crossNode: 'routes' }] },
  }, { KUBECONFIG: '', KUBERNETES_SERVICE_HOST: '' });
  const s = await d.call('NodeStatus', {});
  t.false(s.ready);
  t.is(s.cluster.state, 'unreachable');
  t.regex(s.message, /Node "w1" is not in the Kubernetes API \(unreachable: .*in-cluster/);
});

const ipJsonIn = (ns: string, args: string[]) => JSON.parse(execFileSync('ip', ['-n', ns, '-j', ...args], { encoding: 'utf8' }) || '[]');

function execIn(ns: string, code: string): string {
  return execFileSync('ip', ['netns', 'exec', ns, process.execPath, '-e', code], { encoding: 'utf8' }).trim();
}
