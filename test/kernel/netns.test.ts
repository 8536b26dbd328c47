// Pinned network namespaces through knit, checked with nsenter/ip, stat -L and mountinfo.
import test from 'ava';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createNetns, deleteNetns, identifyNetns, isHostNetns, NetnsError } from '../../src/net/netns.js';
import { isNetns } from '../helpers/net-calls.js';
import { KernelError } from '../../src/net/errors.js';
import { must, run } from '../fixtures/exec.js';
import { linkNamesIn, mountinfo, statId, tempRunDir } from '../helpers/ns-fixtures.js';

test('createNetns pins a new netns with only lo, shared run dir, same identity as stat -L; deleteNetns removes it', async (t) => {
  const dir = tempRunDir(t, 'kn1a-');
  const runDir = `${dir}/netns`; // does not exist yet: createNetns makes it
  const pin = `${runDir}/kn1a-pod`;

  const id = await createNetns(pin);

  t.deepEqual(await linkNamesIn(pin), ['lo']);
  t.like(id, await statId(pin), 'the inode stat -L sees');
  t.deepEqual(identifyNetns(pin), id);
  // Linux 6.18+ numbers namespaces for good (NS_GET_ID): the pin has its own id, not the host's.
  if (identifyNetns('/proc/self/ns/net').id !== undefined) {
    t.regex(id.id ?? '', /^\d+$/);
    t.not(id.id, identifyNetns('/proc/self/ns/net').id);
  }
  t.true(isNetns(pin));
  t.false(isHostNetns(pin));
  t.notDeepEqual(id, await statId('/proc/self/ns/net'));

  const mounts = mountinfo();
  const pinMount = mounts.find((m) => m.mountPoint === pin);
  t.truthy(pinMount, 'the pin is a mount point');
  t.is(pinMount?.fsType, 'nsfs');
  t.is(pinMount?.root, `net:[${id.ino}]`);
  const dirMount = mounts.find((m) => m.mountPoint === runDir);
  t.truthy(dirMount, 'the run dir became a mount point');
  t.true(dirMount!.optional.some((o) => o.startsWith('shared:')), 'the run dir is a shared mount');

  await deleteNetns(pin);
  t.false(existsSync(pin));
  t.falsy(mountinfo().find((m) => m.mountPoint === pin));
});

test('a pin made after another mount namespace was cloned shows up there too (shared propagation)', async (t) => {
  const dir = tempRunDir(t, 'kn1b-');
  const first = `${dir}/kn1b-first`;
  await createNetns(first); // makes dir a shared mount point
  t.teardown(() => deleteNetns(first, { ignoreMissing: true }));

  // A process in its own mount namespace that keeps shared propagation, like a runtime's.
  const other = spawn('unshare', ['--mount', '--propagation', 'unchanged', 'sleep', '60'], { stdio: 'ignore' });
  t.teardown(() => {
    other.kill('SIGKILL');
  });
  const pid = other.pid!;
  // Wait until the child has exec'd into its own mount namespace.
  const ownMnt = await statId('/proc/self/ns/mnt');
  for (let i = 0; i < 200; i++) {
    const r = await run('stat', ['-L', '-c', '%i', `/proc/${pid}/ns/mnt`]);
    if (r.code === 0 && Number(r.stdout.trim()) !== ownMnt.ino && (await run('cat', [`/proc/${pid}/comm`])).stdout.trim() === 'sleep') break;
    await new Promise((r) => setTimeout(r, 10));
  }

  const second = `${dir}/kn1b-second`;
  const id = await createNetns(second);
  t.teardown(() => deleteNetns(second, { ignoreMissing: true }));
  const seen = (await must('nsenter', [`--mount=/proc/${pid}/ns/mnt`, 'stat', '-L', '-c', '%d %i', second])).trim();
  t.is(seen, `${id.dev} ${id.ino}`);

  await deleteNetns(second);
  const after = await run('nsenter', [`--mount=/proc/${pid}/ns/mnt`, 'stat', '-L', '-c', '%i', second]);
  t.not(after.code, 0, 'the unmount propagated and the file is gone in the other mount namespace');
});

test('createNetns refuses an existing path and leaves it untouched', async (t) => {
  const dir = tempRunDir(t, 'kn1c-');
  const file = `${dir}/kn1c-file`;
  writeFileSync(file, 'keep me');
  const err = await t.throwsAsync(createNetns(file), { instanceOf: NetnsError });
  t.is(err?.reason, 'exists');
  t.is(err?.code, 'EEXIST');
  t.regex(err!.message, /kn1c-file/);
  t.is(readFileSync(file, 'utf8'), 'keep me');

  const pin = `${dir}/kn1c-pin`;
  const id = await createNetns(pin);
  t.teardown(() => deleteNetns(pin, { ignoreMissing: true }));
  const again = await t.throwsAsync(createNetns(pin), { instanceOf: NetnsError });
  t.is(again?.reason, 'exists');
  t.deepEqual(identifyNetns(pin), id, 'the existing netns is still pinned');
});

