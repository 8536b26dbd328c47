// bridgeNetfilter: knit turns on the per-bridge br_netfilter switches (nf_call_iptables,
// nf_call_ip6tables) of the bridges it makes, so traffic between two pods on one bridge passes
// the inet forward hook (kube-proxy's Services, NetworkPolicy), and leaves the netns-wide
// net.bridge.bridge-nf-call-* sysctls alone. The daemon runs in a netns of its own whose sysctls
// the test sets to 0 (they are per netns), so only the per-bridge switch can let traffic through
// the hooks. Observed with `ip -j -d link`, a real nft rule in the forward hook that counts and
// drops the pods' traffic, and ping.
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { startDaemon, cleanupDaemon, ipJson, pingFrom, podFactory, eventually, type Daemon } from '../helpers/daemon.js';
import { uniquePrefix, removeNetns } from '../helpers/names.js';

const P = uniquePrefix('brnf');
const HOST = `${P}h`; // the daemon's "host" netns
const OFF = `${P}off`; // a network with bridgeNetfilter false
const OFF_BRIDGE = `${P}obr`;
const TABLE = `${P.replace("-", "_")}t`; // nft names take no "-"
const opts = {
  prefix: P,
  subnet: '10.218.1.0/24',
  subnet6: 'fd6b:6e69:74e1::/64',
  netns: HOST,
  extraNetworks: [{ name: OFF, mode: 'bridge', bridge: OFF_BRIDGE, bridgeNetfilter: false, ipv4: { subnet: '10.218.2.0/24' }, ipv6: { subnet: 'fd6b:6e69:74e2::/64' } }],
};
let d: Daemon | undefined;
const { pod, netnsNames, ids } = podFactory(P);

const inHost = (argv: string[], input?: string) => execFileSync('ip', ['netns', 'exec', HOST, ...argv], { encoding: 'utf8', ...(input !== undefined && { input }) });
const sysctl = (key: string) => inHost(['sysctl', '-n', key]).trim();

/** The bridge's switches as `ip -j -d link` reports them (1 or 0). */
function bridgeSwitches(bridge: string): { v4: number; v6: number } {
  const [link] = ipJson(['link', 'show', 'dev', bridge], HOST);
  const data = link.linkinfo.info_data;
  return { v4: data.nf_call_iptables, v6: data.nf_call_ip6tables };
}

/** An inet table whose forward chain counts and drops traffic from a to b (both families). */
function dropBetween(a: { v4: string; v6: string }, b: { v4: string; v6: string }) {
  inHost(['nft', '-f', '-'], `table inet ${TABLE} {
  chain pods {
    type filter hook forward priority 0; policy accept;
    ip saddr ${a.v4} ip daddr ${b.v4} counter drop
    ip6 saddr ${a.v6} ip6 daddr ${b.v6} counter drop
  }
}
`);
}
function dropCounts(): number[] {
  const out = JSON.parse(inHost(['nft', '-j', 'list', 'table', 'inet', TABLE]));
  return out.nftables.filter((x: any) => x.rule).map((x: any) => x.rule.expr.find((e: any) => e.counter).counter.packets);
}
const removeTable = () => {
  // `table` first makes it if it is not there, so the delete never fails (nft 1.0.6 has no destroy).
  inHost(['nft', '-f', '-'], `table inet ${TABLE}\ndelete table inet ${TABLE}\n`);
};

async function twoPods(network: string, first: number) {
  const out = [];
  for (const n of [first, first + 1]) {
    const p = pod(n);
    const { result } = await d!.call('Attach', {
      sandbox_id: p.id, netns_path: p.path, runtime: 'RUNC', interfaces: [{ name: 'eth0', network }],
    });
    const addr = (v6: boolean) => result.ips.find((x: any) => x.address.includes(':') === v6).address.split('/')[0];
    out.push({ ...p, v4: addr(false), v6: addr(true) });
  }
  return out;
}

const pingable = (from: string, to: string) => eventually(() => pingFrom(from, to), `ping ${to} from ${from}`, 8000).then(() => true, () => false);

