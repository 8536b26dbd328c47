// One NetworkPolicy for QEMU guests (TCG) and runc pods, whatever wired the guest: Kata
// (tcfilter: the pod veth's traffic redirected to a tap), KubeVirt's bridge binding (the guest
// on the pod's L2 segment), its tap binding (tc redirects between tap0 and the pod veth) and its
// masquerade binding (the guest behind NAT in the pod netns, judged on the pod IP). Each guest's
// pod is selected by one policy: only namespace y reaches its HTTP port, and it reaches only
// namespace y (and its node, which is always allowed). knit runs in a node netns whose
// bridge-nf-call sysctls are 0 (its bridge's own switch is what sends bridged traffic to the
// policy), with the policy in its config's literal lists; the guest boots on the tap knit made,
// as Kata's shim or virt-launcher would start it. The observers: what a runc-style pod of x and
// one of y get from the guest's httpd (curl), the guest's own pings, and knit's nft counters.
// Kata's macvtap model (the guest on a macvtap of the pod veth, QEMU on its character device)
// and the bridge binding on a routed network (the guest's gateway 169.254.1.1 answered by the
// pod's host end, in a node netns with no default route) too.
// Subnets 10.247.11.0/24, 10.247.13.0/24 - 10.247.15.0/24, 10.247.17.0/24, 10.247.18.0/24; the
// routed node's own address 10.247.19.1.
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { GUEST_HTTP_PORT } from '../fixtures/qemu.js';
import { startDaemon, cleanupDaemon, runcAttachReq, type Daemon } from '../helpers/daemon.js';
import { uniquePrefix, makeNetns } from '../helpers/names.js';
import { sh } from '../helpers/cluster-fabric.js';
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

interface GuestCase {
  title: string;
  tag: string;
  subnet: string;
  runtime: 'KATA' | 'KUBEVIRT';
  binding: Record<string, string>;
  /** The guest takes its address by DHCP from knit, as a KubeVirt guest does; else from the
   * hand-off (Kata's agent delivers it). */
  dhcp: boolean;
  /** The address the guest's httpd names: the pod IP, unless the guest sits behind NAT. */
  guestAddr?: string;
  /** A routed network: no bridge, so the node's address is one of its own (on lo). */
  routed?: boolean;
}

const cases: GuestCase[] = [
  { title: 'a Kata guest (tcfilter)', tag: 'plk', subnet: '10.247.13.0/24', runtime: 'KATA', binding: { mode: 'tcfilter' }, dhcp: false },
  { title: 'a KubeVirt guest (bridge binding)', tag: 'plq', subnet: '10.247.11.0/24', runtime: 'KUBEVIRT', binding: { binding: 'bridge' }, dhcp: false },
  { title: 'a KubeVirt guest (tap binding)', tag: 'plt', subnet: '10.247.14.0/24', runtime: 'KUBEVIRT', binding: { binding: 'tap' }, dhcp: true },
  { title: 'a KubeVirt guest behind masquerade', tag: 'plm', subnet: '10.247.15.0/24', runtime: 'KUBEVIRT', binding: { binding: 'masquerade', ports: `tcp:${GUEST_HTTP_PORT}` }, dhcp: true, guestAddr: '10.0.2.2' },
  { title: 'a Kata guest (macvtap)', tag: 'plmv', subnet: '10.247.17.0/24', runtime: 'KATA', binding: { mode: 'macvtap' }, dhcp: false },
  { title: 'a KubeVirt guest (bridge binding) on a routed network', tag: 'plqr', subnet: '10.247.18.0/24', runtime: 'KUBEVIRT', binding: { binding: 'bridge' }, dhcp: false, routed: true },
];

const ROUTED_NODE_ADDR = '10.247.19.1';

const literal = {
  namespaces: { x: { labels: { team: 'x' } }, y: { labels: { team: 'y' } } },
  pods: [{ namespace: 'x', name: 'vm', labels: { vm: 'guest' } }],
  policies: [{
    metadata: { namespace: 'x', name: 'vm-with-y' },
    spec: {
      podSelector: { matchLabels: { vm: 'guest' } },
      ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'y' } } }], ports: [{ port: GUEST_HTTP_PORT }] }],
      egress: [{ to: [{ namespaceSelector: { matchLabels: { team: 'y' } } }] }],
    },
  }],
};

