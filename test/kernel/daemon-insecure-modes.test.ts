// knit runs as root and trusts its config file and its directories: one another user can write
// is refused at start-up, naming the path and its mode, before knit makes anything; the modes
// an operator normally has (0700 dirs, a 0644 root-owned config, /tmp-style sticky parents)
// start as before.
import test from 'ava';
import { spawn } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CLI, cleanupDaemon, daemonConfig, eventually, hostLinks, startDaemon, type Daemon } from '../helpers/daemon.js';
import { uniquePrefix } from '../helpers/names.js';

const P = uniquePrefix('insm');
const opts = { prefix: P, subnet: '10.169.9.0/24' };
/** An unprivileged uid that owns nothing on this machine (nobody). */
const OTHER_UID = 65534;

/** A fresh 0700 directory for one test, removed in teardown. */
function scratch(t: { teardown(f: () => void): void }): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), `knit-${P}`));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Runs `knit serve` on this config; answers its exit code and stderr, or 'running' (then
 * it is stopped, by its PID) when it did not exit within 20 s. */
async function serveOnce(configPath: string): Promise<{ code: number | null; stderr: string } | 'running'> {
  const child = spawn(process.execPath, [CLI, 'serve', '--config', configPath], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const timer = new Promise<'running'>((resolve) => setTimeout(() => resolve('running'), 20_000));
  const first = await Promise.race([exited, timer]);
  if (first === 'running') {
    child.kill('SIGTERM');
    await exited;
    return 'running';
  }
  return { code: first, stderr };
}

function writeConfig(dir: string, overrides: Record<string, unknown> = {}): string {
  const configPath = path.join(dir, 'config.json');
  writeFileSync(configPath, JSON.stringify({ ...daemonConfig(opts, dir), ...overrides }), { mode: 0o600 });
  return configPath;
}

const bridgeExists = () => hostLinks().some((l) => l.ifname === `${P}br`);

/** What a refused start must leave: the dir as it was (only the config, and what the test
 * made), no socket, and no bridge. */
function assertNothingMade(t: any, dir: string, expected: string[]): void {
  t.deepEqual(readdirSync(dir).sort(), expected.sort(), 'knit made nothing in its dir');
  t.false(bridgeExists(), 'no bridge was made');
}

test.afterEach.always(() => cleanupDaemon(undefined, opts));

test.serial('a world-writable runDir stops the start, naming the path and its mode, and nothing is made', async (t) => {
  const dir = scratch(t);
  const runDir = path.join(dir, 'run');
  mkdirSync(runDir);
  chmodSync(runDir, 0o777);
  const result = await serveOnce(writeConfig(dir));
  t.not(result, 'running');
  if (result === 'running') return;
  t.not(result.code, 0);
  t.regex(result.stderr, new RegExp(`runDir: ${runDir} \\(mode 0777, uid 0, gid 0\\) is world-writable`));
  assertNothingMade(t, dir, ['config.json', 'run']);
  t.deepEqual(readdirSync(runDir), []);
});

test.serial('a group-writable stateDir of another group, and a socket dir under a world-writable parent, are refused', async (t) => {
  const dir = scratch(t);
  const stateDir = path.join(dir, 'state');
  mkdirSync(stateDir);
  chownSync(stateDir, 0, OTHER_UID);
  chmodSync(stateDir, 0o770);
  let result = await serveOnce(writeConfig(dir));
  t.not(result, 'running');
  if (result !== 'running') {
    t.not(result.code, 0);
    t.regex(result.stderr, new RegExp(`stateDir: ${stateDir} \\(mode 0770, uid 0, gid ${OTHER_UID}\\) is writable by group ${OTHER_UID}`));
  }
  assertNothingMade(t, dir, ['config.json', 'state']);
  rmSync(stateDir, { recursive: true });

  // The socket's dir does not exist yet, but the one above it is world-writable (no sticky bit):
  // anyone could swap the dir knit is about to make.
  const open = path.join(dir, 'open');
  mkdirSync(open);
  chmodSync(open, 0o777);
  result = await serveOnce(writeConfig(dir, { socket: path.join(open, 'sub', 'knit.sock') }));
  t.not(result, 'running');
  if (result !== 'running') t.regex(result.stderr, new RegExp(`socket: ${open} \\(mode 0777, uid 0, gid 0\\) is world-writable`));
  assertNothingMade(t, dir, ['config.json', 'open']);
  t.deepEqual(readdirSync(open), []);
});

test.serial('a world-writable config file, or one owned by another uid, stops the start', async (t) => {
  const dir = scratch(t);
  const configPath = writeConfig(dir);
  chmodSync(configPath, 0o666);
  let result = await serveOnce(configPath);
  t.not(result, 'running');
  if (result !== 'running') {
    t.not(result.code, 0);
    t.regex(result.stderr, new RegExp(`config: ${configPath} \\(mode 0666, uid 0, gid 0\\) is world-writable`));
  }
  assertNothingMade(t, dir, ['config.json']);

  chmodSync(configPath, 0o644);
  chownSync(configPath, OTHER_UID, 0);
  result = await serveOnce(configPath);
  t.not(result, 'running');
  if (result !== 'running') t.regex(result.stderr, new RegExp(`config: ${configPath} \\(mode 0644, uid ${OTHER_UID}, gid 0\\) is owned by uid ${OTHER_UID}`));
  assertNothingMade(t, dir, ['config.json']);
});

test.serial('a CNI network whose plugin dir is world-writable is refused: knit execs those plugins as root', async (t) => {
  const dir = scratch(t);
  const plugins = path.join(dir, 'plugins');
  mkdirSync(plugins);
  chmodSync(plugins, 0o777);
  const cniNet = { name: `${P}cni`, mode: 'cni', cni: { conflist: { cniVersion: '1.0.0', name: 'x', plugins: [{ type: 'bridge' }] }, pluginDirs: [plugins], cacheDir: path.join(dir, 'cache') } };
  const result = await serveOnce(writeConfig(dir, { networks: [...daemonConfig(opts, dir).networks, cniNet] }));
  t.not(result, 'running');
  if (result !== 'running') t.regex(result.stderr, new RegExp(`networks\\[1\\]\\.cni\\.pluginDirs\\[0\\]: ${plugins} \\(mode 0777, uid 0, gid 0\\) is world-writable`));
  assertNothingMade(t, dir, ['config.json', 'plugins']);
});

test.serial('a running daemon rejects a reload from a config file that became world-writable', async (t) => {
  let d: Daemon | undefined;
  t.teardown(() => cleanupDaemon(d, opts));
  d = await startDaemon(opts);
  const config = JSON.parse(readFileSync(d.configPath, 'utf8'));
  chmodSync(d.configPath, 0o666);
  writeFileSync(d.configPath, JSON.stringify({ ...config, networks: [{ ...config.networks[0], mtu: 1400 }] }));
  const rejected = await eventually(
    () => d!.logs.map((l) => JSON.parse(l)).find((l) => /config reload rejected/.test(l.msg)),
    'the reload was rejected',
  );
  t.regex(rejected.err, new RegExp(`config: ${d.configPath} \\(mode 0666, uid 0, gid 0\\) is world-writable`));
  t.false(d.logs.some((l) => /config reloaded/.test(JSON.parse(l).msg)), 'the new config was not applied');
});

test.serial('usual modes start: 0755 root dirs, a 0644 root config, knit\'s dirs below a sticky world-writable dir', async (t) => {
  let d: Daemon | undefined;
  t.teardown(() => cleanupDaemon(d, opts));
  const sticky = scratch(t);
  chmodSync(sticky, 0o1777);
  const runDir = path.join(sticky, 'run');
  mkdirSync(runDir, { mode: 0o755 });
  d = await startDaemon({ ...opts, config: { runDir } });
  t.true(existsSync(path.join(runDir, 'sandboxes')), 'the daemon started and keeps its records there');
  const status = await d.call<{ ready: boolean }>('NodeStatus', {});
  t.true(status.ready);
});
