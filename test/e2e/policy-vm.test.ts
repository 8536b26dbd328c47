// One NetworkPolicy for a QEMU guest (TCG) and runc pods: a KubeVirt pod with bridge binding,
// whose guest owns the pod IP, selected by a policy that lets only namespace y reach its HTTP
// port. knit runs with the policy in its config's literal lists; the guest boots on tap0 as
// virt-launcher would start it. What reaches the guest's httpd, from which pod, is the observer,
// with knit's nft counters.
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { GUEST_HTTP_PORT } from '../fixtures/qemu.js';
import { startDaemon, cleanupDaemon, runcAttachReq, type Daemon } from '../helpers/daemon.js';
import { uniquePrefix, makeNetns } from '../helpers/names.js';
import { launchVm, vmHandoff } from '../helpers/vm-launcher.js';
import { policyCounters } from '../helpers/policy-traffic.js';

/** HTTP GET from a pod's netns: the body, or '' when nothing answers. */
function httpFrom(ns: string, addr: string): string {
  try {
    return execFileSync('ip', ['netns', 'exec', ns, 'curl', '-s', '-m', '3', `http://${addr}:${GUEST_HTTP_PORT}/`], { encoding: 'utf8' }).trim();
  } catch {
    return '';
  }
}

test('a KubeVirt guest (bridge binding, QEMU) selected by a policy: namespace y reaches its httpd, a pod of x does not, and it reaches its gateway', async (t) => {
  t.timeout(300_000);
  const P = uniquePrefix('plq');
  const literal = {
    namespaces: { x: { labels: { team: 'x' } }, y: { labels: { team: 'y' } } },
    pods: [{ namespace: 'x', name: 'vm', labels: { kubevirt: 'vm' } }],
    policies: [{ metadata: { namespace: 'x', name: 'vm-from-y' }, spec: { podSelector: { matchLabels: { kubevirt: 'vm' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'y' } } }], ports: [{ port: GUEST_HTTP_PORT }] }] } }],
  };
  const o = { prefix: P.replace(/-/g, ''), subnet: '10.247.11.0/24', config: { networkPolicy: { literal } } };
  const d: Daemon = await startDaemon(o);
  t.teardown(() => cleanupDaemon(d, o, [`${P}vm`, `${P}b`, `${P}c`]));
  const table = `knit-${o.prefix}-policy`;
  const pod = async (ns: string, name: string) => {
    const n = makeNetns(t, P, name);
    const r = (await d.call('Attach', runcAttachReq(`${P}${name}`, n.path, { podNamespace: ns, podName: name }))).result;
    t.teardown(() => d.call('Detach', { sandbox_id: `${P}${name}` }).then(() => undefined, () => undefined));
    return { ns: n.name, ip: r.ips[0].address.split('/')[0] as string };
  };
  const b = await pod('x', 'b');
  const c = await pod('y', 'c');
  const vmNs = makeNetns(t, P, 'vm');
  const res = (await d.call('Attach', runcAttachReq(`${P}vm`, vmNs.path, { podNamespace: 'x', podName: 'vm', extra: { runtime: 'KUBEVIRT', interfaces: [{ name: 'eth0', binding: { binding: 'bridge' } }] } }))).result;
  t.teardown(() => d.call('Detach', { sandbox_id: `${P}vm` }).then(() => undefined, () => undefined));
  const podIp = res.ips[0].address.split('/')[0];
  const { sandboxId, handoff: h } = vmHandoff(res);
  const { guest } = await launchVm({ sandboxId, ifname: 'eth0', handoff: h, by: 'name', name: `${P}g`.replace(/-/g, ''), ping: ['10.247.11.1'] });
  t.teardown(() => guest.stop());
  await guest.waitFor(/KNIT-READY/);

  t.is(httpFrom(c.ns, podIp), `knit-guest ${podIp}`, 'y/c reaches the guest\'s httpd');
  const before = Object.entries(policyCounters(undefined, table)).find(([k]) => k.startsWith('di_'))?.[1] ?? 0;
  t.is(httpFrom(b.ns, podIp), '', 'x/b does not');
  const after = Object.entries(policyCounters(undefined, table)).find(([k]) => k.startsWith('di_'))![1];
  t.true(after > before, 'knit\'s ingress drop counted x/b\'s attempt');
  const [, verdict] = (await guest.waitFor(/KNIT-PING-(OK|FAIL) /)) as RegExpMatchArray;
  t.is(verdict, 'OK', 'the guest reaches its gateway (egress is not isolated)');
});