for (const c of cases) {
  test.serial(`${c.title}, QEMU, selected by a policy: namespace y reaches its httpd and x does not; it pings y and not x; it reaches its node`, async (t) => {
    t.timeout(600_000);
    const P = uniquePrefix(c.tag);
    const node = makeNetns(t, P, 'node').name;
    sh(node, 'sysctl', '-qw', 'net.bridge.bridge-nf-call-iptables=0', 'net.bridge.bridge-nf-call-ip6tables=0');
    sh(node, 'ip', 'link', 'set', 'lo', 'up');
    if (c.routed) sh(node, 'ip', 'addr', 'add', `${ROUTED_NODE_ADDR}/32`, 'dev', 'lo');
    const o = { prefix: P.replace(/-/g, ''), subnet: c.subnet, netns: node, config: { networkPolicy: { literal } }, ...(c.routed && { mode: 'routed' as const }) };
    const nodeAddr = c.routed ? ROUTED_NODE_ADDR : c.subnet.replace(/0\/24$/, '1');
    const d: Daemon = await startDaemon(o);
    t.teardown(() => cleanupDaemon(d, o));
    const table = `knit-${o.prefix}-policy`;
    const counter = (prefix: 'di_' | 'de_') => Object.entries(policyCounters(node, table)).find(([k]) => k.startsWith(prefix))?.[1] ?? 0;
    const attach = async (ns: string, name: string, extra: object = {}) => {
      const n = makeNetns(t, P, name);
      const r = (await d.call('Attach', runcAttachReq(`${P}${name}`, n.path, { podNamespace: ns, podName: name, extra }))).result;
      t.teardown(() => d.call('Detach', { sandbox_id: `${P}${name}` }).then(() => undefined, () => undefined));
      return { ns: n.name, ip: r.ips[0].address.split('/')[0] as string, result: r };
    };
    const x = await attach('x', 'b');
    const y = await attach('y', 'c');
    const vm = await attach('x', 'vm', { runtime: c.runtime, interfaces: [{ name: 'eth0', binding: c.binding }] });
    const { sandboxId, handoff } = vmHandoff(vm.result);
    // Nothing has left the guest yet: every egress drop from here on is one of its pings.
    const deniedOut = counter('de_');
    const started = Date.now();
    // Once configured, the guest pings its node, y/c and x/b, three times each.
    const { guest } = await launchVm({ sandboxId, ifname: 'eth0', handoff, by: handoff.device === 'macvtap' ? 'chardev' : 'name', name: `${P}g`.replace(/-/g, ''), ping: [nodeAddr, y.ip, x.ip], dhcp: c.dhcp });
    t.teardown(() => guest.stop());
    await guest.waitFor(/KNIT-READY/, 300_000);
    t.log(`launch to KNIT-READY: ${Date.now() - started} ms`);
    t.notRegex(guest.serial(), /KNIT-ERROR|KNIT-DHCP-FAIL/);

    // Ingress, judged on the pod IP whoever holds it.
    t.is(httpFrom(y.ns, vm.ip), `knit-guest ${c.guestAddr ?? vm.ip}`, 'y/c reaches the guest\'s httpd');
    const deniedIn = counter('di_');
    t.is(httpFrom(x.ns, vm.ip), '', 'x/b does not');
    t.true(counter('di_') > deniedIn, 'knit\'s ingress drop counted x/b\'s attempt');

    // Egress: what the guest's own pings got.
    const pinged = async (addr: string) => ((await guest.waitFor(new RegExp(`KNIT-PING-(OK|FAIL) ${addr.replace(/\./g, '\\.')}\\b`))) as RegExpMatchArray)[1];
    t.is(await pinged(nodeAddr), 'OK', `the guest reaches its node at ${nodeAddr}`);
    t.is(await pinged(y.ip), 'OK', 'the guest reaches y/c');
    t.is(await pinged(x.ip), 'FAIL', 'not x/b');
    t.true(counter('de_') >= deniedOut + 3, 'knit\'s egress drop counted each of its 3 pings to x/b');
  });
}
