// Host ports on knit's own networks, with real traffic through a real daemon: a client in a
// netns wired to the node ("another machine"), the node itself (its address and 127.0.0.1) and
// the pod itself (hairpin) reach a TCP and UDP server in the pod over IPv4 and IPv6; the
// answer says which source the pod saw, so masquerade is seen only where it is needed. Then
// conflicts, and detach leaves nothing in `nft -j list ruleset` or conntrack.
import test, { type ExecutionContext } from 'ava';
import * as grpc from '@grpc/grpc-js';
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { startDaemon, cleanupDaemon, podFactory, runcAttachReq, CLI, type Daemon } from '../helpers/daemon.js';
import { forward, remoteClient, traffic, type RemoteClient } from '../helpers/host-port-traffic.js';

const HP = 18080;
const CP = 8080;
const mappings = [
  { protocol: 'TCP', container_port: CP, host_port: HP },
  { protocol: 'UDP', container_port: CP, host_port: HP },
  { protocol: 'SCTP', container_port: 8081, host_port: HP + 1 },
];

const ruleset = () => JSON.parse(execFileSync('/usr/sbin/nft', ['-j', 'list', 'ruleset'], { encoding: 'utf8' })).nftables as any[];
const tablesOf = (instance: string) => ruleset().filter((x) => x.table?.name.startsWith(`hostports-${instance}-`)).map((x) => x.table.name as string);
const conntrackOf = (port: number) =>
  ['ipv4', 'ipv6'].flatMap((f) =>
    ['tcp', 'udp', 'sctp'].flatMap((p) =>
      execFileSync('conntrack', ['-L', '-f', f, '-p', p, '--orig-port-dst', String(port)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).split('\n').filter(Boolean),
    ),
  );
/** The entry the test inserts, should a failed run have left it. */
const dropStale = (remote: RemoteClient) =>
  spawnSync('conntrack', ['-D', '-p', 'udp', '-s', remote.client4, '--orig-port-dst', String(HP)], { stdio: 'ignore' });
const localnet = (dev: string) => readFileSync(`/proc/sys/net/ipv4/conf/${dev}/route_localnet`, 'utf8').trim();

interface Scenario { mode: 'bridge' | 'routed'; prefix: string; subnet: string; subnet6: string; net4: string; net6: string; network?: Record<string, unknown> }

const scenarios: Scenario[] = [
  // hairpin: false, so the pod's own port gets hairpin from its host ports alone (a network's
  // default, hairpin on, gives every port hairpin: test/kernel/hairpin-service.test.ts).
  { mode: 'bridge', prefix: 'hhpb', subnet: '10.181.1.0/24', subnet6: 'fd00:181:1::/64', net4: '10.181.9', net6: 'fd00:181:9::', network: { hairpin: false } },
  { mode: 'routed', prefix: 'hhpr', subnet: '10.181.2.0/24', subnet6: 'fd00:181:2::/64', net4: '10.181.10', net6: 'fd00:181:10::' },
];

for (const s of scenarios) {
  test.serial(`${s.mode}: host ports reach the pod from another machine, the node, 127.0.0.1 and the pod itself; conflicts are refused; detach leaves nothing`, async (t) => {
    const opts = { prefix: s.prefix, subnet: s.subnet, subnet6: s.subnet6, mode: s.mode, ...(s.network && { network: s.network }) };
    const { pod, ids, removeAll } = podFactory(s.prefix);
    const io = traffic(s.prefix);
    let d: Daemon | undefined;
    let remote: RemoteClient | undefined;
    try {
      d = await startDaemon(opts);
      remote = remoteClient(s.prefix, s.net4, s.net6);
      if (s.mode === 'bridge') forward(d.bridge); // the pods' answers to another machine leave by the bridge
      await scenario(t, s, d, remote, pod, io).catch((e) => { console.error(d?.logs.slice(-8).join("\n")); throw e; });
    } finally {
      io.close();
      if (remote) dropStale(remote);
      await cleanupDaemon(d, opts, ids);
      remote?.remove();
      removeAll();
      for (const table of tablesOf(`knit-${s.prefix}`)) execFileSync('/usr/sbin/nft', ['delete', 'table', 'inet', table]);
    }
  });
}

async function scenario(t: ExecutionContext, s: Scenario, d: Daemon, remote: RemoteClient, pod: ReturnType<typeof podFactory>['pod'], io: ReturnType<typeof traffic>) {
  const p = pod(1);
  const instance = `knit-${s.prefix}`;
  // A UDP flow to the host port tracked before the mapping exists must not outlive it (made
  // with conntrack -I: the host netns tracks nothing until some rule needs conntrack).
  dropStale(remote);
  execFileSync('conntrack', ['-I', '-p', 'udp', '-s', remote.client4, '-d', remote.node4, '--sport', '40000', '--dport', String(HP), '--timeout', '120'], { stdio: 'ignore' });
  t.true(conntrackOf(HP).some((l) => l.includes(`src=${remote.client4}`)), 'a stale UDP entry before the attach');

  // One more, published on one host address only.
  const onNode4 = { protocol: 'TCP', container_port: CP, host_port: HP + 2, host_ip: remote.node4 };
  const req = runcAttachReq(p.id, p.path, { extra: { port_mappings: [...mappings, onNode4] } });
  const plan = await d.call('Plan', { attach: req });
  t.true(plan.steps.some((x: any) => /nft table inet hostports-/.test(x.description)), 'knit plan shows the host-port table');
  // The same from the command line: `knit plan --port`, then `knit attach --port` (below, the second pod).
  const cliPlan = execFileSync(process.execPath, [CLI, 'plan', '--socket', d.socket, '--id', p.id, '--netns', p.path, '--port', `${HP}:${CP}/udp`], { encoding: 'utf8' });
  t.regex(cliPlan, /nft table inet hostports-\S+: host ports udp\/18080→8080/);
  t.regex(cliPlan, /route_localnet on \S+ \(127\.0\.0\.1 host ports\)/);
  const { result } = await d.call('Attach', req);
  const pod4 = result.ips.find((x: any) => !x.address.includes(':')).address.split('/')[0];
  const pod6 = result.ips.find((x: any) => x.address.includes(':')).address.split('/')[0];
  t.deepEqual(conntrackOf(HP).filter((l) => l.startsWith('udp')), [], 'the stale UDP entry was flushed');
  await io.serve(p.ns, CP);

  const [table] = tablesOf(instance);
  t.truthy(table, 'a host-port table of this daemon');
  const rules = ruleset().filter((x) => x.rule?.table === table).map((x) => JSON.stringify(x.rule.expr));
  t.true(rules.some((r) => r.includes('"sctp"') && r.includes(`${HP + 1}`) && r.includes(pod4) && r.includes('8081')), 'SCTP is DNAT\'d too (nft rule)');
  t.true(rules.some((r) => r.includes('"udp"') && r.includes(pod6)), 'UDP over IPv6 DNAT rule');
  t.deepEqual((await d.call('Check', { sandbox_id: p.id })).differences ?? [], [], 'knit check: nothing differs');

  const saw = (addr: string) => `pod saw ${addr}`;
  for (const proto of ['tcp', 'udp'] as const) {
    // Another machine: its own source address arrives (no masquerade).
    t.is(io.ask(remote.ns, proto, remote.node4, HP), saw(remote.client4), `${proto} v4 from another machine`);
    t.is(io.ask(remote.ns, proto, remote.node6, HP), saw(remote.client6), `${proto} v6 from another machine`);
    // The node itself, to one of its addresses: its own address, no masquerade either.
    t.is(io.ask(undefined, proto, remote.node4, HP), saw(remote.node4), `${proto} v4 from the node`);
    t.is(io.ask(undefined, proto, remote.node6, HP), saw(remote.node6), `${proto} v6 from the node`);
    // 127.0.0.1: masqueraded (a 127/8 source cannot leave the host).
    t.regex(io.ask(undefined, proto, '127.0.0.1', HP), /^pod saw (?!127\.)\d+\.\d+\.\d+\.\d+$/, `${proto} from 127.0.0.1`);
    // Hairpin: the pod to its own host port, masqueraded (else it would answer itself).
    t.regex(io.ask(p.ns, proto, remote.node4, HP), new RegExp(`^pod saw (?!${pod4.replace(/\./g, '\\.')}$)`), `${proto} v4 hairpin`);
    t.regex(io.ask(p.ns, proto, remote.node6, HP), new RegExp(`^pod saw (?!${pod6}$)[0-9a-f:]+$`), `${proto} v6 hairpin`);
  }
  t.regex(io.ask(undefined, 'tcp', '::1', HP), /^ERR/, 'IPv6 ::1 is not published (Linux never routes ::1 off the host)');
  t.is(io.ask(remote.ns, 'tcp', remote.node4, HP + 2), saw(remote.client4), 'host_ip: published on that address');
  t.regex(io.ask(undefined, 'tcp', '127.0.0.1', HP + 2), /^ERR/, 'host_ip: not on 127.0.0.1');
  t.regex(io.ask(remote.ns, 'tcp', remote.node6, HP + 2), /^ERR/, 'host_ip: not on the other family');
  const dev = s.mode === 'bridge' ? d.bridge : result.interfaces.find((i: any) => !i.sandbox).name;
  t.is(localnet(dev), '1', `route_localnet on ${dev}`);

  // Conflicts: the same protocol and port on an overlapping address, refused naming the holder.
  const q = pod(2);
  for (const taken of [{ protocol: 'TCP', container_port: 80, host_port: HP }, { protocol: 'UDP', container_port: 80, host_port: HP, host_ip: remote.node4 }]) {
    const err = (await t.throwsAsync(d.call('Attach', runcAttachReq(q.id, q.path, { extra: { port_mappings: [{ protocol: 'TCP', container_port: 81 }, taken] } })))) as unknown as grpc.ServiceError;
    t.is(err.code, grpc.status.ALREADY_EXISTS, err.details);
    t.is(err.metadata.get('knit-field')[0], 'port_mappings[1]');
    t.regex(err.details, new RegExp(`held by sandbox ${p.id}`));
  }
  // Another port, and the same port for another protocol, are free; a second table.
  execFileSync(process.execPath, [CLI, 'attach', '--socket', d.socket, '--id', q.id, '--netns', q.path, '--port', `${HP}:80/sctp`], { stdio: 'ignore' });
  t.is(tablesOf(instance).length, 2);
  // Removed behind knit's back: knit check says so, and Detach still finishes.
  const [qTable] = tablesOf(instance).filter((x) => x !== table);
  execFileSync('/usr/sbin/nft', ['delete', 'table', 'inet', qTable]);
  t.deepEqual((await d.call('Check', { sandbox_id: q.id })).differences, [`nft table inet ${qTable} (host ports) is missing on the host`]);
  await d.call('Detach', { sandbox_id: q.id });
  if (s.mode === 'bridge') t.is(localnet(dev), '1', 'route_localnet stays while another sandbox needs it');

  await d.call('Detach', { sandbox_id: p.id });
  t.deepEqual(tablesOf(instance), [], 'nft -j list ruleset: no host-port table left');
  t.false(JSON.stringify(ruleset()).includes(pod4), 'nothing in the ruleset names the pod');
  t.deepEqual(conntrackOf(HP).filter((l) => l.includes(pod4) || l.includes(pod6)), [], 'no conntrack entry to the pod');
  if (s.mode === 'bridge') t.is(localnet(dev), '0', 'route_localnet given back');
  t.regex(io.ask(remote.ns, 'tcp', remote.node4, HP), /^ERR/, 'the port is closed after detach');
}
