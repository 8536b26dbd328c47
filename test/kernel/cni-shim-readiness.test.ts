// knit-cni readiness and its durable DEL queue, exec'd as a runtime execs it against a real
// daemon: CNI STATUS answers 50 (plugin not available) with the reason while the daemon is down,
// while NodeStatus is not ready, and while the install (conflist + shim) is not whole; 0 once all
// are. A queued DEL that fails is retried with backoff while the daemon runs, and after its
// maximum moves to failed/ with a log line, a metric and a NodeStatus condition.
import test from 'ava';
import { spawnSync, execFileSync } from 'node:child_process';
import { existsSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startDaemon, cleanupDaemon, hostLinks, podFactory, eventually, freePort, CLI, type Daemon, type DaemonOptions } from '../helpers/daemon.js';
import { uniquePrefix } from '../helpers/names.js';
import { knitShimConf } from '../helpers/cni.js';

const P = uniquePrefix('scnr');
const SHIM = path.resolve('build', 'native', 'knit-cni');
const MESH = `${P}mesh`;
let d: Daemon | undefined;
let metricsPort = 0;
const { pod, ids, removeAll } = podFactory(P);
const opts: DaemonOptions = { prefix: P, subnet: '10.185.1.0/24' };

test.before(async () => {
  metricsPort = await freePort();
  opts.config = { metricsAddress: `127.0.0.1:${metricsPort}`, cniDeleteRetry: { maxAttempts: 3, backoffMs: 1500 } };
  d = await startDaemon(opts);
});

test.after.always(async () => {
  await cleanupDaemon(d, opts, ids);
  removeAll();
});

const conf = (extra: object = {}) => knitShimConf(P, d!.dir, extra);

function shim(command: string, env: { id?: string; netns?: string } = {}, config: object = conf()) {
  const r = spawnSync(SHIM, [], {
    input: JSON.stringify(config),
    encoding: 'utf8',
    env: { PATH: process.env.PATH, CNI_COMMAND: command, CNI_CONTAINERID: env.id ?? '', CNI_NETNS: env.netns ?? '', CNI_IFNAME: 'eth0', CNI_ARGS: '', CNI_PATH: '/usr/lib/cni' },
  });
  return { code: r.status, out: r.stdout.trim() ? JSON.parse(r.stdout) : undefined, raw: r.stdout };
}

const knit = (...args: string[]) => execFileSync(process.execPath, [CLI, ...args], { encoding: 'utf8' });
const linksOf = (id: string) => hostLinks().filter((l) => l.ifalias?.includes(`sandbox=${id};`));
const queueDir = () => conf().deleteQueue;
const logged = (msg: string) => d!.logs.map((l) => JSON.parse(l)).filter((l) => l.msg === msg);
const metric = async (name: string) => {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
};

