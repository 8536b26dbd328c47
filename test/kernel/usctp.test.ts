// usctp, the stand-in for kernel SCTP in the cnp suite's agnhost image (this kernel has no
// CONFIG_IP_SCTP; scripts/network-policy-api/usctp, agnhost-image.sh): between two netns on a
// veth pair, `usctp connect` and `usctp porter` must answer as agnhost's connect and porter do
// on a kernel with SCTP, with genuine SCTP on the wire that conntrack tracks and nft rules
// judge. Observed through agnhost's own contract (exit code, stderr) and nft counters of a real
// table in the server's netns (`meta l4proto sctp`, `sctp dport`, `ct state`).
import test from 'ava';
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cnpConformance } from '../fixtures/cnp-conformance.js';
import { makeNetns, uniquePrefix } from '../helpers/names.js';

const P = uniquePrefix('usctp');
const TABLE = `${P.replace('-', '_')}t`;
const [CLIENT_IP, SERVER_IP] = ['10.219.7.1', '10.219.7.2'];
test.serial.before(() => cnpConformance()); // the first build may take minutes

const inNs = (ns: string, argv: string[], input?: string) =>
  execFileSync('ip', ['netns', 'exec', ns, ...argv], { encoding: 'utf8', ...(input !== undefined && { input }) });

/** Two netns joined by a veth pair; teardown removes both. */
function pair(t: Parameters<typeof makeNetns>[0]) {
  const client = makeNetns(t, P, 'c').name;
  const server = makeNetns(t, P, 's').name;
  execFileSync('ip', ['link', 'add', `${P}c`, 'netns', client, 'type', 'veth', 'peer', 'name', `${P}s`, 'netns', server]);
  for (const [ns, ip, dev] of [[client, CLIENT_IP, `${P}c`], [server, SERVER_IP, `${P}s`]] as const) {
    inNs(ns, ['ip', 'addr', 'add', `${ip}/24`, 'dev', dev]);
    inNs(ns, ['ip', 'link', 'set', dev, 'up']);
    inNs(ns, ['ip', 'link', 'set', 'lo', 'up']);
  }
  return { client, server };
}

/** `usctp porter` serving SCTP port → reply, as the suite's porter containers do (its upstream
 * here is sleep); resolves once it says it serves. Teardown ends it by PID. */
async function porter(t: Parameters<typeof makeNetns>[0], usctp: string, ns: string, port: number): Promise<ChildProcess> {
  const child = spawn('ip', ['netns', 'exec', ns, usctp, 'porter', '/bin/sleep', 'infinity'], {
    env: { ...process.env, [`SERVE_SCTP_PORT_${port}`]: 'foo' }, stdio: ['ignore', 'ignore', 'pipe'],
  });
  t.teardown(() => stop(child));
  let said = '';
  await new Promise<void>((resolve, reject) => {
    child.stderr!.on('data', (d) => {
      said += d;
      if (said.includes(`serving SCTP port ${port}`)) resolve();
    });
    child.once('exit', (code) => reject(new Error(`usctp porter exited (${code}): ${said}`)));
  });
  return child;
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await gone;
}

/** agnhost connect's contract: exit code and stderr. */
function connect(usctp: string, ns: string, port: number, order: 'flags-first' | 'address-first' = 'flags-first'): { status: number | null; stderr: string } {
  const flags = ['--timeout=3s', '--protocol=sctp'];
  const address = `${SERVER_IP}:${port}`;
  const r = spawnSync('ip', ['netns', 'exec', ns, usctp, 'connect', ...(order === 'flags-first' ? [...flags, address] : [address, ...flags])], { encoding: 'utf8' });
  return { status: r.status, stderr: r.stderr };
}

/** Counts SCTP to the server by conntrack state; with `drop`, drops SCTP to port 9003 first. */
function counters(server: string, drop: boolean) {
  inNs(server, ['nft', '-f', '-'], `table inet ${TABLE}\ndelete table inet ${TABLE}\ntable inet ${TABLE} {
  chain input {
    type filter hook input priority 0; policy accept;
    ${drop ? 'sctp dport 9003 counter drop' : ''}
    meta l4proto sctp ct state new counter
    meta l4proto sctp ct state established counter
    meta l4proto sctp ct state invalid counter
  }
}
`);
  return () => {
    const rules = JSON.parse(inNs(server, ['nft', '-j', 'list', 'table', 'inet', TABLE])).nftables.filter((x: any) => x.rule);
    const packets = rules.map((x: any) => x.rule.expr.find((e: any) => e.counter).counter.packets as number);
    const [dropped, fresh, established, invalid] = drop ? packets : [0, ...packets];
    return { dropped, new: fresh, established, invalid };
  };
}

test.serial('usctp (user-space SCTP stand-in; this kernel has none): agnhost connect\'s answers, real SCTP judged by nft', async (t) => {
  const { usctp } = await cnpConformance();
  const { client, server } = pair(t);
  t.teardown(() => spawnSync('ip', ['netns', 'exec', server, 'nft', 'delete', 'table', 'inet', TABLE]));
  const p9003 = await porter(t, usctp, server, 9003);
  const p9005 = await porter(t, usctp, server, 9005); // a second server in the netns, as the suite's pods have

  let count = counters(server, false);
  t.deepEqual(connect(usctp, client, 9003), { status: 0, stderr: '' }, 'a served port connects: exit 0, nothing on stderr');
  let c = count();
  t.is(c.new, 1, 'one packet opened the association in conntrack (the INIT)');
  t.true(c.established >= 2, `the handshake's and data's packets are tracked as established SCTP (${c.established})`);
  t.is(c.invalid, 0, 'conntrack found no packet invalid (ports, tags, CRC32c)');
  t.deepEqual(connect(usctp, client, 9005), { status: 0, stderr: '' }, 'the other server\'s port connects too');
  t.deepEqual(connect(usctp, client, 9003, 'address-first'), { status: 0, stderr: '' }, 'flags after the address, as the Kubernetes NetworkPolicy suite passes them');

  count = counters(server, true);
  t.deepEqual(connect(usctp, client, 9003), { status: 1, stderr: 'TIMEOUT\n' }, 'an nft drop on sctp dport: TIMEOUT, as the suite expects of a denied poke');
  c = count();
  t.true(c.dropped >= 1, `the rule dropped the INITs (${c.dropped})`);
  t.is(c.new, 0, 'none got past it');

  counters(server, false);
  t.deepEqual(connect(usctp, client, 9004), { status: 1, stderr: 'OTHER: connection refused\n' },
    'a port no server has: ABORT, which agnhost connect prints as OTHER: connection refused (its SCTP path has no REFUSED)');

  await stop(p9003);
  await stop(p9005);
  t.deepEqual(connect(usctp, client, 9003), { status: 1, stderr: 'OTHER: protocol not available\n' },
    'no SCTP endpoint at all in the peer netns: ICMP protocol unreachable, ENOPROTOOPT as kernel SCTP reports it');
});
