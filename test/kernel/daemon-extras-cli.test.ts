// The knit command against a real daemon, run as a user would run it (node build/.../main.js),
// with exit codes and output checked, and what it reports checked with ip and ping.
import test from 'ava';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import {
  CLI, startDaemon, cleanupDaemon, makeNetns, removeNetns, ipJson, pingFrom, eventually, hostLinks, type Daemon,
} from '../helpers/daemon.js';

const P = 'kcl';
const opts = { prefix: P, subnet: '10.234.8.0/24' };
let d: Daemon | undefined;
const netnsNames: string[] = [];
const ids: string[] = [];

function knit(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, KNIT_SOCKET: '' } });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const remote = (...args: string[]) => knit(...args, '--socket', d!.socket);

test.before(async () => {
  d = await startDaemon(opts);
});

test.after.always(async () => {
  await cleanupDaemon(d, opts, ids);
  for (const n of netnsNames) removeNetns(n);
});

test.serial('attach --json prints the result; its address is on the pod and answers ping; status, list, query and detach work', async (t) => {
  const ns = `${P}-pod1`;
  const id = `${P}-sb1`;
  netnsNames.push(ns);
  ids.push(id);
  const nsPath = makeNetns(ns);

  const a = remote('attach', '--id', id, '--netns', nsPath, '--pod', 'cli/p1', '--json');
  t.is(a.code, 0, a.stderr);
  const result = JSON.parse(a.stdout);
  t.is(result.sandbox_id, id);
  const address: string = result.ips[0].address;
  t.regex(address, /^10\.234\.8\.\d+\/24$/);
  const ipOnly = address.split('/')[0]!;
  const [eth0] = ipJson(['addr', 'show', 'dev', 'eth0'], ns);
  t.true(eth0.addr_info.some((x: any) => `${x.local}/${x.prefixlen}` === address), 'ip sees the printed address in the pod');
  t.true(pingFrom(undefined, ipOnly), 'the host pings the printed address');

  const s = remote('status');
  t.is(s.code, 0, s.stderr);
  t.regex(s.stdout, /^node: ready/m);
  t.regex(s.stdout, /sandboxes: 1/);
  t.regex(s.stdout, new RegExp(`^${P}net\\s+bridge\\s+yes\\s+10\\.234\\.8\\.0/24\\s+\\d+/\\d+`, 'm'));
  const sj = remote('status', '--json');
  t.is(sj.code, 0);
  t.is(JSON.parse(sj.stdout).sandboxes, 1);

  const l = remote('list');
  t.is(l.code, 0, l.stderr);
  const row = l.stdout.split('\n').find((line) => line.startsWith(id));
  t.truthy(row, l.stdout);
  t.true(row!.includes('cli/p1') && row!.includes(nsPath) && row!.includes(ipOnly), row);
  const lj = JSON.parse(remote('list', '--json').stdout);
  t.deepEqual(lj.map((x: any) => x.request.sandbox_id), [id]);

  const q = remote('query', '--id', id);
  t.is(q.code, 0, q.stderr);
  t.regex(q.stdout, new RegExp(`^sandbox ${id}: attached`, 'm'));
  t.regex(q.stdout, new RegExp(`pod ips: ${ipOnly.replace(/\./g, '\\.')}`));
  t.regex(q.stdout, /live: matches the record/);

  const det = remote('detach', '--id', id);
  t.is(det.code, 0, det.stderr);
  t.is(det.stdout.trim(), `detached ${id}`);
  await eventually(() => !hostLinks().some((x) => x.ifalias?.includes(`sandbox=${id};`)), 'host end reaped');
  t.deepEqual(ipJson(['link', 'show'], ns).map((x: any) => x.ifname), ['lo']);
  t.false(pingFrom(undefined, ipOnly), 'the address is gone');
  t.is(remote('list').stdout.trim(), 'no sandboxes');
});

test.serial('query of an unknown sandbox exits 2 with a one-line error naming it', (t) => {
  const r = remote('query', '--id', `${P}-nobody`);
  t.is(r.code, 2);
  t.is(r.stdout, '');
  const lines = r.stderr.trim().split('\n');
  t.is(lines.length, 1, r.stderr);
  t.regex(lines[0]!, new RegExp(`^knit query: .*${P}-nobody`));
});

test.serial('a socket that does not exist exits 4 with a one-line error naming it', (t) => {
  const missing = path.join(d!.dir, 'no-daemon-here.sock');
  for (const args of [['status'], ['query', '--id', 'x'], ['attach', '--id', 'x', '--netns', '/run/netns/x']]) {
    const r = knit(...args, '--socket', missing);
    t.is(r.code, 4, `${args[0]}: ${r.stderr}`);
    const lines = r.stderr.trim().split('\n');
    t.is(lines.length, 1, r.stderr);
    t.is(lines[0], `knit ${args[0]}: knit daemon is not running at ${missing}`);
  }
});

test.serial('attach of a netns that is not one exits 3 naming netns_path, and leaves nothing', (t) => {
  const r = remote('attach', '--id', `${P}-bad`, '--netns', '/etc/hostname');
  ids.push(`${P}-bad`);
  t.is(r.code, 3, r.stderr);
  t.regex(r.stderr, /netns_path/);
  t.is(r.stderr.trim().split('\n').length, 1);
  t.false(hostLinks().some((x) => x.ifalias?.includes(`sandbox=${P}-bad;`)));
});