test.serial('STATUS: 50 while the daemon is down, 50 naming the reason while NodeStatus is not ready or the install is not whole, 0 when all are', async (t) => {
  const bin = path.join(d!.dir, 'cni-bin');
  const confDir = path.join(d!.dir, 'net.d');
  knit('install-cni', '--bin-dir', bin, '--conf-dir', confDir, '--config', d!.configPath, '--network', `${P}net`, '--cni-network', `${P}cni`);
  t.teardown(() => {
    spawnSync(process.execPath, [CLI, 'uninstall-cni', '--bin-dir', bin, '--conf-dir', confDir, '--config', d!.configPath]);
  });
  const ok = shim('STATUS');
  t.is(ok.code, 0, ok.raw);

  // The install: the conflist knit wrote is gone (a node clean-up, a hand edit).
  const conflist = path.join(confDir, '10-knit.conflist');
  renameSync(conflist, `${conflist}.away`);
  const noConf = shim('STATUS');
  t.is(noConf.code, 1);
  t.is(noConf.out.code, 50, noConf.raw);
  t.true(noConf.out.msg.includes(conflist), noConf.out.msg);
  renameSync(`${conflist}.away`, conflist);
  // The shim knit installed replaced by something else.
  writeFileSync(path.join(bin, 'knit'), '#!/bin/sh\n');
  const foreign = shim('STATUS');
  t.is(foreign.out?.code, 50, foreign.raw);
  t.regex(foreign.out.msg, /no longer knit's knit-cni/);
  rmSync(path.join(bin, 'knit')); // install-cni never replaces a file it did not write
  knit('install-cni', '--bin-dir', bin, '--conf-dir', confDir, '--config', d!.configPath, '--network', `${P}net`, '--cni-network', `${P}cni`);
  t.is(shim('STATUS').code, 0);
  // uninstall-cni removes the record with the files: nothing is left to be missing.
  knit('uninstall-cni', '--bin-dir', bin, '--conf-dir', confDir, '--config', d!.configPath);
  t.false(existsSync(path.join(d!.dir, 'state', 'cni-install.json')));
  t.is(shim('STATUS').code, 0);

  // The daemon down: 50 (CNI 1.1 STATUS), naming the socket.
  await d!.stop();
  const down = shim('STATUS');
  t.is(down.code, 1);
  t.is(down.out.code, 50, down.raw);
  t.true(down.out.msg.includes(conf().socket));
  // ADD keeps asking the runtime to retry (after its wait for a starting daemon, cut to 0 here).
  const p = pod(1);
  t.is(shim('ADD', { id: p.id, netns: p.path }, conf({ daemonWaitSeconds: 0 })).out.code, 11);

  // The daemon up but not ready (a required extension is not registered): 50 with the reason.
  writeFileSync(d!.configPath, JSON.stringify({ ...JSON.parse(execFileSync('cat', [d!.configPath], { encoding: 'utf8' })), requiredExtensions: [MESH] }));
  d = await d!.restart();
  const unready = shim('STATUS');
  t.is(unready.out?.code, 50, unready.raw);
  t.true(unready.out.msg.includes(`required extension ${MESH} is not registered`), unready.out.msg);
  const status = await d.call('NodeStatus', {});
  t.false(status.ready);
  // Ready again.
  const cfg = JSON.parse(execFileSync('cat', [d.configPath], { encoding: 'utf8' }));
  delete cfg.requiredExtensions;
  writeFileSync(d.configPath, JSON.stringify(cfg));
  await d.stop();
  d = await d.restart();
  t.is(shim('STATUS').code, 0);
});

test.serial('a queued DEL that fails is retried with backoff while the daemon runs; after its maximum it moves to failed/ with a log line, a metric and a NodeStatus condition', async (t) => {
  const a = pod(2);
  const b = pod(3);
  t.is(shim('ADD', { id: a.id, netns: a.path }).code, 0);
  t.is(shim('ADD', { id: b.id, netns: b.path }).code, 0);
  await d!.stop();
  // The runtime's DEL of a while knit is down: queued, and done at the start.
  t.is(shim('DEL', { id: a.id, netns: a.path }).code, 0);
  // A request no retry can carry out (a DEL without CNI_CONTAINERID) ...
  const broken = path.join(queueDir(), `${P}broken.eth0.json`);
  writeFileSync(broken, JSON.stringify({ v: 1, command: 'DEL', containerId: '', netns: '', ifname: 'eth0', args: '', path: '', config: '{}' }));
  // ... and one that fails at the start but is put right before its retry.
  const later = path.join(queueDir(), `${b.id}.eth0.json`);
  writeFileSync(later, JSON.stringify({ v: 1, command: 'DEL', containerId: '', config: '{}' }));
  d = await d!.restart();
  t.false(existsSync(path.join(queueDir(), `${a.id}.eth0.json`)), 'a carried out at the start');
  await t.throwsAsync(d.call('Query', { sandbox_id: a.id }));
  t.true(existsSync(`${later}.attempts`), 'attempts are counted on disk');
  t.true(logged('queued CNI DEL failed; retrying').length >= 2);
  const fixed = JSON.parse(execFileSync('cat', [later], { encoding: 'utf8' }));
  writeFileSync(`${later}.tmp`, JSON.stringify({ ...fixed, containerId: b.id, netns: b.path, ifname: 'eth0', config: JSON.stringify(conf()) }));
  renameSync(`${later}.tmp`, later);
  // The retry (1.5 s after the start) carries b out; the broken one gives up after 3 attempts.
  // The request file goes first, its attempts file just after: wait for both.
  await eventually(() => !existsSync(later) && !existsSync(`${later}.attempts`), 'the retried DEL of b done', 15_000);
  await t.throwsAsync(d.call('Query', { sandbox_id: b.id }));
  // The log line comes after the move and the attempts file's removal (and the metric with it).
  const gaveUpLine = 'queued CNI DEL gave up; moved to failed/ (what it names may be left behind: remove it with knit detach, then delete the file)';
  await eventually(() => logged(gaveUpLine).length > 0, 'the broken DEL given up', 20_000);
  t.true(existsSync(path.join(queueDir(), 'failed', path.basename(broken))));
  t.false(existsSync(broken));
  t.false(existsSync(`${broken}.attempts`));
  const gaveUp = logged(gaveUpLine);
  t.is(gaveUp.length, 1);
  t.is(gaveUp[0].attempts, 3);
  t.is(await metric('knit_cni_queued_deletes_failed_total'), 1);
  t.is(await metric('knit_cni_queued_deletes_failed'), 1);
  const status = await d.call('NodeStatus', {});
  t.true(status.ready, 'a failed DEL does not stop new pods');
  t.regex(status.message, /CNI delete queue: 1 queued DEL\(s\) gave up/);
  // Still given up after a restart (not retried again); gone from NodeStatus once the operator removes it.
  await d.stop();
  d = await d.restart();
  t.deepEqual(readdirSync(queueDir()).filter((n) => n !== 'failed'), []);
  rmSync(path.join(queueDir(), 'failed', path.basename(broken)));
  t.notRegex((await d.call('NodeStatus', {})).message, /CNI delete queue/);
  t.deepEqual(linksOf(a.id), []);
  await eventually(() => linksOf(b.id).length === 0, 'links of b deleted');
  t.pass();
});