test('identifyNetns names what a non-netns path is', (t) => {
  const dir = tempRunDir(t, 'kn1d-');
  const file = `${dir}/kn1d-regular`;
  writeFileSync(file, '');
  mkdirSync(`${dir}/kn1d-dir`);

  const regular = t.throws(() => identifyNetns(file), { instanceOf: NetnsError });
  t.is(regular?.message, `${file} is not a network namespace (it is a regular file)`);
  t.is(regular?.reason, 'not-netns');
  t.true(regular instanceof KernelError, 'caught like every other kernel error');
  t.is(regular?.netns, file);

  const directory = t.throws(() => identifyNetns(`${dir}/kn1d-dir`), { instanceOf: NetnsError });
  t.is(directory?.message, `${dir}/kn1d-dir is not a network namespace (it is a directory)`);

  const mnt = t.throws(() => identifyNetns('/proc/self/ns/mnt'), { instanceOf: NetnsError });
  t.is(mnt?.message, '/proc/self/ns/mnt is not a network namespace (it is a mount namespace)');

  const missing = t.throws(() => identifyNetns(`${dir}/kn1d-missing`), { instanceOf: NetnsError });
  t.is(missing?.reason, 'missing');
  t.is(missing?.code, 'ENOENT');
  t.regex(missing!.message, /kn1d-missing/);

  t.false(isNetns(file));
  t.false(isNetns(`${dir}/kn1d-missing`));
  t.true(isNetns('/proc/self/ns/net'));

  t.throws(() => identifyNetns(''), { instanceOf: NetnsError, message: /netns path must be a non-empty path/ });
});

test('the host netns is recognised and refused on request', async (t) => {
  // The daemon's own netns always counts as the host's. (pid 1's does too, where this
  // sandbox lets us read /proc/1/ns/net; here it may not.)
  t.true(isHostNetns('/proc/self/ns/net'));
  const host = await statId('/proc/self/ns/net');
  t.like(identifyNetns('/proc/self/ns/net'), host);
  const err = t.throws(() => identifyNetns('/proc/self/ns/net', { rejectHost: true }), { instanceOf: NetnsError });
  t.is(err?.reason, 'host-netns');
  t.regex(err!.message, /host's network namespace/);
  if ((await run('stat', ['-L', '/proc/1/ns/net'])).code === 0) t.true(isHostNetns('/proc/1/ns/net'));

  const dir = tempRunDir(t, 'kn1e-');
  const pin = `${dir}/kn1e-pod`;
  const id = await createNetns(pin);
  t.teardown(() => deleteNetns(pin, { ignoreMissing: true }));
  t.deepEqual(identifyNetns(pin, { rejectHost: true }), id);
});

test('deleteNetns refuses what is not a netns and reports a missing one unless told to ignore it', async (t) => {
  const dir = tempRunDir(t, 'kn1f-');
  const file = `${dir}/kn1f-regular`;
  writeFileSync(file, 'x');
  const notNetns = await t.throwsAsync(deleteNetns(file), { instanceOf: NetnsError });
  t.is(notNetns?.reason, 'not-netns');
  t.true(existsSync(file), 'a non-netns file is never removed');

  const missing = await t.throwsAsync(deleteNetns(`${dir}/kn1f-gone`), { instanceOf: NetnsError });
  t.is(missing?.reason, 'missing');
  await t.notThrowsAsync(deleteNetns(`${dir}/kn1f-gone`, { ignoreMissing: true }));

  const relative = await t.throwsAsync(createNetns('kn1f-relative'), { instanceOf: NetnsError });
  t.is(relative?.reason, 'invalid');
  t.regex(relative!.message, /absolute/);
});

test('concurrent creates in a new run dir all succeed and bind the run dir only once', async (t) => {
  const dir = tempRunDir(t, 'kn1g-');
  const runDir = `${dir}/netns`;
  const pins = Array.from({ length: 16 }, (_, i) => `${runDir}/kn1g-${i}`);
  const ids = await Promise.all(pins.map((p) => createNetns(p)));
  t.teardown(() => Promise.all(pins.map((p) => deleteNetns(p, { ignoreMissing: true }))));
  t.is(new Set(ids.map((id) => id.ino)).size, pins.length, 'each pin is its own netns');
  t.is(mountinfo().filter((m) => m.mountPoint === runDir).length, 1);
  for (const [i, p] of pins.entries()) t.like(ids[i], await statId(p));

  const top = await t.throwsAsync(createNetns('/kn1g-at-root'), { instanceOf: NetnsError });
  t.regex(top!.message, /not directly in \//);
  t.false(existsSync('/kn1g-at-root'));
});
