// KNI CreateNetwork pins a netns in knit's netnsDir and, like `ip netns add`, makes that
// directory a shared bind mount of itself. knit takes back every mount it made: the bind goes
// with the last netns knit pinned there, also across kill -9; a mount knit did not make (the
// directory already a mount point, someone else's pin in it) stays.
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { cleanupDaemon, startDaemon, type Daemon } from '../helpers/daemon.js';
import { kniCall, kniClient } from '../compat/kni-client.js';
import { uniquePrefix } from '../helpers/names.js';

const P = uniquePrefix('kmnt');
const opts = { prefix: P, subnet: '10.169.12.0/24' };

/** Mount points at or under dir, from /proc/self/mountinfo (an observer independent of knit). */
function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter(Boolean)
    .map((l) => l.split(' ')[4].replace(/\\040/g, ' '))
    .filter((m) => m === dir || m.startsWith(`${dir}/`));
}

const umountQuietly = (p: string) => {
  try {
    execFileSync('umount', [p], { stdio: 'ignore' });
  } catch {
    /* not mounted */
  }
};

/** A daemon of this test's own, stopped and its mounts and dirs removed in teardown. */
async function daemon(t: { teardown(f: () => Promise<void> | void): void }): Promise<{ d: () => Daemon; set(d: Daemon): void; netnsDir: string }> {
  let d = await startDaemon(opts);
  const netnsDir = path.join(d.dir, 'netns');
  t.teardown(async () => {
    await d.stop();
    // Whatever a failed test left: pins first, then the directory's own mounts.
    for (const m of mountsUnder(netnsDir).reverse()) umountQuietly(m);
    await cleanupDaemon(d, opts);
  });
  return { d: () => d, set: (next) => (d = next), netnsDir };
}

const create = (d: Daemon, name: string, netnsDir: string) => {
  const client = kniClient(d.socket);
  return kniCall(client, 'CreateNetwork', { name, uid: `${name}-uid`, namespace: 'default', netns_path_prefix: netnsDir }).finally(() => client.close()) as Promise<{ netns_path: string }>;
};
const remove = (d: Daemon, netnsPath: string) => {
  const client = kniClient(d.socket);
  return kniCall(client, 'DeleteNetwork', { id: `${P}x`, netns_path: netnsPath }).finally(() => client.close());
};

test.serial('CreateNetwork binds the netns dir; deleting the last netns knit pinned there unmounts it', async (t) => {
  const { d, netnsDir } = await daemon(t);
  const before = mountsUnder(netnsDir);
  t.deepEqual(before, []);
  const a = await create(d(), `${P}a`, netnsDir);
  const b = await create(d(), `${P}b`, netnsDir);
  t.deepEqual(mountsUnder(netnsDir).sort(), [netnsDir, a.netns_path, b.netns_path].sort(), 'the dir is a mount point holding two pins');
  await remove(d(), a.netns_path);
  t.deepEqual(mountsUnder(netnsDir), [netnsDir, b.netns_path], 'the other pin still needs the shared dir');
  await remove(d(), b.netns_path);
  t.deepEqual(mountsUnder(netnsDir), before, 'no mount knit added is left');
});

test.serial('kill -9 with a netns pinned: after the restart, DeleteNetwork still unmounts; pins gone while knit was down are repaired at start', async (t) => {
  const env = await daemon(t);
  const { netnsDir } = env;
  const a = await create(env.d(), `${P}c`, netnsDir);
  env.d().child.kill('SIGKILL');
  await env.d().exited;
  env.d().close();
  env.set(await env.d().restart());
  t.deepEqual(mountsUnder(netnsDir), [netnsDir, a.netns_path]);
  await remove(env.d(), a.netns_path);
  t.deepEqual(mountsUnder(netnsDir), []);

  // The pin vanishes while knit is down (as after `ip netns del`): the next start drops the bind.
  const b = await create(env.d(), `${P}d`, netnsDir);
  env.d().child.kill('SIGKILL');
  await env.d().exited;
  env.d().close();
  execFileSync('umount', [b.netns_path]);
  execFileSync('rm', [b.netns_path]);
  t.deepEqual(mountsUnder(netnsDir), [netnsDir]);
  env.set(await env.d().restart());
  t.deepEqual(mountsUnder(netnsDir), [], 'start-up repair removed the bind knit made');
});

test.serial('someone else\'s pin in the dir knit bound keeps the bind', async (t) => {
  const { d, netnsDir } = await daemon(t);
  const a = await create(d(), `${P}e`, netnsDir);
  const foreign = path.join(netnsDir, `${P}foreign`);
  writeFileSync(foreign, '');
  execFileSync('mount', ['--bind', '/proc/self/ns/net', foreign]);
  await remove(d(), a.netns_path);
  t.deepEqual(mountsUnder(netnsDir), [netnsDir, foreign], 'the dir stays a mount point while another pin lives in it');
  execFileSync('umount', [foreign]);
});

test.serial('a dir that was a mount point before knit came stays one', async (t) => {
  const { d, netnsDir } = await daemon(t);
  execFileSync('mkdir', ['-p', netnsDir]);
  execFileSync('mount', ['--bind', netnsDir, netnsDir]);
  execFileSync('mount', ['--make-shared', netnsDir]);
  const b = await create(d(), `${P}f`, netnsDir);
  await remove(d(), b.netns_path);
  t.deepEqual(mountsUnder(netnsDir), [netnsDir], 'the operator\'s mount is still there');
});

test.serial('a CreateNetwork that fails after the bind (a file already at the pin path) leaves no mount', async (t) => {
  const { d, netnsDir } = await daemon(t);
  execFileSync('mkdir', ['-p', netnsDir]);
  const taken = path.join(netnsDir, `knit-default-${P}g`);
  writeFileSync(taken, 'not a netns\n');
  await t.throwsAsync(create(d(), `${P}g`, netnsDir));
  t.is(readFileSync(taken, 'utf8'), 'not a netns\n');
  t.deepEqual(mountsUnder(netnsDir), [], 'the bind made for the failed pin was taken back');
});
