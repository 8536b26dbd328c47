// Host ports after a kill -9: before each host-port step of an attach and each inverse of a
// detach, the daemon dies; the next start rolls the attach back or finishes the detach, and no
// host-port table, conntrack entry or route_localnet change is left. A table whose record was
// lost goes at start-up, and one no record owns goes with knit gc.
import test, { type ExecutionContext } from 'ava';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { startDaemon, cleanupDaemon, podFactory, runcAttachReq, type Daemon } from '../helpers/daemon.js';
import { crashAndRestart, crashBeforeEachDetachInverse, assertNothingLeft } from '../helpers/crash.js';

const P = 'hhpc';
// hairpin: false, so the plan has the host ports' own hairpin step to crash before.
const opts = { prefix: P, subnet: '10.181.4.0/24', subnet6: 'fd00:181:4::/64', network: { hairpin: false } };
const INSTANCE = `knit-${P}`;
const { pod, ids, removeAll } = podFactory(P);
let d: Daemon | undefined;

const req = (id: string, ns: string) =>
  runcAttachReq(id, ns, { extra: { port_mappings: [{ protocol: 'TCP', container_port: 80, host_port: 18180 }, { protocol: 'UDP', container_port: 53, host_port: 18181 }] } });
const nft = (...args: string[]) => execFileSync('/usr/sbin/nft', args, { encoding: 'utf8' });
const tables = () => (JSON.parse(nft('-j', 'list', 'tables')).nftables as any[]).filter((x) => x.table?.name.startsWith(`hostports-${INSTANCE}-`)).map((x) => x.table.name);
const localnet = () => readFileSync(`/proc/sys/net/ipv4/conf/${P}br/route_localnet`, 'utf8').trim();

async function assertNoHostPorts(t: ExecutionContext, daemon: Daemon, id: string, ns: string, when: string) {
  await assertNothingLeft(t, daemon, id, ns, when);
  t.deepEqual(tables(), [], `no host-port table (${when})`);
  t.is(localnet(), '0', `route_localnet given back (${when})`);
}

test.after.always(async () => {
  await cleanupDaemon(d, opts, ids);
  removeAll();
  for (const table of tables()) nft('delete', 'table', 'inet', table);
});

test.serial('kill -9 before each host-port step of an attach, and of a detach: the next start leaves nothing', async (t) => {
  const p = pod(1);
  d = await startDaemon(opts);
  const { steps } = await d.call('Plan', { attach: req(p.id, p.path) });
  const first = steps.findIndex((s: any) => /route_localnet|hairpin on bridge port .* \(host ports\)/.test(s.description));
  t.true(first > 0, 'the plan has host-port steps');
  await d.stop();
  for (let n = first; n <= steps.length; n++) {
    const armed = await d.restart({ KNIT_FAILPOINT: `attach:${n}` });
    d = await crashAndRestart(armed, () => armed.call('Attach', req(p.id, p.path)));
    await assertNoHostPorts(t, d, p.id, p.ns, `crash before attach step ${n}`);
    await d.stop();
  }
  // The detach's inverses: the host-port ones come first (they were the last steps).
  const { d: after, crashes } = await crashBeforeEachDetachInverse(
    d,
    p.id,
    async (daemon) => {
      await daemon.call('Attach', req(p.id, p.path));
      t.is(tables().length, 1);
    },
    (daemon, when) => assertNoHostPorts(t, daemon, p.id, p.ns, when),
  );
  d = after;
  const inverses = steps.slice(first).filter((s: any) => s.undo).length;
  t.true(crashes > inverses, `a crash before each of the ${inverses} host-port inverses and the veth's (${crashes} crashes)`);
  d = await d.restart();
});

test.serial('a table whose record is lost goes at the next start; one no record owns goes with knit gc', async (t) => {
  const p = pod(2);
  d ??= await startDaemon(opts);
  await d.call('Attach', req(p.id, p.path));
  t.is(tables().length, 1);
  await d.stop();
  const recordDir = path.join(d.dir, 'run', 'sandboxes');
  for (const f of readdirSync(recordDir)) rmSync(path.join(recordDir, f));
  d = await d.restart();
  t.deepEqual(tables(), [], 'start-up repair deleted the table no record owns');
  t.true(d.logs.some((l) => l.includes('leakedTables') && l.includes(`hostports-${INSTANCE}-`)), 'and said so');

  const stray = `hostports-${INSTANCE}-000000000000`;
  const others = `hostports-knit-${P}x-000000000000`; // another daemon's: never touched
  nft('add', 'table', 'inet', stray);
  nft('add', 'table', 'inet', others);
  try {
    const gc = await d.call('GarbageCollect', { keep_recorded: true });
    t.true(gc.removed.some((r: string) => r.includes(stray)), JSON.stringify(gc));
    t.deepEqual(tables(), []);
    t.true(nft('list', 'tables').includes(others), "another instance's table is left alone");
  } finally {
    nft('delete', 'table', 'inet', others);
  }
});
