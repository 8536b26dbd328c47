// Proves the runc fixture on its own (no knit): a busybox container joins a netns the test
// plumbed with `ip`, reaches the host over a veth, and stop() leaves no container, state or
// cgroup behind. Names: kfx1-*, addresses 10.213.41.0/24 (used only here).
import test from 'ava';
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { Cleanup } from '../fixtures/cleanup.js';
import * as net from '../fixtures/net.js';
import { processAlive } from '../fixtures/proc.js';
import { startContainer } from '../fixtures/runc.js';

const NS = 'kfx1-ns';
const HOST_END = 'kfx1-h';
const HOST_IP = '10.213.41.1';

/** The container's cgroup directories, read from the kernel's view of its main process. */
function cgroupDirs(pid: number): string[] {
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8').split('\n');
  const dirs: string[] = [];
  for (const line of readFileSync(`/proc/${pid}/cgroup`, 'utf8').trim().split('\n')) {
    const [, controllers, rel] = line.split(':');
    const name = controllers === '' ? 'unified' : controllers.replace(/^name=/, '');
    // cgroup v1 mounts are named after their controllers; v2 lives at .../unified here.
    const mount = mounts
      .map((m) => m.split(' '))
      .find((f) => f[4].startsWith('/sys/fs/cgroup/') && path.basename(f[4]) === name);
    if (mount) dirs.push(path.join(mount[4], rel));
  }
  return dirs;
}

test.serial('runc fixture: busybox container in a netns pings the host end of its veth; stop() leaves nothing', async (t) => {
  const cleanup = new Cleanup();
  t.teardown(() => cleanup.run());

  await net.deleteLink(HOST_END); // a crashed earlier run may have left it
  const nsPath = await net.createNetns(NS);
  cleanup.defer(`delete netns ${NS}`, () => net.deleteNetns(NS));
  cleanup.defer(`delete link ${HOST_END}`, () => net.deleteLink(HOST_END));
  await net.vethIntoNetns({ hostEnd: HOST_END, hostCidr: `${HOST_IP}/24`, ns: NS, nsEnd: 'eth0', nsCidr: '10.213.41.2/24' });

  const c = await startContainer({ id: 'kfx1-c1', netnsPath: nsPath });
  cleanup.defer('stop container kfx1-c1', () => c.stop());

  // Observed from the host: the container's process is in our netns and has its cgroups.
  t.is(statSync(`/proc/${c.pid}/ns/net`).ino, statSync(nsPath).ino);
  const cgroups = cgroupDirs(c.pid);
  t.true(cgroups.length > 0 && cgroups.every((d) => existsSync(d)), `cgroups: ${cgroups.join(', ')}`);
  t.true(existsSync(path.join(c.stateRoot, 'kfx1-c1')));

  const ping = await c.exec(['ping', '-c', '1', '-W', '2', HOST_IP]);
  t.is(ping.code, 0, ping.stdout + ping.stderr);
  t.regex(ping.stdout, /1 packets received/);
  const addr = await c.exec(['ip', '-o', '-4', 'addr', 'show', 'dev', 'eth0']);
  t.regex(addr.stdout, /inet 10\.213\.41\.2\/24/);

  await c.stop();
  t.false(processAlive(c.pid), `container process ${c.pid} still running`);
  t.false(existsSync(c.stateRoot), `runc state root ${c.stateRoot} still exists`);
  t.false(existsSync('/run/runc/kfx1-c1'));
  t.deepEqual(cgroups.filter((d) => existsSync(d)), [], 'cgroup dirs left behind');
});

test('runc fixture: bad container id and caps are rejected naming the field', async (t) => {
  const nsPath = '/proc/self/ns/net';
  await t.throwsAsync(startContainer({ id: '../x', netnsPath: nsPath }), { message: /startContainer: id/ });
  await t.throwsAsync(startContainer({ id: 'kfx1-c2', netnsPath: nsPath, caps: ['NET_ADMIN'] }), { message: /caps entry "NET_ADMIN"/ });
  await t.throwsAsync(startContainer({ id: 'kfx1-c3', netnsPath: '/run/netns/kfx1-missing' }), { message: /netnsPath .* does not exist/ });
});
