// The `knit` command as a user runs it (node bin/knit, a real process), against the api layer
// with in-memory service on a temp socket: exit codes, one-line errors, --json output.
import test, { type ExecutionContext } from 'ava';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { KnitError } from '../../src/base/errors.js';
import { startApiServer } from '../../src/api/server.js';
import { MemorySandboxService } from './api-memory-service.js';
import { tempSocketDir } from './api-grpc-call.js';

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

// Async on purpose: the server answering the child lives in this process's event loop.
function knit(args: string[], socketPath?: string): Promise<Ran> {
  const env = { ...process.env };
  delete env.KNIT_SOCKET;
  if (socketPath) env.KNIT_SOCKET = socketPath;
  return new Promise((resolve) => {
    execFile(process.execPath, ['bin/knit', ...args], { env, timeout: 60_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

async function daemon(t: ExecutionContext, opts: { allowedUids?: number[]; refuse?: boolean } = {}) {
  const dir = tempSocketDir(t, 'kcli-');
  const socketPath = path.join(dir, 'knit.sock');
  const service = new MemorySandboxService();
  const server = await startApiServer({
    socketPath,
    service,
    ...(opts.refuse ? { allowedUids: [12345], peerCred: () => ({ uid: process.getuid!(), gid: 0, pid: 1 }) } : {}),
  });
  t.teardown(() => server.close(100));
  return { socketPath, service };
}

/** Exactly one line on stderr, and it says this. */
function oneLineError(t: ExecutionContext, r: Ran, expected: string | RegExp) {
  const lines = r.stderr.split('\n').filter(Boolean);
  t.is(lines.length, 1, `stderr should be one line, got: ${JSON.stringify(r.stderr)}`);
  if (typeof expected === 'string') t.is(lines[0], expected);
  else t.regex(lines[0]!, expected);
}

test('daemon not running: exit 4 and one line naming the socket', async (t) => {
  const dir = tempSocketDir(t, 'kcli-');
  const socketPath = path.join(dir, 'absent.sock');
  const r = await knit(['list'], socketPath);
  t.is(r.code, 4);
  oneLineError(t, r, `knit list: knit daemon is not running at ${socketPath}`);
  t.is(r.stdout, '');
  // --socket wins over the environment.
  const viaFlag = await knit(['status', '--socket', socketPath], '/nonexistent/other.sock');
  t.is(viaFlag.code, 4);
  oneLineError(t, viaFlag, `knit status: knit daemon is not running at ${socketPath}`);
});

test('usage errors exit 1 with one line', async (t) => {
  const cases: [string[], RegExp][] = [
    [[], /^knit: missing command \(one of serve, attach/],
    [['frobnicate'], /^knit: unknown command "frobnicate"/],
    [['list', '--bogus'], /^knit list: unknown flag --bogus/],
    [['attach', '--netns', '/run/netns/x'], /^knit attach: --id is required/],
    [['attach', '--id', 'a'], /^knit attach: --netns is required/],
    [['attach', '--id', 'a', '--netns', '/x', '--if', 'eth0,colour=red'], /unknown key "colour"/],
    [['attach', '--id', 'a', '--netns', '/x', '--pod', 'a/b/c'], /--pod a\/b\/c: expected namespace\/name/],
    [['query'], /^knit query: a sandbox id is required/],
    [['list', '--timeout', '0'], /--timeout 0: expected a positive number/],
  ];
  for (const [args, expected] of cases) {
    const r = await knit(args, '/nonexistent/knit.sock');
    t.is(r.code, 1, args.join(' '));
    oneLineError(t, r, expected);
  }
});

test('help goes to stdout with exit 0', async (t) => {
  const r = await knit(['help']);
  t.is(r.code, 0);
  t.regex(r.stdout, /^usage: knit <command>/);
  t.regex(r.stdout, /Exit codes: 0 ok, 1 usage, 2 not found, 3 invalid argument, 4 daemon unavailable/);
  const sub = await knit(['attach', '--help']);
  t.is(sub.code, 0);
  t.regex(sub.stdout, /^usage: knit attach --id SANDBOX_ID --netns PATH/);
});

test('attach, query, list, status, plan, gc, detach: human output and --json that parses', async (t) => {
  const { socketPath, service } = await daemon(t);
  const attached = await knit(
    ['attach', '--id', 'kcli-a', '--netns', '/run/netns/kcli-a', '--pod', 'prod/web', '--uid', 'u-1', '--runtime', 'kata',
      '--if', 'eth0,mtu=1400', '--if', 'net1,network=blue,ip=10.9.0.5/24,binding.mode=tcfilter',
      '--port', '127.0.0.1:8080:80/tcp', '--label', 'app=web', '--nameserver', '10.96.0.10', '--json'],
    socketPath,
  );
  t.is(attached.code, 0, attached.stderr);
  const result = JSON.parse(attached.stdout);
  t.is(result.sandbox_id, 'kcli-a');
  t.is(result.runtime, 'KATA');
  t.deepEqual(result.ipconfigs.net1.ip, ['10.9.0.5/24']);
  // Structs come out as plain JSON for scripts.
  t.deepEqual(result.interfaces[1].handoff, { tap: 'tap0_kata', queues: 1 });
  // The flags reached core as one validated request.
  t.deepEqual(service.records.get('kcli-a')!.request, {
    sandboxId: 'kcli-a',
    podName: 'web',
    podNamespace: 'prod',
    podUid: 'u-1',
    netnsPath: '/run/netns/kcli-a',
    runtime: 'kata',
    interfaces: [
      { name: 'eth0', mtu: 1400 },
      { name: 'net1', network: 'blue', ips: ['10.9.0.5/24'], binding: { mode: 'tcfilter' } },
    ],
    portMappings: [{ protocol: 'tcp', containerPort: 80, hostPort: 8080, hostIp: '127.0.0.1' }],
    dns: { nameservers: ['10.96.0.10'], search: [], options: [] },
    labels: { app: 'web' },
    annotations: {},
  });

  const human = await knit(['query', 'kcli-a'], socketPath);
  t.is(human.code, 0, human.stderr);
  t.regex(human.stdout, /^sandbox kcli-a: attached \(kata\), pod prod\/web, netns \/run\/netns\/kcli-a/);
  t.regex(human.stdout, /eth0\s+sandbox\s+veth\s+\S+\s+1400/);
  t.regex(human.stdout, /pod ips: 10\.88\.0\.2, fd00:88::2, 10\.9\.0\.5/);

  const q = JSON.parse((await knit(['query', 'kcli-a', '--json'], socketPath)).stdout);
  t.is(q.sandbox.state, 'ATTACHED');
  t.deepEqual(q.pod_ips, ['10.88.0.2', 'fd00:88::2', '10.9.0.5']);

  const list = await knit(['list'], socketPath);
  t.regex(list.stdout, /^SANDBOX\s+POD\s+RUNTIME\s+STATE\s+NETNS\s+ADDRESSES\n/);
  t.regex(list.stdout, /kcli-a\s+prod\/web\s+kata\s+attached\s+\/run\/netns\/kcli-a\s+10\.88\.0\.2/);
  const listJson = JSON.parse((await knit(['list', '--json'], socketPath)).stdout);
  t.deepEqual(listJson.map((s: { request: { sandbox_id: string } }) => s.request.sandbox_id), ['kcli-a']);

  const status = JSON.parse((await knit(['status', '--json'], socketPath)).stdout);
  t.is(status.networks[0].pools[1].size, '18446744073709551615');
  t.regex((await knit(['status'], socketPath)).stdout, /^node: ready/);

  const plan = JSON.parse((await knit(['plan', '--id', 'kcli-b', '--netns', '/run/netns/kcli-b', '--json'], socketPath)).stdout);
  t.deepEqual(plan.steps[0].undo, { op: 'link.del', name: 'knit0h', ignoreMissing: true });

  const version = JSON.parse((await knit(['version', '--json'], socketPath)).stdout);
  t.is(version.daemon.api_version, 'knit.v1');
  t.is(version.client, version.daemon.version);

  const gc = await knit(['gc', '--json'], socketPath);
  t.deepEqual(JSON.parse(gc.stdout), { removed: [], errors: [] });
  t.deepEqual(service.gcCalls.at(-1), [{ sandboxId: 'kcli-a' }], 'plain gc keeps every recorded sandbox');

  const detached = await knit(['detach', 'kcli-a'], socketPath);
  t.is(detached.code, 0);
  t.is(detached.stdout, 'detached kcli-a\n');
  t.is((await knit(['list'], socketPath)).stdout, 'no sandboxes\n');
});

test('daemon answers become exit codes: 3 invalid, 2 not found, 6 exhausted, 5 other', async (t) => {
  const { socketPath, service } = await daemon(t);
  const invalid = await knit(['attach', '--id', 'kcli-x', '--netns', '/run/netns/x', '--if', 'eth0,mac=zz'], socketPath);
  t.is(invalid.code, 3);
  oneLineError(t, invalid, 'knit attach: interfaces[0].mac: "zz" is not a MAC address');

  const badRuntime = await knit(['attach', '--id', 'kcli-x', '--netns', '/x', '--runtime', 'lxc'], socketPath);
  t.is(badRuntime.code, 3);
  oneLineError(t, badRuntime, 'knit attach: --runtime lxc: must be one of runc, kata, kubevirt');

  const missing = await knit(['query', 'kcli-nope'], socketPath);
  t.is(missing.code, 2);
  oneLineError(t, missing, 'knit query: sandbox kcli-nope is not attached');

  for (const id of ['kcli-1', 'kcli-2', 'kcli-3']) {
    t.is((await knit(['attach', '--id', id, '--netns', `/run/netns/${id}`], socketPath)).code, 0);
  }
  const full = await knit(['attach', '--id', 'kcli-4', '--netns', '/run/netns/kcli-4'], socketPath);
  t.is(full.code, 6);
  oneLineError(t, full, /^knit attach: network default: pool 10\.88\.0\.0\/24 has no free address$/);

  service.failNext.check = new KnitError('INTERNAL', 'record store is\nunreadable');
  const other = await knit(['check', 'kcli-1'], socketPath);
  t.is(other.code, 5);
  oneLineError(t, other, 'knit check: record store is unreadable');
});

test('a refused peer uid: exit 4 saying the daemon closed the connection', async (t) => {
  const { socketPath } = await daemon(t, { refuse: true });
  const r = await knit(['list'], socketPath);
  t.is(r.code, 4);
  oneLineError(t, r, `knit list: knit daemon at ${socketPath} closed the connection (is uid ${process.getuid!()} in its allowed uids?)`);
});