test.before(async () => {
  removeNetns(HOST);
  execFileSync('ip', ['netns', 'add', HOST]);
  inHost(['ip', 'link', 'set', 'lo', 'up']);
  // Off for the whole netns: what happens below is the per-bridge switch's doing alone.
  inHost(['sysctl', '-qw', 'net.bridge.bridge-nf-call-iptables=0', 'net.bridge.bridge-nf-call-ip6tables=0']);
  d = await startDaemon(opts);
});

test.after.always(async () => {
  await cleanupDaemon(d, opts, ids);
  for (const n of netnsNames) removeNetns(n);
  removeNetns(HOST); // the bridges, the table and the host ends go with it
});

test.serial('a bridge knit makes passes bridged IPv4 and IPv6 to the forward hook; the netns-wide sysctls stay 0', async (t) => {
  t.deepEqual(bridgeSwitches(`${P}br`), { v4: 1, v6: 1 }, 'ip -d link: nf_call_iptables 1, nf_call_ip6tables 1');
  t.is(sysctl('net.bridge.bridge-nf-call-iptables'), '0', 'the netns-wide switch is not knit\'s');
  t.is(sysctl('net.bridge.bridge-nf-call-ip6tables'), '0');
  const [a, b] = await twoPods(`${P}net`, 1);
  t.true(await pingable(a.ns, b.v4), 'pod → pod over IPv4 before the rule');
  t.true(await pingable(a.ns, b.v6), 'pod → pod over IPv6 before the rule');
  dropBetween(a, b);
  t.teardown(removeTable);
  t.false(pingFrom(a.ns, b.v4), 'the forward hook drops bridged IPv4');
  t.false(pingFrom(a.ns, b.v6), 'the forward hook drops bridged IPv6');
  const [v4, v6] = dropCounts();
  t.true(v4 > 0 && v6 > 0, `the rule saw both families (${v4}, ${v6} packets)`);
  removeTable();
  t.true(pingFrom(a.ns, b.v4), 'without the rule the pods talk again');
  t.deepEqual((await d!.call('Check', { sandbox_id: a.id })).differences, []);
});

test.serial('bridgeNetfilter false leaves both switches off: the forward hook never sees the pods', async (t) => {
  t.deepEqual(bridgeSwitches(OFF_BRIDGE), { v4: 0, v6: 0 });
  const [a, b] = await twoPods(OFF, 3);
  dropBetween(a, b);
  t.teardown(removeTable);
  t.true(await pingable(a.ns, b.v4), 'bridged IPv4 bypasses the rule');
  t.true(await pingable(a.ns, b.v6), 'bridged IPv6 bypasses the rule');
  t.deepEqual(dropCounts(), [0, 0], 'the rule saw nothing');
});

test.serial('a switch turned off by hand is a difference knit check names; the next start turns it back on', async (t) => {
  const id = ids[0];
  inHost(['ip', 'link', 'set', `${P}br`, 'type', 'bridge', 'nf_call_iptables', '0']);
  const report = await d!.call('Check', { sandbox_id: id });
  t.false(report.ok);
  t.deepEqual(report.differences, [`bridge ${P}br has nf_call_iptables off; network ${P}net has bridgeNetfilter true`]);
  await d!.stop();
  d = await d!.restart();
  t.deepEqual(bridgeSwitches(`${P}br`), { v4: 1, v6: 1 }, 'the bridge knit found at start-up');
  t.true((await d!.call('Check', { sandbox_id: id })).ok);
});

test.serial('a reload that sets bridgeNetfilter false turns both switches off on the running bridge', async (t) => {
  const config = JSON.parse(readFileSync(d!.configPath, 'utf8'));
  config.networks[0].bridgeNetfilter = false;
  writeFileSync(d!.configPath, JSON.stringify(config, null, 2));
  t.teardown(() => {
    delete config.networks[0].bridgeNetfilter;
    writeFileSync(d!.configPath, JSON.stringify(config, null, 2));
  });
  await eventually(() => bridgeSwitches(`${P}br`).v4 === 0 && bridgeSwitches(`${P}br`).v6 === 0, 'the switches off after the reload');
  t.pass();
  t.true((await d!.call('Check', { sandbox_id: ids[0] })).ok, 'the record agrees with the new config');
});
